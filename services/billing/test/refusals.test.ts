import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BUNDLE_ID, type Chain, chainX5c, makeChain, notificationBody, signJws, transaction } from '../../../test/support/stand-ins/apple.ts';
import { signatureFor, stripeEvent } from '../../../test/support/stand-ins/stripe.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { ADMIN_KEY, APPLE_WEBHOOK, asUser, type BillingHarness, OLD_WEBHOOK_SECRET, STRIPE_WEBHOOK, service, useBilling, WEBHOOK_SECRET } from './harness.ts';

const DAY = 86_400_000;

/** billing_refusals_total by channel and reason, read from /metrics. */
async function refusals(h: BillingHarness): Promise<Map<string, number>> {
  const text = await scrape(h);
  const counts = new Map<string, number>();
  for (const match of text.matchAll(/^billing_refusals_total\{([^}]*)\} (\d+)/gm)) {
    const labels = Object.fromEntries([...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((label) => [label[1], label[2]]));
    counts.set(`${labels.channel}/${labels.reason}`, Number(match[2]));
  }
  return counts;
}

describe('billing: refusals', function () {
  this.timeout(60_000);
  const logs: string[] = [];
  let h: BillingHarness;
  let userId: string;
  useBilling(
    (started) => {
      h = started;
    },
    {},
    { logs },
  );
  before(async () => {
    userId = await h.user();
  });

  const paidSession = () => ({
    id: `cs_test_${randomUUID().replace(/-/g, '')}`,
    object: 'checkout.session',
    mode: 'payment',
    payment_status: 'paid',
    payment_intent: `pi_test_${randomUUID().replace(/-/g, '')}`,
    client_reference_id: userId,
    metadata: { user_id: userId, pack_id: 'starter' },
    amount_total: 499,
    currency: 'usd',
  });

  /** Sends, expects a 400 problem with `reason`, one more count of it, and nothing granted. */
  async function refused(channel: string, reason: string, send: () => Promise<{ status: number; headers: Headers; body: any }>) {
    const before = (await refusals(h)).get(`${channel}/${reason}`) ?? 0;
    const reply = await send();
    assert.equal(reply.status, 400, `${reason}: ${JSON.stringify(reply.body)}`);
    assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
    assert.equal(reply.body.reason, reason, JSON.stringify(reply.body));
    assert.equal((await refusals(h)).get(`${channel}/${reason}`), before + 1);
    await h.settled();
    assert.equal(await h.balance(userId), 0, 'nothing was granted');
    return reply;
  }

  describe('Stripe webhooks', () => {
    it('refuses a delivery without a Stripe-Signature', async () => {
      await refused('stripe-webhook', 'missing-signature', () =>
        h.call('POST', STRIPE_WEBHOOK, {
          raw: JSON.stringify(stripeEvent('checkout.session.completed', paidSession())),
          headers: { 'content-type': 'application/json' },
        }),
      );
    });

    it('refuses a signature by a secret that is not configured', async () => {
      await refused('stripe-webhook', 'bad-signature', () =>
        h.stripeEvent(stripeEvent('checkout.session.completed', paidSession()), { secrets: ['whsec_someone_else'] }),
      );
    });

    it('refuses a body changed after signing', async () => {
      const event = stripeEvent('checkout.session.completed', paidSession());
      const signature = signatureFor(JSON.stringify(event), [WEBHOOK_SECRET]);
      const forged = JSON.stringify({ ...event, data: { object: { ...event.data.object, metadata: { user_id: userId, pack_id: 'historian' } } } });
      await refused('stripe-webhook', 'bad-signature', () => h.stripeEvent(event, { raw: forged, signature }));
    });

    it('refuses a signature older than the 300 s tolerance, even with the right secret', async () => {
      const reply = await refused('stripe-webhook', 'stale-signature', () =>
        h.stripeEvent(stripeEvent('checkout.session.completed', paidSession()), { timestamp: Math.floor(Date.now() / 1000) - 301 }),
      );
      assert.match(reply.body.detail, /300 s/);
    });

    it('refuses a Stripe-Signature that is not t=…,v1=…', async () => {
      await refused('stripe-webhook', 'malformed-signature', () =>
        h.stripeEvent(stripeEvent('checkout.session.completed', paidSession()), { signature: 'sha256=deadbeef' }),
      );
    });

    it('refuses a signed body that is not JSON, or not an event', async () => {
      await refused('stripe-webhook', 'malformed-body', () => h.stripeEvent({}, { raw: 'not json at all' }));
      await refused('stripe-webhook', 'malformed-body', () => h.stripeEvent({ hello: 'world' }));
    });

    it('refuses a signed event whose object lacks what its type promises', async () => {
      await refused('stripe-webhook', 'malformed-event', () =>
        h.stripeEvent(stripeEvent('checkout.session.completed', { id: 'cs_test_x', object: 'checkout.session' })),
      );
    });

    it('accepts the previous secret during a rotation, and a delivery signed by both', async () => {
      const old = await h.stripeEvent(stripeEvent('checkout.session.completed', paidSession()), { secrets: [OLD_WEBHOOK_SECRET] });
      assert.equal(old.status, 200);
      const both = await h.stripeEvent(stripeEvent('checkout.session.completed', paidSession()), { secrets: ['whsec_rolled_new', WEBHOOK_SECRET] });
      assert.equal(both.status, 200);
      await h.settled();
      assert.equal(await h.balance(userId), 200);
      // The tests after this one expect nothing granted: they use another user.
      userId = await h.user();
    });
  });

  describe('App Store notifications and transactions', () => {
    const subscribed = async (
      chain: Chain,
      fields: Parameters<typeof transaction>[0] = { productId: 'dev.tempora.credits.starter', appAccountToken: userId },
      options: Parameters<typeof notificationBody>[1] = { type: 'SUBSCRIBED' },
    ) => notificationBody(chain, { ...options, signedTransaction: await signJws(chain, transaction(fields)) });

    it('refuses a body that is not {"signedPayload": "<JWS>"}', async () => {
      await refused('apple-webhook', 'malformed-body', () => h.appleNotification('{not json'));
      await refused('apple-webhook', 'malformed-body', () => h.appleNotification(JSON.stringify({ payload: 'x' })));
      await refused('apple-webhook', 'malformed-body', () => h.appleNotification(JSON.stringify({ signedPayload: 'only.two' })));
    });

    it('refuses data signed through a root that is not configured', async () => {
      const foreign = await makeChain();
      await refused('apple-webhook', 'untrusted-chain', async () =>
        h.appleNotification(await subscribed(foreign, { productId: 'dev.tempora.credits.starter', appAccountToken: userId })),
      );
    });

    it("refuses a chain without Apple's marker OIDs, even under the configured root", async () => {
      const unmarked = await makeChain({ withoutOids: true, root: h.appleRoot });
      await refused('apple-webhook', 'untrusted-chain', async () => h.appleNotification(await subscribed(unmarked)));
    });

    it('refuses a leaf that was not valid when the data was signed', async () => {
      const expired = await makeChain({ root: h.appleRoot, leafNotBefore: new Date(Date.now() - 400 * DAY), leafNotAfter: new Date(Date.now() - 30 * DAY) });
      await refused('apple-webhook', 'expired-certificate', async () => h.appleNotification(await subscribed(expired)));
    });

    it('refuses a chain that is not exactly three certificates', async () => {
      const payload = {
        notificationType: 'TEST',
        notificationUUID: randomUUID(),
        signedDate: Date.now(),
        data: { bundleId: BUNDLE_ID, environment: 'Sandbox' },
      };
      const short = await signJws(h.apple, payload, { x5c: chainX5c(h.apple).slice(0, 2) });
      await refused('apple-webhook', 'bad-chain', () => h.appleNotification(JSON.stringify({ signedPayload: short })));
    });

    it('refuses a payload changed after signing', async () => {
      const body = JSON.parse(await subscribed(h.apple)) as { signedPayload: string };
      const [header, payload, signature] = body.signedPayload.split('.');
      const changed = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'));
      changed.notificationType = 'DID_RENEW';
      const forged = `${header}.${Buffer.from(JSON.stringify(changed)).toString('base64url')}.${signature}`;
      await refused('apple-webhook', 'bad-signature', () => h.appleNotification(JSON.stringify({ signedPayload: forged })));
    });

    it("refuses another app's notification, and another environment's", async () => {
      await refused('apple-webhook', 'wrong-app', async () =>
        h.appleNotification(
          await subscribed(
            h.apple,
            { productId: 'dev.tempora.credits.starter', appAccountToken: userId },
            { type: 'SUBSCRIBED', bundleId: 'com.example.other' },
          ),
        ),
      );
      await refused('apple-webhook', 'wrong-environment', async () =>
        h.appleNotification(
          await subscribed(h.apple, { productId: 'dev.tempora.credits.starter', appAccountToken: userId }, { type: 'SUBSCRIBED', environment: 'Production' }),
        ),
      );
    });

    it("refuses a verified notification whose transaction is another environment's or signed elsewhere", async () => {
      await refused('apple-webhook', 'wrong-environment', async () =>
        h.appleNotification(await subscribed(h.apple, { productId: 'dev.tempora.credits.starter', appAccountToken: userId, environment: 'Production' })),
      );
      const foreign = await makeChain();
      const body = await notificationBody(h.apple, {
        type: 'SUBSCRIBED',
        signedTransaction: await signJws(foreign, transaction({ productId: 'dev.tempora.credits.starter', appAccountToken: userId })),
      });
      await refused('apple-webhook', 'untrusted-chain', () => h.appleNotification(body));
    });

    it("refuses a posted transaction that is not verifiable, another app's, or another account's", async () => {
      await refused('apple-transaction', 'malformed-body', () => h.postTransaction(userId, 'not-a-jws'));
      await refused('apple-transaction', 'untrusted-chain', async () =>
        h.postTransaction(userId, await signJws(await makeChain(), transaction({ productId: 'dev.tempora.credits.starter' }))),
      );
      await refused('apple-transaction', 'wrong-app', async () =>
        h.postTransaction(userId, await signJws(h.apple, transaction({ productId: 'dev.tempora.credits.starter', bundleId: 'com.example.other' }))),
      );
      await refused('apple-transaction', 'foreign-account', async () =>
        h.postTransaction(userId, await signJws(h.apple, transaction({ productId: 'dev.tempora.credits.starter', appAccountToken: randomUUID() }))),
      );
    });
  });

  describe('who may call', () => {
    it("answers users only through the gateway's identity (service key and X-User-ID)", async () => {
      assert.equal((await h.call('GET', '/api/v1/billing/subscription')).status, 401);
      assert.equal((await h.call('GET', '/api/v1/billing/subscription', { headers: { 'X-User-ID': userId } })).status, 401, 'X-User-ID alone is not trusted');
      assert.equal((await h.call('GET', '/api/v1/billing/subscription', { headers: { 'X-Service-Key': 'wrong', 'X-User-ID': userId } })).status, 401);
      assert.equal((await h.call('GET', '/api/v1/billing/subscription', { headers: service })).status, 401);
      assert.equal((await h.call('GET', '/api/v1/billing/subscription', { headers: asUser('not-a-uuid') })).status, 400);
      assert.equal((await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) })).status, 200);
      assert.equal((await h.call('GET', '/api/v1/billing/packs')).status, 401);
    });

    it("keeps operator routes from users' forwarded requests", async () => {
      assert.equal((await h.call('GET', `/api/v1/billing/users/${userId}`, { headers: asUser(userId) })).status, 403);
      assert.equal((await h.call('POST', `/api/v1/billing/users/${userId}/resync`, { headers: asUser(userId) })).status, 403);
      assert.equal((await h.call('GET', `/api/v1/billing/users/${userId}`, { headers: service })).status, 200);
      assert.equal((await h.call('GET', `/api/v1/billing/users/${userId}`, { headers: { 'X-Admin-Key': ADMIN_KEY } })).status, 200);
    });

    it('needs no credential at the webhooks, which authenticate by signature', async () => {
      const reply = await h.call('POST', APPLE_WEBHOOK, {
        raw: await notificationBody(h.apple, { type: 'TEST' }),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(reply.status, 200);
      assert.equal(reply.body.outcome, 'ignored');
    });
  });

  describe('logs', () => {
    it("logs every refusal with its reason and none of the payload's secrets", () => {
      const refusalsLogged = logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'refused');
      assert.ok(refusalsLogged.length >= 20, `${refusalsLogged.length} refusals logged`);
      assert.ok(refusalsLogged.every((line) => typeof line.reason === 'string' && typeof line.channel === 'string'));
      const all = logs.join('\n');
      // No secret, no signature, no signed data (JWS start with eyJ).
      for (const secret of [WEBHOOK_SECRET, OLD_WEBHOOK_SECRET, 'v1=', 'eyJ']) assert.ok(!all.includes(secret), `the logs hold ${secret}`);
    });
  });
});
