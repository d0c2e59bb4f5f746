/**
 * SSRF (issue 21, "Who gets in"): the only URL a user supplies that a Tempora service then calls is the
 * generation service's `callback_url` (docs/reliability.md lists the others and why they are not called).
 * It is refused for loopback, private, link-local, metadata and other internal targets, written any way a
 * URL can write them or reached through a DNS name, a redirect or a name that changes its answer between
 * the check and the connection, unless CALLBACK_ALLOWLIST admits it. The platform here admits one host and
 * port, 127.0.0.1:CALLBACK_PORT; `npm start` admits this machine (scripts/start.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'mocha';
import { CallbackPolicy, deliverCallback } from '../../services/generation/src/callbacks.ts';
import { createLogger } from '../../services/kit/src/observability/index.ts';
import { listenStandIn, type StandIn } from '../support/http.ts';
import { waitFor } from '../support/wait.ts';
import { answerCallbacks, CALLBACK_PORT, SECRETS, type SecurityPlatform, securityPlatform } from './platform.ts';

const service = { 'x-service-key': SECRETS.serviceKey };

describe('security: SSRF through user-supplied URLs (generation callbacks)', function () {
  this.timeout(300_000);
  let platform: SecurityPlatform;
  let trap: StandIn;
  let trapPort: number;
  const received: string[] = [];
  const trapped: string[] = [];
  let redirecting = false;

  before(async function () {
    this.timeout(400_000);
    answerCallbacks((req, res) => {
      received.push(req.url ?? '');
      req.resume();
      if (redirecting) res.writeHead(302, { location: `http://127.0.0.1:${trapPort}/stolen` }).end();
      else res.writeHead(204).end();
    });
    trap = await listenStandIn((req, res) => {
      trapped.push(req.url ?? '');
      req.resume();
      res.writeHead(204).end();
    });
    trapPort = Number(new URL(trap.url).port);
    platform = await securityPlatform();
  });
  after(() => trap?.stop());

  const start = (callbackUrl: string) =>
    fetch(`${platform.urls.generation}/api/v1/timepoints/generate`, {
      method: 'POST',
      headers: { ...service, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'The first flight at Kitty Hawk', callback_url: callbackUrl }),
    }).then(async (response) => ({ status: response.status, body: (await response.json()) as any }));

  function callbackOf(jobId: string): Promise<{ status: string; attempts: number; error?: string }> {
    const ended = async () => {
      const job = (await (await fetch(`${platform.urls.generation}/api/v1/timepoints/jobs/${jobId}`, { headers: service })).json()) as any;
      return job.callback?.status !== 'pending' && job.callback;
    };
    return waitFor(`job ${jobId}'s callback to end`, ended, { timeoutMs: 120_000, intervalMs: 300 });
  }

  it('refuses every internal target, however written, with 422 and the reason', async () => {
    const port = trapPort;
    const targets = [
      `http://127.0.0.1:${port}/`, // loopback, another port than the allow-listed one
      `http://localhost:${CALLBACK_PORT}/`, // a name resolving to loopback (the allow-list names 127.0.0.1, not localhost)
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`, // IPv4-mapped IPv6
      `http://[::127.0.0.1]:${port}/`, // IPv4-compatible IPv6
      `http://2130706433:${port}/`, // 127.0.0.1 as one decimal number
      `http://0x7f.1:${port}/`, // and in hex, shortened
      `http://0.0.0.0:${port}/`,
      'http://10.0.0.1/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://100.64.0.1/', // carrier-grade NAT
      'http://169.254.169.254/latest/meta-data/', // cloud metadata
      'http://[fd00:ec2::254]/', // AWS metadata over IPv6
      'http://[fe80::1]/',
      'http://[64:ff9b::a9fe:a9fe]/', // NAT64 of 169.254.169.254
      'http://[2002:a9fe:a9fe::]/', // 6to4 of 169.254.169.254
      'http://metadata.google.internal/', // does not resolve here; refused either way
      `http://user:secret@127.0.0.1:${CALLBACK_PORT}/`, // credentials in the URL
      'file:///etc/passwd',
      'gopher://127.0.0.1:6379/_INFO',
    ];
    const accepted: string[] = [];
    for (const target of targets) {
      const reply = await start(target);
      if (reply.status !== 422) accepted.push(`${target}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 200)}`);
    }
    assert.deepEqual(accepted, []);
    assert.deepEqual(trapped, [], 'nothing reached the trap');
  });

  it('delivers, signed, to the allow-listed host and port', async () => {
    received.length = 0;
    const reply = await start(`http://127.0.0.1:${CALLBACK_PORT}/hooks/ok`);
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    const callback = await callbackOf(reply.body.job_id);
    assert.equal(callback.status, 'delivered', JSON.stringify(callback));
    assert.deepEqual(received, ['/hooks/ok']);
  });

  it('does not follow a redirect from an allowed receiver to an internal address', async () => {
    redirecting = true;
    try {
      const reply = await start(`http://127.0.0.1:${CALLBACK_PORT}/hooks/redirect`);
      assert.equal(reply.status, 202, JSON.stringify(reply.body));
      const callback = await callbackOf(reply.body.job_id);
      assert.equal(callback.status, 'failed');
      assert.match(callback.error ?? '', /302/);
    } finally {
      redirecting = false;
    }
    assert.deepEqual(trapped, [], 'the redirect target was never called');
  });

  it('checks the address actually connected to: a name that turns private after the check is refused (DNS rebinding)', async () => {
    // The check sees a public address; the connection resolves the name again and gets loopback.
    const policy = new CallbackPolicy([], async () => ['93.184.216.34']);
    const url = `http://localhost:${trapPort}/rebound`;
    assert.equal(await policy.check(url), undefined);
    const outcome = await deliverCallback(
      url,
      'job-rebinding',
      { ok: true },
      {
        secret: 'x'.repeat(32),
        policy,
        maxAttempts: 2,
        backoffMs: 10,
        timeoutMs: 2_000,
        logger: createLogger('generation', 'silent'),
      },
    );
    assert.equal(outcome.delivered, false);
    assert.match(outcome.error ?? '', /loopback or private address/);
    assert.deepEqual(trapped, []);
  });
});
