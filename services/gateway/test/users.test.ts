import assert from 'node:assert/strict';
import { waitFor } from '../../../test/support/wait.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { type GatewayHarness, useGateway } from './harness.ts';

describe('gateway: API keys, export, CORS, health and metrics', function () {
  this.timeout(30_000);
  let gw: GatewayHarness;
  useGateway((started) => {
    gw = started;
  });

  describe('API keys', () => {
    it('shows a new key once, stores only its hash, lists it by prefix and records its last use', async () => {
      const user = await gw.user();
      const created = await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'ci', scopes: ['read'] } });
      assert.equal(created.status, 201);
      assert.match(created.body.key, /^tmk_[A-Za-z0-9_-]{43}$/);
      assert.equal(created.body.prefix, created.body.key.slice(0, 12));
      assert.deepEqual(created.body.scopes, ['read']);
      assert.equal(created.body.last_used_at, null);
      const row = await gw.instance.knex('api_keys').where({ id: created.body.id }).first();
      assert.match(row.key_hash, /^[0-9a-f]{64}$/);
      assert.ok(!JSON.stringify(row).includes(created.body.key), 'the key itself is not stored');
      const viaKey = await gw.call('GET', '/api/v1/auth/me', { headers: { 'X-API-Key': created.body.key } });
      assert.equal(viaKey.status, 200);
      assert.equal(viaKey.body.id, user.userId);
      // A key's use is recorded after its request is answered.
      const list = await waitFor('the key use recorded', async () => {
        const listed = await gw.call('GET', '/api/v1/users/me/api-keys', { headers: user.headers });
        return listed.body.items?.[0]?.last_used_at ? listed : undefined;
      });
      assert.equal(list.status, 200);
      assert.equal(list.body.total, 1);
      assert.equal(list.body.items[0].key, undefined);
      assert.equal(list.body.items[0].prefix, created.body.prefix);
      assert.ok(list.body.items[0].last_used_at);
    });
    it('revokes a key: it stops working at once; a key may revoke itself but not another', async () => {
      const user = await gw.user();
      const a = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'a' } })).body;
      const b = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'b' } })).body;
      assert.equal((await gw.call('DELETE', `/api/v1/users/me/api-keys/${b.id}`, { headers: { 'X-API-Key': a.key } })).status, 403);
      assert.equal((await gw.call('DELETE', `/api/v1/users/me/api-keys/${a.id}`, { headers: { 'X-API-Key': a.key } })).status, 204);
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: { 'X-API-Key': a.key } })).status, 401);
      assert.equal((await gw.call('DELETE', `/api/v1/users/me/api-keys/${b.id}`, { headers: user.headers })).status, 204);
      assert.equal((await gw.call('DELETE', `/api/v1/users/me/api-keys/${b.id}`, { headers: user.headers })).status, 404);
      const other = await gw.user();
      const theirs = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: other.headers, body: { name: 'c' } })).body;
      assert.equal((await gw.call('DELETE', `/api/v1/users/me/api-keys/${theirs.id}`, { headers: user.headers })).status, 404, "not another user's key");
    });
    it('refuses unknown keys, read-only keys on writes, and unknown scopes', async () => {
      const user = await gw.user();
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: { 'X-API-Key': 'tmk_invented' } })).status, 401);
      const read = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'r', scopes: ['read'] } })).body;
      const write = await gw.call('POST', '/api/v1/timepoints/generate/sync', { headers: { 'X-API-Key': read.key }, body: { query: 'abc' } });
      assert.equal(write.status, 403);
      assert.match(write.body.detail, /write/);
      assert.equal((await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'x', scopes: ['admin'] } })).status, 422);
    });
  });

  describe('export', () => {
    it("streams every piece of the user's data from every service, each paged to its end", async () => {
      const scenes = 2_500;
      gw.upstreams.generation.on('GET /api/v1/users/*', (req, res) => {
        const url = new URL(req.url!, 'http://x');
        assert.equal(req.headers['x-service-key'], 'upstream-service-key-0123456789');
        const from = Number(url.searchParams.get('cursor') ?? 0);
        const page =
          from < scenes
            ? {
                kind: 'timepoints',
                items: Array.from({ length: Math.min(500, scenes - from) }, (_, i) => ({ id: `scene-${from + i}` })),
                next_cursor: String(from + 500),
              }
            : { kind: 'jobs', items: [{ id: 'job-1' }], next_cursor: null };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ service: 'generation', ...page }));
      });
      const user = await gw.user();
      await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'export' } });
      const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
      assert.equal(reply.status, 200);
      assert.match(reply.headers.get('content-disposition') ?? '', /attachment/);
      assert.equal(reply.body.format, 'tempora-user-export');
      assert.equal(reply.body.version, 2);
      assert.equal(reply.body.user.id, user.userId);
      assert.equal(reply.body.identities[0].provider, 'dev');
      assert.equal(reply.body.sessions.length, 1);
      assert.equal(reply.body.api_keys[0].name, 'export');
      assert.equal(reply.body.credits.balance, 50);
      assert.equal(reply.body.credits.ledger[0].kind, 'signup_grant');
      const exported = reply.body.services.generation.timepoints.map((scene: { id: string }) => scene.id);
      assert.equal(exported.length, scenes, 'nothing truncated');
      assert.equal(new Set(exported).size, scenes, 'nothing twice');
      assert.deepEqual(reply.body.services.generation.jobs, [{ id: 'job-1' }]);
      assert.deepEqual(Object.keys(reply.body.services), ['generation', 'graph', 'simulation', 'conductor', 'billing']);
      assert.deepEqual(reply.body.errors, {});
      assert.equal(reply.body.complete, true);
      assert.ok(!JSON.stringify(reply.body).includes('key_hash'));
      assert.ok(!JSON.stringify(reply.body).includes('token_hash'));
      for (const upstream of Object.values(gw.upstreams)) upstream.reset();
    });
    it('names a service that fails midway and marks the document incomplete, never cutting it short silently', async () => {
      gw.upstreams.simulation.on('GET /api/v1/users/*', (req, res) => {
        if (new URL(req.url!, 'http://x').searchParams.get('cursor')) return void res.writeHead(503).end();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ service: 'simulation', kind: 'runs', items: [{ id: 'run-1' }], next_cursor: 'more' }));
      });
      const user = await gw.user();
      const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
      assert.equal(reply.status, 200);
      assert.deepEqual(reply.body.services.simulation, { runs: [{ id: 'run-1' }] });
      assert.match(reply.body.errors.simulation, /simulation service answered 503/);
      assert.equal(reply.body.complete, false);
      for (const upstream of Object.values(gw.upstreams)) upstream.reset();
    });
  });

  describe('CORS', () => {
    it('allows the configured domain and its subdomains, with credentials', async () => {
      for (const origin of ['https://tempora.test', 'https://app.tempora.test', 'http://a.b.tempora.test:3000']) {
        const reply = await gw.call('GET', '/api/v1/credits/costs', { headers: { Origin: origin } });
        assert.equal(reply.headers.get('access-control-allow-origin'), origin);
        assert.equal(reply.headers.get('access-control-allow-credentials'), 'true');
        assert.match(reply.headers.get('access-control-expose-headers') ?? '', /X-RateLimit-Remaining/);
        assert.match(reply.headers.get('access-control-expose-headers') ?? '', /Idempotent-Replayed/);
      }
    });
    it('answers preflights for allowed origins, including proxied paths', async () => {
      const reply = await gw.call('OPTIONS', '/api/v1/timepoints/generate/sync', {
        headers: {
          Origin: 'https://app.tempora.test',
          'Access-Control-Request-Method': 'POST',
          'Access-Control-Request-Headers': 'authorization, content-type',
        },
      });
      assert.equal(reply.status, 204);
      assert.equal(reply.headers.get('access-control-allow-origin'), 'https://app.tempora.test');
      assert.match(reply.headers.get('access-control-allow-methods') ?? '', /POST/);
      assert.match(reply.headers.get('access-control-allow-headers') ?? '', /Authorization/i);
      assert.equal(gw.upstreams.generation.requests.length, 0, 'preflights are not proxied');
    });
    it('gives other origins no CORS headers at all', async () => {
      for (const origin of ['https://evil.test', 'https://tempora.test.evil.test', 'https://nottempora.test', 'null']) {
        const reply = await gw.call('GET', '/api/v1/credits/costs', { headers: { Origin: origin } });
        assert.equal(reply.headers.get('access-control-allow-origin'), null, origin);
        const preflight = await gw.call('OPTIONS', '/api/v1/credits/costs', { headers: { Origin: origin, 'Access-Control-Request-Method': 'GET' } });
        assert.equal(preflight.headers.get('access-control-allow-origin'), null, origin);
      }
    });
  });

  describe('health, metrics, OpenAPI', () => {
    it('GET /health reports status, version and service', async () => {
      const reply = await gw.call('GET', '/health');
      assert.equal(reply.status, 200);
      assert.equal(reply.body.status, 'ok');
      assert.equal(reply.body.service, 'gateway');
      assert.equal(reply.body.version, '0.1.0');
      assert.equal(reply.body.database, true);
    });
    it('exposes requests by route and status, upstream latency and credit counters', async () => {
      const user = await gw.user();
      await gw.call('POST', '/api/v1/timepoints/generate/sync', { headers: user.headers, body: { query: 'metrics' } });
      const text = await scrape(gw.server);
      assert.match(text, /http_server_request_duration_seconds_count\{[^}]*route="\/api\/v1\/auth\/dev\/token"[^}]*status="201"/);
      assert.match(text, /http_server_request_duration_seconds_count\{[^}]*route="proxy:generation"/);
      assert.match(text, /gateway_upstream_duration_seconds_count\{[^}]*upstream="generation"[^}]*\} [1-9]/);
      assert.match(text, /gateway_credits_charged_total\{operation="generation.balanced"[^}]*\} [1-9]/);
      assert.match(text, /gateway_credits_refunded_total\{operation="generation.balanced"[^}]*\} 0\n/, 'exported at zero: nothing was refunded');
    });
    it('documents every native route in /openapi.json', async () => {
      const doc = (await gw.call('GET', '/openapi.json')).body;
      for (const path of [
        '/api/v1/auth/apple',
        '/api/v1/auth/me',
        '/api/v1/users/resolve',
        '/api/v1/credits/history',
        '/api/v1/users/me/api-keys/{id}',
        '/.well-known/jwks.json',
      ]) {
        assert.ok(doc.paths[path], path);
      }
    });
  });
});
