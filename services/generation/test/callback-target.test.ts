import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PlatformTargets, platformTargets } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { type StripeStandIn, startStripeStandIn } from '../../../test/support/stand-ins/stripe.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { CallbackPolicy, deliverCallback } from '../src/callbacks.ts';
import { type GenerationHarness, QUERY, startGeneration } from './harness.ts';

const SECRET = 'callback-secret-0123456789';
/** What `npm start` allow-lists: this whole machine. */
const THIS_MACHINE = '127.0.0.0/8,::1/128,localhost';
const STRIPE_KEY = 'sk_test_callback_target';

/** An unpaid Checkout Session on the stand-in, as billing opens one for a pack. */
async function openSession(stripe: StripeStandIn): Promise<string> {
  const form = new URLSearchParams({
    mode: 'payment',
    success_url: 'http://127.0.0.1/done',
    'line_items[0][price_data][currency]': 'usd',
    'line_items[0][price_data][unit_amount]': '500',
    'line_items[0][quantity]': '1',
  });
  const response = await fetch(`${stripe.url}/v1/checkout/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
  });
  return ((await response.json()) as { id: string }).id;
}

async function paymentStatus(stripe: StripeStandIn, session: string): Promise<string> {
  const response = await fetch(`${stripe.url}/v1/checkout/sessions/${session}`, { headers: { authorization: `Bearer ${STRIPE_KEY}` } });
  return ((await response.json()) as { payment_status: string }).payment_status;
}

describe("generation: callbacks never reach the platform's own services or stand-ins", function () {
  this.timeout(30_000);
  let stripe: StripeStandIn;
  let receiver: Server;
  let receiverUrl = '';
  const received: string[] = [];

  before(async () => {
    stripe = await startStripeStandIn({ webhookSecrets: ['whsec_callback_target'], secretKey: STRIPE_KEY });
    receiver = createServer((request, response) => {
      received.push(request.url ?? '');
      request.resume();
      response.writeHead(204).end();
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  });
  after(async () => {
    await stripe.close();
    receiver.close();
  });

  it('names every *_URL of the configuration, and the peers at their loopback ports when unset', () => {
    const targets = platformTargets({
      GATEWAY_URL: 'http://tempora-gateway:8080',
      STRIPE_API_URL: 'http://127.0.0.1:12111',
      DATABASE_URL: 'postgres://u:p@db.internal/tempora',
      PUBLIC_URL: 'https://tempora.example',
      LOG_LEVEL: 'info',
      BROKEN_URL: 'not a url',
    });
    const byName = Object.fromEntries(targets.map((target) => [target.name, `${target.host}:${target.port}`]));
    assert.deepEqual(byName, {
      GATEWAY_URL: 'tempora-gateway:8080',
      GENERATION_URL: '127.0.0.1:8081',
      GRAPH_URL: '127.0.0.1:8082',
      SIMULATION_URL: '127.0.0.1:8083',
      CONDUCTOR_URL: '127.0.0.1:8084',
      BILLING_URL: '127.0.0.1:8085',
      STRIPE_API_URL: '127.0.0.1:12111',
      DATABASE_URL: 'db.internal:5432',
      PUBLIC_URL: 'tempora.example:443',
    });
  });

  it('matches by port and by host as written or resolved, every loopback address being this machine', async () => {
    const resolve = async (host: string) => (host === 'tempora-gateway' ? ['10.0.0.8'] : host === 'localhost' ? ['127.0.0.1', '::1'] : []);
    const own = new PlatformTargets(platformTargets({ GATEWAY_URL: 'http://tempora-gateway:8080', STRIPE_API_URL: 'http://localhost:12111' }), resolve);
    const reached = async (raw: string, addresses: string[] = []) => (await own.reached(new URL(raw), addresses))?.name;
    for (const raw of [
      'http://127.0.0.1:12111/_stand_in/pay/cs',
      'http://127.9.9.9:12111/',
      'http://[::1]:12111/',
      'http://0.0.0.0:12111/',
      'http://[::ffff:127.0.0.1]:12111/',
      'http://2130706433:12111/',
      'http://LOCALHOST.:12111/',
    ]) {
      assert.equal(await reached(raw), 'STRIPE_API_URL', raw);
    }
    assert.equal(await reached('http://hooks.example:12111/', ['127.0.0.1']), 'STRIPE_API_URL', 'a name resolving to loopback');
    assert.equal(await reached('http://tempora-gateway.tempora.svc:8080/', ['10.0.0.8']), 'GATEWAY_URL', 'another name for the same address');
    assert.equal(await reached('http://[::ffff:10.0.0.8]:8080/'), 'GATEWAY_URL', 'IPv4-mapped');
    assert.equal(await reached('http://127.0.0.1:12112/'), undefined, 'another port');
    assert.equal(await reached('http://10.0.0.9:8080/'), undefined, 'another address');
    assert.equal(await reached('https://hooks.example/', ['93.184.216.34']), undefined);
  });

  describe('through the service', () => {
    let gen: GenerationHarness;
    let saved: string | undefined;
    before(async () => {
      // The generation service reads the platform's addresses from its environment, as npm start gives it STRIPE_API_URL.
      saved = process.env.STRIPE_API_URL;
      process.env.STRIPE_API_URL = stripe.url;
      gen = await startGeneration({ CALLBACK_SECRET: SECRET, CALLBACK_ALLOWLIST: THIS_MACHINE });
    });
    after(async () => {
      await gen?.stop();
      if (saved === undefined) delete process.env.STRIPE_API_URL;
      else process.env.STRIPE_API_URL = saved;
    });

    it("refuses with 422 on body.callback_url a callback to the Stripe stand-in's pay action or to a peer, although this machine is allow-listed", async () => {
      const session = await openSession(stripe);
      const port = new URL(stripe.url).port;
      const targets = [
        `${stripe.url}/_stand_in/pay/${session}`,
        `http://localhost:${port}/_stand_in/pay/${session}`,
        `http://127.0.0.2:${port}/_stand_in/pay/${session}`,
        'http://127.0.0.1:8080/api/v1/credits/grant',
        'http://localhost:8085/api/v1/billing/webhooks/stripe',
      ];
      for (const url of targets) {
        const reply = await gen.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: url });
        assert.equal(reply.status, 422, `${url}: ${JSON.stringify(reply.body)}`);
        assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
        assert.equal(reply.body.errors[0].path, 'body.callback_url');
        assert.match(reply.body.errors[0].message, /platform's own (STRIPE_API_URL|GATEWAY_URL|BILLING_URL)/);
      }
      assert.equal(await paymentStatus(stripe, session), 'unpaid');
      assert.deepEqual(stripe.events, []);
    });

    it("still delivers to a receiver on this machine that is none of the platform's", async () => {
      received.length = 0;
      const reply = await gen.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: receiverUrl });
      assert.equal(reply.status, 202, JSON.stringify(reply.body));
      await waitFor('the callback received', async () => received.length === 1);
    });
  });

  describe('at delivery time', () => {
    const options = (policy: CallbackPolicy) => ({
      secret: SECRET,
      policy,
      maxAttempts: 2,
      backoffMs: 10,
      timeoutMs: 2_000,
      logger: createLogger('generation', 'silent'),
    });

    it('refuses a name that resolved to a public address when the job was accepted and to the stand-in now', async () => {
      const session = await openSession(stripe);
      const port = new URL(stripe.url).port;
      let answer = ['93.184.216.34'];
      const policy = new CallbackPolicy(THIS_MACHINE.split(','), async () => answer, platformTargets({ STRIPE_API_URL: stripe.url }));
      const url = `http://hooks.example:${port}/_stand_in/pay/${session}`;
      assert.equal(await policy.check(url), undefined, 'accepted while it resolves elsewhere');
      answer = ['127.0.0.1'];
      const outcome = await deliverCallback(url, 'job-moved', { ok: true }, options(policy));
      assert.equal(outcome.delivered, false);
      assert.equal(outcome.attempts, 1, 'refused before any request');
      assert.match(outcome.error ?? '', /platform's own STRIPE_API_URL/);
      assert.equal(await paymentStatus(stripe, session), 'unpaid');
    });

    it('refuses the address a connection actually dials when it is the stand-in (the check saw a public one)', async () => {
      const session = await openSession(stripe);
      const port = new URL(stripe.url).port;
      // The check's resolver says public; the connection resolves localhost itself and gets loopback, which the allow-list lets through.
      const policy = new CallbackPolicy(
        THIS_MACHINE.split(','),
        async () => ['93.184.216.34'],
        platformTargets({ STRIPE_API_URL: `http://127.0.0.1:${port}` }),
      );
      const url = `http://localhost:${port}/_stand_in/pay/${session}`;
      const outcome = await deliverCallback(url, 'job-rebound', { ok: true }, { ...options(policy), maxAttempts: 1 });
      assert.equal(outcome.delivered, false);
      assert.match(outcome.error ?? '', /platform's own STRIPE_API_URL .*when connecting/);
      assert.equal(await paymentStatus(stripe, session), 'unpaid');
    });
  });
});
