import assert from 'node:assert/strict';
import { tdfHash } from '@tempora/kit/moments';
import { scrape } from '../../kit/test/metrics-support.ts';
import { MomentDetailSchema, MomentListSchema, StatsSchema, TdfRecordSchema } from '../src/schemas.ts';
import { ANCHOR, at, chain, DIRECTED, fixtureRecords, ISLAND, into, outOf, record, SYMMETRIC } from './fixtures.ts';
import { ADMIN_KEY, type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

const noSlash = (path: string) => path.slice(1);
const ids = (nodes: Array<{ id: string }>) => nodes.map((node) => node.id).sort();

describe('graph service HTTP API', function () {
  this.timeout(60_000);
  let h: GraphHarness;

  before(async () => {
    h = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0', TEMPORA_DOMAIN: 'tempora.dev' });
    const ingest = await h.post('/ingest/tdf', fixtureRecords(), writer);
    assert.equal(ingest.status, 200, JSON.stringify(ingest.body));
  });
  after(() => h?.stop());

  describe('operations', () => {
    it('answers /health with status, service and version', async () => {
      const reply = await h.get('/health');
      assert.equal(reply.status, 200);
      assert.equal(reply.body.status, 'ok');
      assert.equal(reply.body.service, 'graph');
      assert.equal(reply.body.database, true);
      assert.match(reply.body.version, /^\d+\.\d+\.\d+$/);
    });

    it('exports request durations by route template at /metrics', async () => {
      await h.get(`/api/v1/moments/${noSlash(ANCHOR)}`);
      const text = await scrape(h.server);
      assert.equal((await h.get('/metrics')).status, 404, 'not on the API port: only on METRICS_PORT');
      assert.match(text, /http_server_request_duration_seconds_bucket\{[^}]*method="GET"[^}]*route="\/api\/v1\/moments\/\*path"[^}]*status="200"/);
      assert.match(text, /process_cpu_seconds_total/);
      assert.match(text, /graph_index_edges/);
    });

    it('serves OpenAPI 3.1 generated from the route schemas, Swagger UI and Redoc without a CDN', async () => {
      const spec = await h.get('/openapi.json');
      assert.equal(spec.body.openapi, '3.1.0');
      for (const path of [
        '/api/v1/moments',
        '/api/v1/moments/{path}',
        '/api/v1/stats',
        '/browse',
        '/search',
        '/random',
        '/today',
        '/api/v1/graph/traverse/{path}',
        '/api/v1/graph/path',
        '/generate',
        '/ingest/tdf',
      ]) {
        assert.ok(spec.body.paths[path], `${path} documented`);
      }
      const traverse = spec.body.paths['/api/v1/graph/traverse/{path}'].get;
      const depth = traverse.parameters.find((p: { name: string }) => p.name === 'depth');
      assert.equal(depth.schema.maximum, 4);
      assert.deepEqual(traverse.security, [{ ServiceKey: [] }]);
      const docs = await h.get('/docs');
      assert.match(docs.body, /swagger-ui-bundle\.js/);
      assert.doesNotMatch(docs.body, /https?:\/\/(?!127)/);
      const redoc = await h.get('/redoc');
      assert.match(redoc.body, /redoc\.standalone\.js/);
      const asset = await fetch(`${h.url}/docs/assets/redoc.standalone.js`);
      assert.equal(asset.status, 200);
      assert.ok((await asset.arrayBuffer()).byteLength > 100_000);
    });

    it('echoes a sane X-Request-ID and generates one otherwise', async () => {
      assert.equal((await h.get('/api/v1/stats', { 'X-Request-ID': 'abc-123' })).headers.get('x-request-id'), 'abc-123');
      assert.match((await h.get('/api/v1/stats', { 'X-Request-ID': 'bad id with spaces' })).headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
    });

    it('answers unknown routes with a 404 problem', async () => {
      const reply = await h.get('/api/v1/nothing-here');
      assert.equal(reply.status, 404);
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
      assert.equal(reply.body.status, 404);
      assert.ok(reply.body.type && reply.body.title && reply.body.detail);
    });

    it('allows CORS from the domain and its subdomains only', async () => {
      const allowed = await fetch(`${h.url}/api/v1/stats`, {
        method: 'OPTIONS',
        headers: { Origin: 'https://app.tempora.dev', 'Access-Control-Request-Method': 'GET' },
      });
      assert.equal(allowed.status, 204);
      assert.equal(allowed.headers.get('access-control-allow-origin'), 'https://app.tempora.dev');
      assert.equal(allowed.headers.get('access-control-allow-credentials'), 'true');
      const apex = await fetch(`${h.url}/api/v1/stats`, { headers: { Origin: 'https://tempora.dev' } });
      assert.equal(apex.headers.get('access-control-allow-origin'), 'https://tempora.dev');
      for (const origin of ['https://evil.dev', 'https://tempora.dev.evil.dev', 'https://nottempora.dev']) {
        const refused = await fetch(`${h.url}/api/v1/stats`, { headers: { Origin: origin } });
        assert.equal(refused.headers.get('access-control-allow-origin'), null, origin);
      }
    });
  });

  describe('public reads', () => {
    it('returns statistics', async () => {
      const stats = StatsSchema.parse((await h.get('/api/v1/stats')).body);
      assert.equal(stats.total_nodes, fixtureRecords().length);
      assert.equal(stats.edge_type_counts.causes, 2 + 5);
      assert.equal(stats.layer_counts['1'], fixtureRecords().length);
      assert.equal(stats.source_type_counts.ingest, fixtureRecords().length);
      assert.deepEqual(stats.date_range, { min_year: 1900, max_year: 1999 });
    });

    it('lists moments in the envelope, with the default and capped limit', async () => {
      const page = MomentListSchema.parse((await h.get('/api/v1/moments')).body);
      assert.equal(page.limit, 20);
      assert.equal(page.offset, 0);
      assert.equal(page.items.length, 20);
      assert.equal(page.total, fixtureRecords().length);
      const capped = (await h.get('/api/v1/moments?limit=1000&offset=5')).body;
      assert.equal(capped.limit, 100);
      assert.equal(capped.items.length, fixtureRecords().length - 5);
    });

    it('filters by q, years, entity and sorts by the documented values', async () => {
      const island = (await h.get('/api/v1/moments?q=island')).body;
      assert.equal(island.items[0].path, ISLAND);
      assert.ok(island.items[0].score === undefined || typeof island.items[0].score === 'number');
      assert.equal((await h.get('/api/v1/moments?year_from=1950&year_to=1950')).body.total, 6);
      assert.equal((await h.get('/api/v1/moments?entity=ada%20LOVELACE')).body.total, fixtureRecords().length);
      assert.equal((await h.get('/api/v1/moments?entity=nobody')).body.total, 0);
      const newest = (await h.get('/api/v1/moments?sort=-year&limit=1')).body.items[0];
      assert.equal(newest.path, ISLAND);
      const byName = (await h.get('/api/v1/moments?sort=name&limit=100')).body.items.map((item: { event_name: string }) => item.event_name);
      assert.deepEqual(byName, [...byName].sort());
    });

    it('refuses invalid list parameters with 422 naming each', async () => {
      for (const [query, field] of [
        ['limit=0', 'query.limit'],
        ['limit=abc', 'query.limit'],
        ['offset=-1', 'query.offset'],
        ['sort=random', 'query.sort'],
        ['year_from=2000&year_to=1900', 'query.year_from'],
      ]) {
        const reply = await h.get(`/api/v1/moments?${query}`);
        assert.equal(reply.status, 422, query);
        assert.ok(
          reply.body.errors.some((error: { path: string }) => error.path === field),
          `${query}: ${JSON.stringify(reply.body.errors)}`,
        );
      }
    });

    it('returns one moment with its edges, under both prefixes', async () => {
      for (const prefix of ['/api/v1/moments/', '/api/v1/graph/moments/']) {
        const moment = MomentDetailSchema.parse((await h.get(`${prefix}${noSlash(ANCHOR)}`)).body);
        assert.equal(moment.path, ANCHOR);
        assert.equal(moment.edge_count, 2 * (DIRECTED.length + SYMMETRIC.length));
        assert.ok(moment.edges.some((edge) => edge.source === ANCHOR && edge.target === outOf('causes') && edge.type === 'causes'));
        assert.ok(moment.edges.some((edge) => edge.source === into('causes') && edge.target === ANCHOR));
      }
    });

    it('answers 404 for a missing moment and 422 naming the bad segment', async () => {
      assert.equal((await h.get(`/api/v1/moments/${noSlash(at('nope'))}`)).status, 404);
      const bad = await h.get('/api/v1/moments/1900/march/32/1200/testland/north/alpha/anchor');
      assert.equal(bad.status, 422);
      assert.match(bad.body.errors[0].message, /^day: /);
      const short = await h.get('/api/v1/moments/1900/march');
      assert.equal(short.status, 422);
    });

    it('keeps private moments out of public reads', async () => {
      const secret = at('secret-moment', 1901);
      assert.equal((await h.post('/ingest/tdf', record(secret, [{ target: ANCHOR, type: 'causes' }], { visibility: 'private' }), writer)).status, 200);
      assert.equal((await h.get(`/api/v1/moments/${noSlash(secret)}`)).status, 404);
      const trusted = await h.get(`/api/v1/moments/${noSlash(secret)}`, serviceKey);
      assert.equal(trusted.status, 200);
      assert.deepEqual(
        trusted.body.edges.map((edge: { target: string }) => edge.target),
        [ANCHOR],
        'its own edges show to a trusted caller',
      );
      assert.equal(
        (await h.get(`/api/v1/moments/${noSlash(secret)}`, { ...serviceKey, 'X-User-ID': 'someone' })).status,
        404,
        'a user proxied by the gateway is not trusted',
      );
      assert.equal((await h.get('/api/v1/moments?q=secret')).body.total, 0);
      const anchor = (await h.get(`/api/v1/moments/${noSlash(ANCHOR)}`)).body;
      assert.ok(!anchor.edges.some((edge: { source: string }) => edge.source === secret));
      const past = (await h.get(`/api/v1/graph/traverse/${noSlash(ANCHOR)}?direction=past`, serviceKey)).body;
      assert.ok(!ids(past.nodes).includes(secret));
      assert.equal((await h.get('/api/v1/stats')).body.total_nodes, fixtureRecords().length);
    });
  });

  describe('service-key reads', () => {
    it('browses next-segment counts under a prefix', async () => {
      const years = (await h.get('/browse', serviceKey)).body;
      assert.equal(years.segment, 'year');
      assert.deepEqual(
        years.children.map((child: { segment: string; count: number }) => [child.segment, child.count]),
        [
          ['1900', 25],
          ['1901', 1],
          ['1950', 6],
          ['1999', 1],
        ].filter(([year]) => year !== '1901'),
      );
      const city = (await h.get('/api/v1/graph/browse?prefix=/1950/march/9/1200/testland/north/alpha', serviceKey)).body;
      assert.equal(city.segment, 'slug');
      assert.ok(city.children.every((child: { moment?: { path: string } }) => child.moment?.path));
      assert.equal((await h.get('/browse?prefix=/1950/marc', serviceKey)).status, 422);
    });

    it('searches with ranking and filters', async () => {
      const reply = (await h.get('/search?q=chain&year_from=1950&tags=fixture&country=testland&limit=3', serviceKey)).body;
      assert.equal(reply.total, 6);
      assert.equal(reply.items.length, 3);
      assert.ok(reply.items.every((item: { score: number }) => typeof item.score === 'number'));
      assert.equal((await h.get('/search?type=nonsense', serviceKey)).status, 422);
    });

    it('returns a random moment at layer 1 or above', async () => {
      const reply = await h.get('/random', serviceKey);
      assert.equal(reply.status, 200);
      assert.ok(reply.body.layer >= 1);
      assert.equal((await h.get('/random?layer_min=0', serviceKey)).status, 422);
    });

    it('returns today in history for a given or the current day', async () => {
      const march = (await h.get('/today?month=march&day=16', serviceKey)).body;
      assert.equal(march.month, 'march');
      assert.ok(march.items.every((item: { month: string; day: number }) => item.month === 'march' && item.day === 16));
      assert.equal((await h.get('/today?month=3&day=16', serviceKey)).body.total, march.total);
      assert.equal((await h.get('/today', serviceKey)).status, 200);
      assert.equal((await h.get('/today?month=february&day=30', serviceKey)).status, 422);
      assert.equal((await h.get('/today?month=march', serviceKey)).status, 422);
    });
  });

  describe('authentication', () => {
    const serviceRoutes = [
      '/browse',
      '/search',
      '/random',
      '/today',
      `/api/v1/graph/traverse/${noSlash(ANCHOR)}`,
      `/api/v1/graph/path?from=${chain(0)}&to=${chain(1)}`,
    ];

    it('refuses service-key routes without a key, with a wrong key, or with another credential', async () => {
      for (const route of serviceRoutes) {
        const missing = await h.get(route);
        assert.equal(missing.status, 401, route);
        assert.match(missing.headers.get('www-authenticate')!, /X-Service-Key/);
        assert.equal((await h.get(route, { 'X-Service-Key': 'wrong' })).status, 401, route);
        assert.equal((await h.get(route, writer)).status, 403, route);
        assert.equal((await h.get(route, { 'X-Admin-Key': ADMIN_KEY })).status, 403, route);
        assert.equal((await h.get(route, serviceKey)).status, 200, route);
      }
    });

    it('refuses writes without a writer token, with a bad one, or with a service key', async () => {
      const body = record(at('auth-probe'));
      for (const route of ['/ingest/tdf', '/api/v1/graph/ingest/tdf']) {
        const missing = await h.post(route, body);
        assert.equal(missing.status, 401);
        assert.match(missing.headers.get('www-authenticate')!, /Bearer/);
        assert.equal((await h.post(route, body, { Authorization: 'Bearer not-a-writer' })).status, 401);
        assert.equal((await h.post(route, body, { Authorization: 'Basic abc' })).status, 401);
        assert.equal((await h.post(route, body, serviceKey)).status, 403);
      }
      assert.equal((await h.post('/generate', { path: at('auth-probe'), event_name: 'x' })).status, 401);
    });

    it('refuses a wrong credential even on public routes', async () => {
      assert.equal((await h.get('/api/v1/stats', { 'X-Service-Key': 'wrong' })).status, 401);
      assert.equal((await h.get('/api/v1/stats', serviceKey)).status, 200);
    });
  });

  describe('writes', () => {
    it('exports TDF whose hash survives ingest and re-export', async () => {
      const exported = TdfRecordSchema.parse((await h.get(`/api/v1/moments/${noSlash(chain(0))}?format=tdf`, serviceKey)).body);
      assert.equal(exported.tdf_hash, tdfHash(exported.payload));
      assert.equal(exported.id, chain(0));
      assert.ok(exported.entity_ids.includes('figure:ada-lovelace'));
      const again = await h.post('/ingest/tdf', exported, writer);
      assert.deepEqual(again.body, { ingested: 1, created: 0, updated: 1, paths: [chain(0)] });
      const reexported = (await h.get(`/api/v1/moments/${noSlash(chain(0))}?format=tdf`)).body;
      assert.equal(reexported.tdf_hash, exported.tdf_hash);
      const list = (await h.get('/api/v1/moments?format=tdf&limit=2')).body;
      assert.equal(list.items.length, 2);
      assert.ok(list.items.every((item: { tdf_hash: string; payload: unknown }) => item.tdf_hash === tdfHash(item.payload)));
    });

    it('refuses a record whose tdf_hash does not match its payload', async () => {
      const exported = (await h.get(`/api/v1/moments/${noSlash(chain(1))}?format=tdf`)).body;
      const tampered = { ...exported, payload: { ...exported.payload, event_name: 'tampered' } };
      const reply = await h.post('/ingest/tdf', tampered, writer);
      assert.equal(reply.status, 422);
      assert.equal(reply.body.errors[0].path, '[0].tdf_hash');
      assert.notEqual((await h.get(`/api/v1/moments/${noSlash(chain(1))}`)).body.event_name, 'tampered');
    });

    it('writes nothing of a batch with one bad record, and names its index', async () => {
      const batch = [record(at('batch-one')), record(at('batch-two')), record('/1900/march/1/1200/testland/north/alpha/Bad_Slug'), record(at('batch-four'))];
      const reply = await h.post('/ingest/tdf', batch, writer);
      assert.equal(reply.status, 422);
      assert.ok(
        reply.body.errors.some((error: { path: string }) => error.path.startsWith('[2].payload.path')),
        JSON.stringify(reply.body.errors),
      );
      assert.match(reply.body.detail, /nothing was written/);
      assert.equal((await h.get(`/api/v1/moments/${noSlash(at('batch-one'))}`)).status, 404);
      const dangling = await h.post('/ingest/tdf', [record(at('batch-one')), record(at('batch-two'), [{ target: at('nowhere'), type: 'causes' }])], writer);
      assert.equal(dangling.status, 422);
      assert.equal(dangling.body.errors[0].path, '[1].payload.edges');
      assert.equal((await h.get(`/api/v1/moments/${noSlash(at('batch-one'))}`)).status, 404, 'the transaction rolled back');
    });

    it('upserts idempotently by path and keeps the index current', async () => {
      const late = at('late-arrival', 1951);
      const first = await h.post('/ingest/tdf', [record(late, [{ target: chain(4), type: 'causes' }])], writer);
      assert.deepEqual([first.body.created, first.body.updated], [1, 0]);
      const second = await h.post('/ingest/tdf', [record(late, [{ target: chain(4), type: 'causes' }])], writer);
      assert.deepEqual([second.body.created, second.body.updated], [0, 1]);
      const past = (await h.get(`/api/v1/graph/traverse/${noSlash(chain(4))}?direction=past&depth=1`, serviceKey)).body;
      assert.ok(ids(past.nodes).includes(late));
      assert.equal((await h.get(`/api/v1/moments/${noSlash(late)}`)).body.edges.length, 1);
    });

    it('refuses malformed, oversized and non-JSON bodies with clear problems', async () => {
      const malformed = await fetch(`${h.url}/ingest/tdf`, {
        method: 'POST',
        headers: { ...writer, 'content-type': 'application/json' },
        body: '{"payload": ',
      });
      assert.equal(malformed.status, 400);
      assert.equal(malformed.headers.get('content-type'), 'application/problem+json');
      const huge = await fetch(`${h.url}/ingest/tdf`, {
        method: 'POST',
        headers: { ...writer, 'content-type': 'application/json' },
        body: JSON.stringify({ pad: 'x'.repeat(9 * 1024 * 1024) }),
      });
      assert.equal(huge.status, 413);
      const text = await fetch(`${h.url}/ingest/tdf`, { method: 'POST', headers: { ...writer, 'content-type': 'text/plain' }, body: 'hello' });
      assert.equal(text.status, 415);
      assert.equal((await h.post('/ingest/tdf', [], writer)).status, 422);
      assert.equal((await h.post('/ingest/tdf', { nothing: true }, writer)).status, 422);
    });

    it('queues a render job for POST /generate and records the moment at layer 0', async () => {
      const path = at('to-be-rendered', 1952);
      const reply = await h.post('/generate', { path, event_name: 'To be rendered', preset: 'hd' }, writer);
      assert.equal(reply.status, 202);
      assert.equal(reply.body.job.status, 'queued');
      assert.equal(reply.body.job.path, path);
      assert.deepEqual(reply.body.moment, { path, layer: 0, created: true });
      assert.equal(reply.headers.get('location'), `/api/v1/graph/jobs/${reply.body.job.id}`);
      const job = await h.get(`/api/v1/graph/jobs/${reply.body.job.id}`, serviceKey);
      assert.equal(job.body.request.preset, 'hd');
      assert.equal((await h.get(`/api/v1/moments/${noSlash(path)}`)).body.layer, 0);
      const existing = await h.post('/generate', { path: chain(0), event_name: 'chain 0' }, writer);
      assert.deepEqual(existing.body.moment, { path: chain(0), layer: 1, created: false });
      assert.equal((await h.post('/generate', { path: '/1900/march', event_name: 'x' }, writer)).status, 422);
      assert.equal((await h.get('/api/v1/graph/jobs/00000000-0000-4000-8000-000000000000', serviceKey)).status, 404);
    });
  });
});
