import assert from 'node:assert/strict';
import { scrape } from '../../kit/test/metrics-support.ts';
import { type GatewayHarness, type SignedIn, startGateway, useGateway } from './harness.ts';

/** Proxied requests the express lane has answered so far (it counts each one it takes). */
async function laneCount(gw: GatewayHarness): Promise<number> {
  return Number(/gateway_express_lane_requests_total\{[^}]*\} (\d+)/.exec(await scrape(gw.server))?.[1] ?? 0);
}

/** Response header names, less those whose values differ between any two requests. */
const headerNames = (headers: Headers) => [...headers.keys()].filter((name) => name !== 'date').sort();

describe('gateway: express lane', function () {
  this.timeout(30_000);
  let gw: GatewayHarness;
  let user: SignedIn;
  useGateway(async (started) => {
    gw = started;
    user = await gw.user({ tier: 'pro' });
  });

  it("takes a known credential's repeat calls and answers them as the full chain does", async () => {
    const path = '/api/v1/graph/moments?limit=1';
    const first = await gw.call('GET', path, { headers: user.headers });
    const before = await laneCount(gw);
    const second = await gw.call('GET', path, { headers: { ...user.headers, 'X-Request-ID': 'lane-check-1' } });
    assert.equal(await laneCount(gw), before + 1, 'the repeat call took the lane');
    assert.equal(second.status, first.status);
    assert.deepEqual(headerNames(second.headers), headerNames(first.headers));
    assert.equal(second.headers.get('x-request-id'), 'lane-check-1');
    assert.equal(
      Number(second.headers.get('x-ratelimit-remaining')),
      Number(first.headers.get('x-ratelimit-remaining')) - 1,
      'both count against the same window',
    );
    const seen = gw.upstreams.graph.requests.at(-1)!;
    assert.equal(seen.headers['x-user-id'], user.userId);
    assert.equal(seen.headers['x-request-id'], 'lane-check-1');
    assert.equal(seen.headers.authorization, undefined);
  });

  it('keeps its own request id and rate-limit fields when the upstream sends its own, as every Tempora service does', async () => {
    gw.upstreams.graph.on('GET /api/v1/graph/own-fields', (_request, response) => {
      response.writeHead(200, {
        'content-type': 'application/json',
        'x-request-id': 'upstream-id',
        'x-ratelimit-limit': '7',
        'x-ratelimit-remaining': '6',
        'x-ratelimit-reset': '9',
        vary: 'Accept-Encoding',
      });
      response.end('{}');
    });
    const path = '/api/v1/graph/own-fields';
    const chain = await gw.call('GET', path, { headers: { ...user.headers, 'X-Request-ID': 'own-fields-1' } });
    const before = await laneCount(gw);
    const lane = await gw.call('GET', path, { headers: { ...user.headers, 'X-Request-ID': 'own-fields-2' } });
    assert.equal(await laneCount(gw), before + 1, 'the repeat call took the lane');
    for (const [reply, id] of [
      [chain, 'own-fields-1'],
      [lane, 'own-fields-2'],
    ] as const) {
      assert.equal(reply.headers.get('x-request-id'), id);
      assert.notEqual(reply.headers.get('x-ratelimit-limit'), '7');
      assert.ok(Number(reply.headers.get('x-ratelimit-limit')) > 7);
      assert.equal(reply.headers.get('vary'), 'Accept-Encoding');
    }
    assert.deepEqual(headerNames(lane.headers), headerNames(chain.headers));
  });

  it('leaves to the full chain what it cannot answer alike: CORS, chargeable calls, unknown credentials', async () => {
    await gw.call('GET', '/api/v1/timepoints/x', { headers: user.headers });
    const before = await laneCount(gw);
    const cors = await gw.call('GET', '/api/v1/timepoints/x', { headers: { ...user.headers, Origin: 'https://app.tempora.test' } });
    assert.equal(cors.headers.get('access-control-allow-origin'), 'https://app.tempora.test');
    const charged = await gw.call('POST', '/api/v1/timepoints/generate', {
      headers: user.headers,
      body: { query: 'the fall of Constantinople', preset: 'balanced' },
    });
    assert.equal(charged.headers.get('x-credits-charged') !== null, true);
    const stranger = await gw.call('GET', '/api/v1/timepoints/x', { headers: { Authorization: 'Bearer not-a-token' } });
    assert.equal(stranger.status, 401);
    assert.equal(await laneCount(gw), before, 'none of them took the lane');
  });

  it('refuses an API key without the read scope through the full chain, and serves one with it', async () => {
    const readKey = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'writer', scopes: ['write'] } })).body
      .key as string;
    for (let i = 0; i < 2; i += 1) assert.equal((await gw.call('GET', '/api/v1/timepoints/x', { headers: { 'X-API-Key': readKey } })).status, 403);
    const key = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'reader', scopes: ['read'] } })).body.key as string;
    await gw.call('GET', '/api/v1/timepoints/x', { headers: { 'X-API-Key': key } });
    const before = await laneCount(gw);
    assert.equal((await gw.call('GET', '/api/v1/timepoints/x', { headers: { 'X-API-Key': key } })).status, 200);
    assert.equal(await laneCount(gw), before + 1);
  });

  it('stops serving an access token the moment it is signed out', async () => {
    const other = await gw.user({ tier: 'pro' });
    assert.equal((await gw.call('GET', '/api/v1/timepoints/x', { headers: other.headers })).status, 200);
    assert.equal((await gw.call('GET', '/api/v1/timepoints/x', { headers: other.headers })).status, 200);
    assert.equal((await gw.call('POST', '/api/v1/auth/logout', { headers: other.headers, body: { refresh_token: other.refresh } })).status, 204);
    const after = await gw.call('GET', '/api/v1/timepoints/x', { headers: other.headers });
    assert.equal(after.status, 401);
    assert.match(String(after.body.detail), /revoked|signed out/);
  });

  it('answers 429 as the full chain does once a window is spent, and counts the refusal', async () => {
    const strict = await startGateway({ RATE_LIMIT_MULTIPLIER: '1' });
    try {
      const free = await strict.user({ tier: 'free' });
      const statuses: number[] = [];
      let lane: Awaited<ReturnType<GatewayHarness['call']>> | undefined;
      for (let i = 0; i < 11; i += 1) {
        const reply = await strict.call('GET', '/api/v1/timepoints/x', { headers: free.headers });
        statuses.push(reply.status);
        if (reply.status === 429) lane = reply;
      }
      assert.deepEqual(statuses, [...Array(10).fill(200), 429]);
      assert.ok((await laneCount(strict)) >= 10);
      // The same refusal through the full chain (an Origin header keeps a request off the lane).
      const full = await strict.call('GET', '/api/v1/timepoints/x', { headers: { ...free.headers, Origin: 'https://evil.example' } });
      assert.equal(full.status, 429);
      assert.deepEqual(headerNames(lane!.headers), headerNames(full.headers));
      assert.deepEqual({ ...(lane!.body as object), detail: undefined }, { ...(full.body as object), detail: undefined });
      assert.ok(Number(lane!.headers.get('retry-after')) >= 1);
      assert.equal(lane!.headers.get('x-ratelimit-remaining'), '0');
      assert.match(await scrape(strict.server), /gateway_rate_limit_rejections_total\{window="tier-free"[^}]*\} 2/);
    } finally {
      await strict.stop();
    }
  });
});
