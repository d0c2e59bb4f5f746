import assert from 'node:assert/strict';
import { scrape } from '../../kit/test/metrics-support.ts';
import { type GatewayHarness, startGateway, useGateway } from './harness.ts';

describe('gateway: rate limits', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  useGateway(
    (started) => {
      gw = started;
    },
    { env: { RATE_LIMIT_MULTIPLIER: '1', DEMO_SIGNINS_PER_HOUR: '2' } },
  );

  const headersOf = (reply: { headers: Headers }) => ({
    limit: Number(reply.headers.get('x-ratelimit-limit')),
    remaining: Number(reply.headers.get('x-ratelimit-remaining')),
    reset: Number(reply.headers.get('x-ratelimit-reset')),
  });

  it('Free: 10 per minute, then 429 with Retry-After in whole seconds; headers on every response', async () => {
    const user = await gw.user({ tier: 'free' });
    const seen: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      const reply = await gw.call('GET', '/api/v1/credits/balance', { headers: user.headers });
      assert.equal(reply.status, 200);
      const state = headersOf(reply);
      assert.equal(state.limit, 10, 'the minute window is the tightest');
      assert.ok(state.reset >= 1 && state.reset <= 60);
      seen.push(state.remaining);
    }
    assert.deepEqual(seen, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    const limited = await gw.call('GET', '/api/v1/credits/balance', { headers: user.headers });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('content-type'), 'application/problem+json');
    assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
    assert.ok(Number(limited.headers.get('retry-after')) >= 1 && Number(limited.headers.get('retry-after')) <= 60);
    assert.equal(headersOf(limited).remaining, 0);
    assert.match(await scrape(gw.server), /gateway_rate_limit_rejections_total\{window="tier-free"[^}]*\} [1-9]/);
  });

  it('Pro: 60 per minute; Enterprise: 300 per minute (headers name the tightest window)', async () => {
    const pro = await gw.user({ tier: 'pro' });
    const enterprise = await gw.user({ tier: 'enterprise' });
    assert.equal(headersOf(await gw.call('GET', '/api/v1/auth/me', { headers: pro.headers })).limit, 60);
    assert.equal(headersOf(await gw.call('GET', '/api/v1/auth/me', { headers: enterprise.headers })).limit, 300);
    const upgraded = await gw.user({ tier: 'free' });
    assert.equal(
      (
        await gw.call('PUT', `/api/v1/users/${upgraded.userId}/tier`, {
          headers: { 'X-Service-Key': 'gw-service-key-0123456789' },
          body: { tier: 'enterprise' },
        })
      ).status,
      200,
    );
    assert.equal(headersOf(await gw.call('GET', '/api/v1/auth/me', { headers: upgraded.headers })).limit, 300, 'a new tier applies at once');
    const replies = await Promise.all(Array.from({ length: 61 }, () => gw.call('GET', '/api/v1/credits/costs', { headers: pro.headers })));
    assert.equal(replies.filter((r) => r.status === 429).length, 2, 'the /auth/me call and 59 of these fit in 60');
  });

  it('counts the day window too: it becomes the tightest when fewer requests are left in the day', async () => {
    const user = await gw.user({ tier: 'free' });
    const limiter = gw.instance.limiter;
    const { tierWindows } = await import('../src/domain/limits.ts');
    const windows = tierWindows('free', `user:${user.userId}`, {
      multiplier: 1,
      anonymousPerMinute: 60,
      servicePerMinute: 6000,
      authenticatedReadsPerMinute: 300,
      authenticatedWritesPerMinute: 30,
    });
    // Spend 95 of the day's 100 directly in the day window.
    for (let i = 0; i < 95; i += 1) await limiter.consume([windows[1]!]);
    const reply = await gw.call('GET', '/api/v1/auth/me', { headers: user.headers });
    assert.equal(reply.status, 200);
    assert.deepEqual([headersOf(reply).limit, headersOf(reply).remaining], [100, 4]);
    assert.ok(headersOf(reply).reset > 60);
  });

  it("never lowers a limit by signing in: public reads spend only the account's 300 reads a minute, not the tier's", async () => {
    const user = await gw.user({ tier: 'free' });
    const publicReads = await Promise.all(Array.from({ length: 61 }, () => gw.call('GET', '/api/v1/graph/moments', { headers: user.headers })));
    assert.deepEqual([...new Set(publicReads.map((reply) => reply.status))], [200], 'past the anonymous 60 and the Free 10 a minute');
    assert.equal(headersOf(publicReads[0]!).limit, 300);
    const own = await gw.call('GET', '/api/v1/credits/balance', { headers: user.headers });
    assert.deepEqual(
      [headersOf(own).limit, headersOf(own).remaining],
      [10, 9],
      "the account's own reads spend the tier's minute, which public reads left alone",
    );
    const anonymous = await Promise.all(
      Array.from({ length: 61 }, () => gw.call('GET', '/api/v1/graph/moments', { headers: { 'X-Forwarded-For': '203.0.113.90' } })),
    );
    assert.equal(anonymous.filter((reply) => reply.status === 429).length, 1, 'an anonymous caller gets 60');
  });

  it('bounds every account at 30 writes a minute whatever its tier, and counts the refusal by that window', async () => {
    const enterprise = await gw.user({ tier: 'enterprise' });
    const writes = [];
    for (let i = 0; i < 31; i += 1) writes.push(await gw.call('POST', '/api/v1/graph/moments', { headers: enterprise.headers, body: { i } }));
    assert.equal(writes.filter((reply) => reply.status === 429).length, 1);
    assert.equal(headersOf(writes[0]!).limit, 30);
    assert.equal(writes[30]!.status, 429);
    const read = await gw.call('GET', '/api/v1/auth/me', { headers: enterprise.headers });
    assert.equal(read.status, 200, 'reads have their own window');
    assert.equal(headersOf(read).limit, 300);
    assert.match(await scrape(gw.server), /gateway_rate_limit_rejections_total\{window="authenticated-writes"[^}]*\} [1-9]/);
  });

  it("limits an account's API keys with its tokens, and anonymous callers per IP", async () => {
    const user = await gw.user({ tier: 'free' });
    const key = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'limits' } })).body.key as string;
    const byKey = await gw.call('GET', '/api/v1/credits/balance', { headers: { 'X-API-Key': key } });
    assert.equal(byKey.status, 200);
    assert.deepEqual([headersOf(byKey).limit, headersOf(byKey).remaining], [10, 8], "the key spends the account's window, which its creation already counted");
    const anonymous = await gw.call('GET', '/api/v1/credits/costs');
    assert.equal(headersOf(anonymous).limit, 60);
    const invalid = await gw.call('GET', '/api/v1/credits/costs', { headers: { Authorization: 'Bearer nope' } });
    assert.equal(invalid.status, 401);
    assert.equal(headersOf(invalid).limit, 60, 'refused credentials are counted per IP and still get the headers');
    assert.equal(headersOf(invalid).remaining, headersOf(anonymous).remaining - 1);
  });

  it("takes the client address from the trusted proxy's entry of X-Forwarded-For, not from the client's", async () => {
    const first = await gw.call('GET', '/api/v1/credits/costs', { headers: { 'X-Forwarded-For': '10.0.0.1, 203.0.113.7' } });
    const second = await gw.call('GET', '/api/v1/credits/costs', { headers: { 'X-Forwarded-For': '10.9.9.9, 203.0.113.7' } });
    assert.equal(headersOf(second).remaining, headersOf(first).remaining - 1, 'a spoofed leftmost entry does not buy a fresh budget');
    const other = await gw.call('GET', '/api/v1/credits/costs', { headers: { 'X-Forwarded-For': '203.0.113.8' } });
    assert.equal(headersOf(other).remaining, 59, 'another client behind the proxy has its own budget');
  });

  it('reports the state on every answer, probes, documentation and preflights included, never counting or refusing those', async () => {
    const client = { 'X-Forwarded-For': '203.0.113.60' };
    const before = headersOf(await gw.call('GET', '/api/v1/credits/costs', { headers: client }));
    const uncounted = [
      ...['/health', '/openapi.json', '/docs', '/redoc'].map((path) => gw.call('GET', path, { headers: client })),
      gw.call('OPTIONS', '/api/v1/credits/costs', { headers: { ...client, Origin: 'https://app.tempora.test', 'Access-Control-Request-Method': 'GET' } }),
    ];
    for (const reply of await Promise.all(uncounted)) {
      assert.ok(reply.status === 200 || reply.status === 204, String(reply.status));
      const state = headersOf(reply);
      assert.deepEqual([state.limit, state.remaining], [before.limit, before.remaining], "the caller's window, as it stands");
      assert.ok(state.reset >= 1 && state.reset <= before.reset);
    }
    const after = headersOf(await gw.call('GET', '/api/v1/credits/costs', { headers: client }));
    assert.equal(after.remaining, before.remaining - 1, 'none of them was counted');
    const user = await gw.user({ tier: 'free' });
    assert.equal(headersOf(await gw.call('GET', '/health', { headers: user.headers })).limit, 10, 'a signed-in caller sees its own window');
    for (let i = 0; i < after.remaining; i += 1) await gw.call('GET', '/api/v1/credits/costs', { headers: client });
    assert.equal((await gw.call('GET', '/api/v1/credits/costs', { headers: client })).status, 429);
    const probe = await gw.call('GET', '/health', { headers: client });
    assert.equal(probe.status, 200, 'never refused');
    assert.equal(headersOf(probe).remaining, 0);
  });

  it('limits demo sign-ins per IP', async () => {
    assert.equal((await gw.call('POST', '/api/v1/auth/demo')).status, 201);
    assert.equal((await gw.call('POST', '/api/v1/auth/demo')).status, 201);
    const third = await gw.call('POST', '/api/v1/auth/demo');
    assert.equal(third.status, 429);
    assert.ok(Number(third.headers.get('retry-after')) > 60);
  });

  it('says when demo sign-ins run out what happened and when to retry, with that window in the headers', async () => {
    const client = { 'X-Forwarded-For': '203.0.113.70' };
    const first = await gw.call('POST', '/api/v1/auth/demo', { headers: client });
    assert.equal(first.status, 201);
    assert.deepEqual([headersOf(first).limit, headersOf(first).remaining], [2, 1], 'the demo window is the tightest');
    assert.equal((await gw.call('POST', '/api/v1/auth/demo', { headers: client })).status, 201);
    const refused = await gw.call('POST', '/api/v1/auth/demo', { headers: client });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('content-type'), 'application/problem+json');
    assert.equal(refused.body.title, 'Demo sign-in limit reached');
    assert.equal(refused.body.type, 'https://tempora.dev/problems/demo-sign-in-limit');
    assert.match(refused.body.detail, /used its 2 demo sign-ins of the hour.*next is possible in \d+ min.*POST \/api\/v1\/auth\/refresh/);
    assert.equal(String(refused.body.retry_after), refused.headers.get('retry-after'));
    assert.ok(Date.parse(refused.body.retry_at) > Date.now() + 60_000);
    assert.deepEqual([headersOf(refused).limit, headersOf(refused).remaining], [2, 0]);
  });

  it('gives a loopback address its own demo limit when one is set (npm start raises it)', async () => {
    const local = await startGateway({ DEMO_SIGNINS_PER_HOUR: '1', DEMO_SIGNINS_PER_HOUR_LOOPBACK: '3' });
    try {
      const statuses = async (headers: Record<string, string>) => {
        const seen: number[] = [];
        for (let i = 0; i < 4; i += 1) seen.push((await local.call('POST', '/api/v1/auth/demo', { headers })).status);
        return seen;
      };
      assert.deepEqual(await statuses({}), [201, 201, 201, 429], 'from this machine (127.0.0.1)');
      assert.deepEqual(await statuses({ 'X-Forwarded-For': '203.0.113.80' }), [201, 429, 429, 429], 'from elsewhere, behind the trusted proxy');
    } finally {
      await local.stop();
    }
  });
});
