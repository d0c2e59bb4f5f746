/**
 * Issue 25's findings at the gateway's seam, and the differential property: the express lane and the Koa
 * app decide alike (status, upstream, forwarded target, identity, charge) for every request variant, and
 * what the upstreams received reconciles with what the ledger charged.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { deflateSync, gzipSync } from 'node:zlib';
import { type RunningServer, serve, signPricedCall } from '@tempora/kit/http';
import fc from 'fast-check';
import { SignJWT } from 'jose';
import type { Recorded } from '../../../test/support/stand-ins/upstream.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { isChargeable, priceOf } from '../src/domain/costs.ts';
import { type GatewayHarness, SERVICE_KEY, type SignedIn, startGateway, useGateway } from './harness.ts';

interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A request sent as written: the target (fragments, dot segments, odd case and all) goes on the wire untouched. */
function send(base: string, method: string, target: string, headers: Record<string, string | string[]> = {}, body?: Buffer): Promise<RawReply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      hostname: url.hostname,
      port: url.port,
      method,
      path: target,
      headers: body ? { ...headers, 'content-length': body.length } : headers,
      agent: false,
    });
    req.once('error', reject);
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(body);
  });
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const jsonType = { 'content-type': 'application/json' };
/** The price of what an upstream was asked to run (a charged call's body reaches it decoded, as JSON). */
function priceOfRun(seen: Recorded): number {
  const path = seen.url.split('?')[0]!;
  if (!isChargeable(seen.method, path)) return 0;
  return priceOf(seen.method, path, seen.body ? JSON.parse(seen.body) : {})?.amount ?? 0;
}
const balanceOf = async (gw: GatewayHarness, user: SignedIn) =>
  (await gw.call('GET', '/api/v1/credits/balance', { headers: user.headers })).body.balance as number;

describe('gateway: one reading of every request (issue 25)', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  let user: SignedIn;
  useGateway(
    async (started) => {
      gw = started;
      user = await gw.user({ tier: 'enterprise' });
    },
    { resetUpstreams: true },
  );

  describe('the request target', () => {
    it('routes, prices and forwards the canonical target: case is not folded, so /Timepoints names no paid route', async () => {
      const poor = await gw.user();
      const reply = await send(
        gw.url,
        'POST',
        '/api/v1/Timepoints/generate/sync',
        { ...poor.headers, ...jsonType },
        json({ query: 'the fall of Rome', preset: 'hd', generate_image: true }),
      );
      // Forwarded as spelled (the services' strict routers answer 404 for it) and never charged.
      const seen = gw.upstreams.generation.requests.at(-1);
      assert.equal(seen?.url, '/api/v1/Timepoints/generate/sync');
      assert.equal(Number(reply.headers['x-credits-charged'] ?? 0), 0);
      for (const spelling of [
        '/api/v1/timepoints/generate/sync/',
        '/api/v1//timepoints/generate/sync',
        '/api/v1/x/../timepoints/generate/sync',
        '/api/v1/./timepoints/%67enerate/sync',
      ]) {
        const paid = await send(gw.url, 'POST', spelling, { ...poor.headers, ...jsonType }, json({ query: 'the fall of Rome', preset: 'hd' }));
        assert.equal(paid.headers['x-credits-charged'], '5', `${spelling} is priced as the canonical route`);
        assert.equal(gw.upstreams.generation.requests.at(-1)?.url, '/api/v1/timepoints/generate/sync', 'the upstream gets the canonical form');
      }
    });

    it('refuses a fragment over a raw socket, also for a credential the express lane knows', async () => {
      await send(gw.url, 'GET', '/api/v1/graph/moments', user.headers);
      const before = gw.upstreams.simulation.requests.length;
      for (const target of ['/api/v1/simulate/#x', '/api/v1/simulate#', '/api/v1/graph/moments?q=a#b']) {
        const reply = await send(gw.url, 'POST', target, { ...user.headers, ...jsonType }, json({ fidelity: 5 }));
        assert.equal(reply.status, 400, target);
        assert.match(reply.headers['content-type'] ?? '', /application\/problem\+json/);
        assert.match(JSON.parse(reply.body).detail, /fragment/);
      }
      assert.equal(gw.upstreams.simulation.requests.length, before, 'nothing reached the simulation service');
    });

    it('refuses targets it cannot canonicalise before any upstream call', async () => {
      for (const target of ['/api/v1/timepoints/%zz', '/api/v1/timepoints/a%', 'http://evil.example/api/v1/simulate']) {
        const reply = await send(gw.url, 'GET', target, user.headers);
        assert.equal(reply.status, 400, target);
      }
      assert.equal(gw.upstreams.generation.requests.length + gw.upstreams.simulation.requests.length, 0);
    });

    it('answers 404 itself for a canonical target outside its routing table, before any upstream call', async () => {
      for (const target of ['/API/v1/simulate', '/api/V1/timepoints/generate/sync', '/api/v2/simulate', '/simulate', '/api/v1']) {
        const reply = await send(gw.url, 'POST', target, { ...user.headers, ...jsonType }, json({ fidelity: 5 }));
        assert.equal(reply.status, 404, target);
        assert.match(reply.headers['content-type'] ?? '', /application\/problem\+json/);
      }
      assert.equal(
        Object.values(gw.upstreams).reduce((sum, upstream) => sum + upstream.requests.length, 0),
        0,
      );
    });
  });

  describe('the body', () => {
    const cases: Array<[name: string, encode: (body: Buffer) => Buffer, headers: Record<string, string>]> = [
      ['a UTF-8 BOM', (body) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]), {}],
      ['gzip', (body) => gzipSync(body), { 'content-encoding': 'gzip' }],
      ['deflate', (body) => deflateSync(body), { 'content-encoding': 'deflate' }],
    ];
    for (const [name, encode, headers] of cases) {
      it(`prices a body sent with ${name} as the service reads it, and forwards the decoded JSON`, async () => {
        const payer = await gw.user();
        await gw.grant(payer.userId, 100);
        const start = await balanceOf(gw, payer);
        const reply = await send(
          gw.url,
          'POST',
          '/api/v1/simulate',
          { ...payer.headers, ...jsonType, ...headers },
          encode(json({ template: 'x', fidelity: 5 })),
        );
        assert.equal(reply.status, 200);
        assert.equal(reply.headers['x-credits-charged'], '20', 'fidelity 5 costs 20');
        const seen = gw.upstreams.simulation.requests.at(-1)!;
        assert.deepEqual(JSON.parse(seen.body), { template: 'x', fidelity: 5 });
        assert.equal(seen.headers['content-encoding'], undefined);
        assert.equal(seen.headers['content-length'], String(Buffer.byteLength(seen.body)));
        // The priced operation, bound to the bytes forwarded, for the service to check against what it runs.
        const bound = {
          operation: 'simulation.fidelity-5',
          method: 'POST',
          path: '/api/v1/simulate',
          bodyDigest: createHash('sha256').update(seen.body).digest('hex'),
        };
        assert.equal(seen.headers['x-priced-operation'], signPricedCall(SERVICE_KEY, bound));
        assert.equal(await balanceOf(gw, payer), start - 20);
      });
    }

    it('refuses a coding it does not decode (415), a broken one, duplicate keys and deep nesting (400), uncharged', async () => {
      const payer = await gw.user();
      await gw.grant(payer.userId, 100);
      const start = await balanceOf(gw, payer);
      const refusals: Array<[Buffer, Record<string, string>, number]> = [
        [json({ fidelity: 5 }), { 'content-encoding': 'compress' }, 415],
        [Buffer.from('not gzip'), { 'content-encoding': 'gzip' }, 400],
        [Buffer.from('{"fidelity":1,"fidelity":5}'), {}, 400],
        [Buffer.from(`${'['.repeat(2000)}${']'.repeat(2000)}`), {}, 400],
        [Buffer.from('{"fidelity":'), {}, 400],
      ];
      for (const [body, headers, status] of refusals) {
        const reply = await send(gw.url, 'POST', '/api/v1/simulate', { ...payer.headers, ...jsonType, ...headers }, body);
        assert.equal(reply.status, status, `${body.toString('latin1').slice(0, 30)} ${JSON.stringify(headers)}`);
        assert.match(reply.headers['content-type'] ?? '', /application\/problem\+json/);
      }
      assert.equal(gw.upstreams.simulation.requests.length, 0);
      assert.equal(await balanceOf(gw, payer), start);
    });

    it('bounds a body by its decoded size (a small gzip of a large body is 413)', async () => {
      const bomb = gzipSync(Buffer.alloc(4 * 1024 * 1024, 0x20));
      const reply = await send(gw.url, 'POST', '/api/v1/simulate', { ...user.headers, ...jsonType, 'content-encoding': 'gzip' }, bomb);
      assert.equal(reply.status, 413);
    });
  });

  describe('tokens', () => {
    const forge = async (gw: GatewayHarness, payload: Record<string, unknown>) => {
      const { kid, privateKey } = gw.instance.deps.auth.keys.signingKey();
      const { config } = gw.instance.deps;
      return new SignJWT({ jti: randomUUID(), iss: config.JWT_ISSUER, aud: config.JWT_AUDIENCE, ...payload })
        .setProtectedHeader({ alg: 'ES256', kid })
        .sign(privateKey);
    };
    it('refuses correctly signed tokens with a subject no account has, without exp, or issued in the future (401)', async () => {
      const now = Math.floor(Date.now() / 1000);
      const tokens = {
        'non-UUID subject': await forge(gw, { sub: 'not-a-uuid', iat: now, exp: now + 600 }),
        'no exp': await forge(gw, { sub: user.userId, iat: now }),
        'iat in the future': await forge(gw, { sub: user.userId, iat: now + 3600, exp: now + 7200 }),
      };
      for (const [name, token] of Object.entries(tokens)) {
        for (const path of ['/api/v1/credits/balance', '/api/v1/simulate']) {
          const reply = await send(
            gw.url,
            path === '/api/v1/simulate' ? 'POST' : 'GET',
            path,
            { authorization: `Bearer ${token}`, ...jsonType },
            path === '/api/v1/simulate' ? json({}) : undefined,
          );
          assert.equal(reply.status, 401, `${name} at ${path}`);
          assert.match(String(reply.headers['www-authenticate']), /invalid_token/);
        }
        const introspected = await gw.call('POST', '/api/v1/auth/introspect', { headers: { 'X-Service-Key': SERVICE_KEY }, body: { token } });
        assert.deepEqual(introspected.body, { active: false }, name);
      }
    });

    it('refuses two Authorization headers (400), also for a credential the express lane knows', async () => {
      await send(gw.url, 'GET', '/api/v1/graph/moments', user.headers);
      const before = gw.upstreams.graph.requests.length;
      const reply = await send(gw.url, 'GET', '/api/v1/graph/moments', { authorization: [user.headers.Authorization!, 'Bearer other'] });
      assert.equal(reply.status, 400);
      assert.equal(gw.upstreams.graph.requests.length, before);
    });
  });

  it('counts every credential of an account against one window (limits belong to the account)', async () => {
    const free = await gw.user({ tier: 'free' });
    const keys: string[] = [];
    for (let i = 0; i < 3; i += 1)
      keys.push((await gw.call('POST', '/api/v1/users/me/api-keys', { headers: free.headers, body: { name: `k${i}`, scopes: ['read', 'write'] } })).body.key);
    const remaining: number[] = [];
    for (const headers of [free.headers, ...keys.map((key) => ({ 'X-API-Key': key }))]) {
      const reply = await send(gw.url, 'GET', '/api/v1/graph/moments', headers);
      remaining.push(Number(reply.headers['x-ratelimit-remaining']));
    }
    for (let i = 1; i < remaining.length; i += 1)
      assert.equal(remaining[i], remaining[i - 1]! - 1, `credential ${i} spends the account's window: ${remaining.join(', ')}`);
  });

  it('believes X-Forwarded-For only from a trusted proxy: rotating it buys no demo account and no fresh window', async () => {
    const exposed = await startGateway({ TRUSTED_PROXIES: '', DEMO_SIGNINS_PER_HOUR: '2', RATE_LIMIT_MULTIPLIER: '1' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i += 1)
        statuses.push((await send(exposed.url, 'POST', '/api/v1/auth/demo', { 'x-forwarded-for': `203.0.113.${i}`, ...jsonType }, json({}))).status);
      assert.deepEqual(statuses, [201, 201, 429, 429]);
      const first = await send(exposed.url, 'GET', '/api/v1/credits/costs', { 'x-forwarded-for': '198.51.100.1' });
      const second = await send(exposed.url, 'GET', '/api/v1/credits/costs', { 'x-forwarded-for': '198.51.100.2' });
      assert.equal(Number(second.headers['x-ratelimit-remaining']), Number(first.headers['x-ratelimit-remaining']) - 1);
      await send(exposed.url, 'GET', '/api/v1/graph/moments', { 'x-forwarded-for': '198.51.100.3', 'x-forwarded-host': 'evil.example' });
      const seen = exposed.upstreams.graph.requests.at(-1)!;
      assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1', "the client's own entries are not passed on");
      assert.notEqual(seen.headers['x-forwarded-host'], 'evil.example');
    } finally {
      await exposed.stop();
    }
  });

  describe('the express lane and the Koa app decide alike (differential, fast-check)', () => {
    let koaOnly: RunningServer;
    before(async () => {
      koaOnly = await serve(gw.instance.app, { port: 0, host: '127.0.0.1', logger: gw.instance.logger, graceMs: 100 });
    });
    after(() => koaOnly.close());

    const ROUTES: Array<[method: string, path: string]> = [
      ['POST', '/api/v1/timepoints/generate/sync'],
      ['POST', '/api/v1/timepoints/generate'],
      ['POST', '/api/v1/timepoints/generate/stream'],
      ['POST', '/api/v1/simulate'],
      ['GET', '/api/v1/simulations/abc'],
      ['GET', '/api/v1/timepoints/abc'],
      ['GET', '/api/v1/graph/moments'],
      ['POST', '/api/v1/graph/mcp'],
      ['GET', '/api/v1/billing/packs'],
      ['POST', '/api/v1/conductor/messages'],
      ['GET', '/api/v1/credits/balance'],
      ['GET', '/health'],
    ];
    /** Spellings of one target: what clients and attackers send for it. */
    const spelling = fc.oneof(
      fc.constant((path: string) => path),
      fc.constant((path: string) => `${path}/`),
      fc.constant((path: string) => path.replace('/v1/', '/v1//')),
      fc.constant((path: string) => path.replace('/v1/', '/v1/./')),
      fc.constant((path: string) => path.replace('/v1/', '/v1/zz/../')),
      fc.constant((path: string) => `${path}#frag`),
      fc.constant((path: string) => `${path}?limit=1`),
      fc.constant((path: string) => path.replace(/[a-z](?=[^/]*$)/, (c) => `%${c.charCodeAt(0).toString(16)}`)),
      fc.constant((path: string) => path.replace(/[a-z](?=[^/]*$)/, (c) => c.toUpperCase())),
      fc.constant((path: string) => path.replace('/api/', '/API/')),
      fc.constant((path: string) => `${path}%`),
    );
    const payload = fc.record(
      {
        query: fc.constant('the coronation of Charlemagne'),
        preset: fc.constantFrom(undefined, 'hyper', 'balanced', 'gemini3', 'hd', 'HD', 7),
        generate_image: fc.constantFrom(undefined, true, false, 'true'),
        fidelity: fc.constantFrom(undefined, 1, 2, 3, 4, 5, 5.0, '5', 6),
      },
      { requiredKeys: ['query'] },
    );
    const encoding = fc.constantFrom('identity', 'bom', 'gzip', 'deflate', 'duplicate');
    const credential = fc.constantFrom('bearer', 'api-key', 'read-key', 'none', 'bogus');

    it('gives every variant the same status, upstream, forwarded target, identity and charge on both lanes, and charges what ran', async () => {
      const payer = await gw.user({ tier: 'enterprise' });
      await gw.grant(payer.userId, 1_000_000);
      const start = await balanceOf(gw, payer);
      const writeKey = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: payer.headers, body: { name: 'w', scopes: ['read', 'write'] } })).body
        .key as string;
      const readKey = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: payer.headers, body: { name: 'r', scopes: ['read'] } })).body
        .key as string;
      const credentials: Record<string, Record<string, string>> = {
        bearer: payer.headers,
        'api-key': { 'X-API-Key': writeKey },
        'read-key': { 'X-API-Key': readKey },
        none: {},
        bogus: { authorization: 'Bearer nope' },
      };
      const upstreams = Object.values(gw.upstreams);
      let charged = 0;
      let priced = 0;
      let laneTaken = 0;

      const observe = async (base: string, method: string, target: string, headers: Record<string, string>, body: Buffer | undefined) => {
        const counts = upstreams.map((upstream) => upstream.requests.length);
        const reply = await send(base, method, target, headers, body);
        const reached = upstreams.flatMap((upstream, i) => upstream.requests.slice(counts[i]).map((seen) => ({ upstream: upstream.name, seen })));
        return { reply, reached };
      };
      const decisionOf = ({ reply, reached }: { reply: RawReply; reached: Array<{ upstream: string; seen: Recorded }> }) => ({
        status: reply.status,
        charged: reply.headers['x-credits-charged'],
        reached: reached.map(({ upstream, seen }) => ({ upstream, method: seen.method, url: seen.url, user: seen.headers['x-user-id'], body: seen.body })),
      });
      const laneCount = async () => Number(/gateway_express_lane_requests_total\{[^}]*\} (\d+)/.exec(await scrape(gw.server))?.[1] ?? 0);

      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...ROUTES), spelling, payload, encoding, credential, async ([method, path], spell, fields, coding, who) => {
          const target = spell(path);
          let body: Buffer | undefined;
          const headers: Record<string, string> = { ...credentials[who] };
          if (method === 'POST') {
            const text = JSON.stringify(fields);
            headers['content-type'] = 'application/json';
            if (coding === 'gzip') [body, headers['content-encoding']] = [gzipSync(text), 'gzip'];
            else if (coding === 'deflate') [body, headers['content-encoding']] = [deflateSync(text), 'deflate'];
            else if (coding === 'bom') body = Buffer.from(`\ufeff${text}`);
            else if (coding === 'duplicate') body = Buffer.from(text.replace(/^\{/, '{"preset":"hyper",'));
            else body = Buffer.from(text);
          }
          const viaKoa = await observe(koaOnly.url, method, target, headers, body);
          const lanesBefore = await laneCount();
          const viaLane = await observe(gw.url, method, target, headers, body);
          laneTaken += (await laneCount()) - lanesBefore;
          const [koa, lane] = [decisionOf(viaKoa), decisionOf(viaLane)];
          assert.deepEqual(lane, koa, `${method} ${target} as ${who} (${coding})`);
          for (const { reply, reached } of [viaKoa, viaLane]) {
            const amount = Number(reply.headers['x-credits-charged'] ?? 0);
            charged += amount;
            // Reconciliation: what the ledger took is the price of what the upstream was given to run.
            const ran = reached.map(({ seen }) => priceOfRun(seen)).reduce((a, b) => a + b, 0);
            priced += ran;
            assert.equal(amount, ran, `${method} ${target} as ${who} (${coding}): charged ${amount}, ran ${ran}`);
            for (const { seen } of reached) {
              assert.ok(!seen.url.includes('#') && !seen.url.includes('//') && !/\/\.\.?(\/|$)/.test(seen.url), `forwarded a non-canonical target ${seen.url}`);
              if (seen.headers['x-user-id'] !== undefined) assert.equal(seen.headers['x-user-id'], payer.userId);
            }
          }
        }),
        { numRuns: 300 },
      );
      assert.equal(charged, priced);
      assert.ok(laneTaken > 0, 'the lane took some of the variants');
      const spent = start - (await balanceOf(gw, payer));
      assert.equal(spent, charged, 'the ledger reconciles with the charges reported');
    });
  });
});
