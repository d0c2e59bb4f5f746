import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request as httpRequest, type ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { EndlessBody, readPattern } from '../../../test/support/stand-ins/upstream.ts';
import { admin, type GatewayHarness, pausedRequest, type SignedIn, service, startGateway, useGateway } from './harness.ts';

/** node:http, because fetch refuses to send a Connection header. */
async function rawGet(
  target: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: import('node:http').IncomingHttpHeaders; body: string }> {
  const res = await pausedRequest(target, headers);
  let body = '';
  for await (const chunk of res) body += String(chunk);
  return { status: res.statusCode ?? 0, headers: res.headers, body };
}

describe('gateway: proxy', function () {
  this.timeout(30_000);
  let gw: GatewayHarness;
  let user: SignedIn;
  useGateway(
    async (started) => {
      gw = started;
      user = await gw.user();
    },
    { resetUpstreams: true },
  );

  describe('routing table', () => {
    const cases: Array<[string, string, keyof GatewayHarness['upstreams']]> = [
      ['GET', '/api/v1/timepoints/abc', 'generation'],
      ['GET', '/api/v1/graph/traverse/1969/july/20/2056/usa/florida/cape/apollo?depth=2', 'graph'],
      ['GET', '/api/v1/billing/packs', 'billing'],
      ['GET', '/api/v1/models', 'generation'],
      ['GET', '/api/v1/simulations/42', 'simulation'],
      ['GET', '/api/v1/conductor/settings', 'conductor'],
    ];
    for (const [method, path, upstream] of cases) {
      it(`${method} ${path} goes to ${upstream}, path and query unchanged`, async () => {
        const reply = await gw.call(method, path, { headers: user.headers });
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        assert.equal(reply.body.upstream, upstream);
        assert.equal(gw.upstreams[upstream].requests[0]?.url, path);
      });
    }
    it('never proxies gateway-native paths (unknown ones are 404 here)', async () => {
      for (const path of ['/api/v1/auth/unknown', '/api/v1/users/someone', '/api/v1/credits/nothing']) {
        const reply = await gw.call('GET', path, { headers: user.headers });
        assert.equal(reply.status, 404, path);
        assert.equal(reply.headers.get('content-type'), 'application/problem+json');
      }
      assert.equal(
        Object.values(gw.upstreams).reduce((n, u) => n + u.requests.length, 0),
        0,
      );
    });
    it('proxies GET /api/v1/users/me/timepoints to the generation service with X-User-ID', async () => {
      const reply = await gw.call('GET', '/api/v1/users/me/timepoints?limit=5', { headers: user.headers });
      assert.equal(reply.status, 200);
      const seen = gw.upstreams.generation.requests[0]!;
      assert.equal(seen.url, '/api/v1/users/me/timepoints?limit=5');
      assert.equal(seen.headers['x-user-id'], user.userId);
    });
    it('lets anonymous GETs reach the graph (its public reads) without identity or key, and refuses other anonymous calls', async () => {
      const reply = await gw.call('GET', '/api/v1/graph/moments');
      assert.equal(reply.status, 200);
      const seen = gw.upstreams.graph.requests[0]!;
      assert.equal(seen.headers['x-user-id'], undefined);
      assert.equal(seen.headers['x-service-key'], undefined);
      const post = await gw.call('POST', '/api/v1/graph/generate', { body: {} });
      assert.equal(post.status, 401);
      assert.match(post.headers.get('www-authenticate') ?? '', /Bearer/);
      assert.equal((await gw.call('GET', '/api/v1/timepoints/abc')).status, 401);
    });
    it('forwards payment webhooks without a credential, identity or key, byte for byte (their signature covers the raw body)', async () => {
      const raw = '{"id":"evt_1","type":"checkout.session.completed",  "data":{"object":{"amount_total":500}}}\n';
      const reply = await gw.call('POST', '/api/v1/billing/webhooks/stripe', {
        headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=abc', ...user.headers },
        raw,
      });
      assert.equal(reply.status, 200);
      const seen = gw.upstreams.billing.requests[0]!;
      assert.equal(seen.url, '/api/v1/billing/webhooks/stripe');
      assert.equal(seen.body, raw, 'the bytes as sent, whitespace included');
      assert.equal(seen.headers['stripe-signature'], 't=1,v1=abc');
      for (const header of ['x-user-id', 'x-service-key', 'authorization']) assert.equal(seen.headers[header], undefined, header);
      const anonymous = await gw.call('POST', '/api/v1/billing/webhooks/apple', {
        headers: { 'content-type': 'application/json' },
        raw: '{"signedPayload":"x"}',
      });
      assert.equal(anonymous.status, 200, 'no credential needed');
      assert.equal((await gw.call('POST', '/api/v1/billing/checkout', { body: {} })).status, 401, 'the rest of billing still needs a user');
    });
    it('refuses service and admin keys on proxied routes (services call backends directly)', async () => {
      assert.equal((await gw.call('GET', '/api/v1/timepoints/abc', { headers: service })).status, 403);
      assert.equal((await gw.call('GET', '/api/v1/graph/moments', { headers: admin })).status, 403);
    });
  });

  describe('headers', () => {
    it('strips spoofed identity, credentials and hop-by-hop fields; injects X-User-ID, X-Request-ID, traceparent and the upstream key', async () => {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const forged = await gw.call('GET', '/api/v1/timepoints/abc', { headers: { ...user.headers, 'X-Service-Key': 'forged-key' } });
      assert.equal(forged.status, 401, 'a forged service key is an invalid credential');
      assert.equal(gw.upstreams.generation.requests.length, 0);
      const honest = await rawGet(`${gw.url}/api/v1/timepoints/abc`, {
        ...user.headers,
        'X-User-ID': 'someone-else',
        'X-Service-Key': service['X-Service-Key'],
        'X-User-Tier': 'enterprise',
        'X-Request-ID': 'req-123',
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
        Connection: 'keep-alive, X-Secret-Hop',
        'X-Secret-Hop': 'do-not-forward',
        'Proxy-Authorization': 'Basic abc',
        'X-Custom': 'kept',
      });
      assert.equal(honest.status, 200);
      const seen = gw.upstreams.generation.requests.at(-1)!;
      assert.equal(seen.headers['x-user-id'], user.userId);
      assert.equal(seen.headers['x-user-tier'], 'free');
      assert.equal(seen.headers['x-service-key'], 'upstream-service-key-0123456789');
      assert.equal(seen.headers['x-request-id'], 'req-123');
      assert.equal(honest.headers['x-request-id'], 'req-123');
      assert.match(String(seen.headers.traceparent), new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
      assert.notEqual(String(seen.headers.traceparent).split('-')[2], '00f067aa0ba902b7', 'a new parent id');
      assert.equal(seen.headers['x-secret-hop'], undefined);
      assert.equal(seen.headers['proxy-authorization'], undefined);
      assert.equal(seen.headers.authorization, undefined, 'credentials stay at the edge');
      assert.equal(seen.headers['x-admin-key'], undefined);
      assert.equal(seen.headers['x-custom'], 'kept');
      assert.ok(seen.headers['x-forwarded-for']);
    });
    it('never lets a spoofed X-User-ID or X-Service-Key through, whatever the credential', async () => {
      const keyReply = await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'spoof' } });
      const spoof = { 'X-User-ID': 'admin', 'X-Service-Key': 'forged', 'x-user-id': 'admin' };
      await gw.call('GET', '/api/v1/graph/moments', { headers: { 'X-User-ID': 'admin' } });
      await gw.call('GET', '/api/v1/models', { headers: { ...user.headers, 'X-User-ID': 'admin' } });
      await gw.call('GET', '/api/v1/models', { headers: { 'X-API-Key': keyReply.body.key, 'X-User-ID': 'admin' } });
      await gw.call('GET', '/api/v1/billing/x', { headers: { ...user.headers, ...spoof } });
      const all = Object.values(gw.upstreams).flatMap((u) => u.requests);
      assert.ok(all.length >= 3);
      for (const seen of all) {
        assert.notEqual(seen.headers['x-user-id'], 'admin');
        assert.notEqual(seen.headers['x-service-key'], 'forged');
        assert.equal(seen.headers['x-api-key'], undefined);
      }
    });
    it("drops the upstream's own rate-limit, CORS and hop-by-hop headers in favour of the gateway's", async () => {
      gw.upstreams.generation.on('GET /api/v1/headers', (_req, res) => {
        res.writeHead(200, {
          'content-type': 'application/json',
          'x-ratelimit-limit': '999999',
          'access-control-allow-origin': '*',
          'keep-alive': 'timeout=5',
          'x-kept': 'yes',
        });
        res.end('{}');
      });
      const reply = await gw.call('GET', '/api/v1/headers', { headers: user.headers });
      assert.equal(reply.headers.get('x-kept'), 'yes');
      assert.notEqual(reply.headers.get('x-ratelimit-limit'), '999999');
      assert.equal(reply.headers.get('access-control-allow-origin'), null);
      assert.equal(reply.headers.get('x-credits-charged'), '0');
    });
  });

  describe('streaming', () => {
    it('delivers an SSE stream event by event, before the upstream has finished', async () => {
      await gw.grant(user.userId, 100);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/stream', async (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write('event: Judge\ndata: {"agent":"Judge"}\n\n');
        await gate;
        res.write('event: Timeline\ndata: {"agent":"Timeline"}\n\n');
        res.end('event: done\ndata: {}\n\n');
      });
      const response = await fetch(`${gw.url}/api/v1/timepoints/generate/stream`, {
        method: 'POST',
        headers: { ...user.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'the fall of the Berlin wall', preset: 'hyper' }),
      });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('content-type'), 'text/event-stream');
      assert.equal(response.headers.get('x-credits-charged'), '1');
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      const first = decoder.decode((await reader.read()).value);
      assert.match(first, /event: Judge/);
      assert.doesNotMatch(first, /Timeline/, 'the second event has not been sent yet');
      release();
      let rest = '';
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += decoder.decode(chunk.value);
      assert.match(rest, /event: Timeline[\s\S]*event: done/);
      assert.equal(JSON.parse(gw.upstreams.generation.requests.at(-1)!.body).preset, 'hyper', 'the priced body is forwarded byte for byte');
    });
    it('streams a request body to the upstream without waiting for its end', async () => {
      let received = '';
      let firstChunkSeen!: () => void;
      const sawFirst = new Promise<void>((resolve) => {
        firstChunkSeen = resolve;
      });
      gw.upstreams.generation.on('PUT /api/v1/upload-stream', async (req, res) => {
        for await (const chunk of req) {
          received += String(chunk);
          firstChunkSeen();
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ bytes: received.length }));
      });
      const url = new URL(`${gw.url}/api/v1/upload-stream`);
      const req = httpRequest({
        hostname: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'PUT',
        headers: { ...user.headers, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
      });
      req.write('first-chunk;');
      await sawFirst;
      assert.equal(received, 'first-chunk;', 'the first chunk arrived before the request ended');
      req.end('second-chunk');
      const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
      let text = '';
      for await (const chunk of res) text += String(chunk);
      assert.equal(res.statusCode, 200);
      assert.equal(JSON.parse(text).bytes, 'first-chunk;second-chunk'.length);
    });
    it('holds the upstream back while a slow client reads nothing, and delivers every byte', async () => {
      let body = new EndlessBody();
      gw.upstreams.graph.on('GET /api/v1/graph/large', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return body.writeTo(res);
      });
      // Once through the full chain, then again through the express lane (the credential is known by then).
      for (let round = 0; round < 2; round += 1) {
        body = new EndlessBody();
        const res = await pausedRequest(`${gw.url}/api/v1/graph/large`, user.headers);
        assert.ok((await body.heldBack) !== undefined, `round ${round}: the upstream went on writing to a client that read nothing`);
        body.finish();
        assert.equal(res.statusCode, 200);
        assert.equal(await readPattern(res), body.sent, `round ${round}: every byte arrives, in order`);
      }
    });
    it('cancels the upstream call when the client leaves in the middle of a stream', async () => {
      let upstreamSawClose!: () => void;
      gw.upstreams.graph.on('GET /api/v1/graph/live', (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: first\ndata: {}\n\n');
        res.once('close', () => upstreamSawClose());
      });
      // Twice: the second call takes the express lane (the credential is known by then).
      for (let i = 0; i < 2; i += 1) {
        const closed = new Promise<void>((resolve) => {
          upstreamSawClose = resolve;
        });
        const res = await pausedRequest(`${gw.url}/api/v1/graph/live`, user.headers);
        const first = await res[Symbol.asyncIterator]().next();
        assert.match(String(first.value), /event: first/);
        res.destroy();
        await closed;
      }
    });
  });

  describe('upstream failures', () => {
    it('answers 502 problem+json when the upstream refuses connections', async () => {
      const harness = await startGateway({ GENERATION_URL: 'http://127.0.0.1:9' });
      try {
        const someone = await harness.user();
        const reply = await harness.call('GET', '/api/v1/timepoints/abc', { headers: someone.headers });
        assert.equal(reply.status, 502);
        assert.equal(reply.headers.get('content-type'), 'application/problem+json');
        assert.match(reply.body.detail, /generation/);
      } finally {
        await harness.stop();
      }
    });
    it('answers 504 problem+json when the upstream does not answer in time', async () => {
      gw.upstreams.generation.on('GET /api/v1/slow', async (_req, res) => {
        await sleep(2500);
        res.writeHead(200).end('{}');
      });
      const reply = await gw.call('GET', '/api/v1/slow', { headers: user.headers });
      assert.equal(reply.status, 504, 'the upstream would have answered 200 after 2.5 s; the gateway gave up at 1.5 s');
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    });
    it('gives a synchronous generation SYNC_GENERATION_TIMEOUT_MS to answer, and every other call UPSTREAM_TIMEOUT_MS', async () => {
      const harness = await startGateway({ UPSTREAM_TIMEOUT_MS: '500', SYNC_GENERATION_TIMEOUT_MS: '3000' });
      try {
        const someone = await harness.user();
        const answerAfter = (ms: number) => async (_req: unknown, res: ServerResponse) => {
          await sleep(ms);
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"s1"}');
        };
        harness.upstreams.generation.on('GET /api/v1/timepoints/slow', answerAfter(1_200));
        const read = await harness.call('GET', '/api/v1/timepoints/slow', { headers: someone.headers });
        assert.equal(read.status, 504);
        assert.match(read.body.detail, /did not answer within 1 s/);
        harness.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', answerAfter(1_200));
        const render = await harness.call('POST', '/api/v1/timepoints/generate/sync', {
          headers: someone.headers,
          body: { query: 'The first flight at Kitty Hawk, 1903' },
        });
        assert.equal(render.status, 200, 'a render past UPSTREAM_TIMEOUT_MS is still waited for');
        assert.equal(render.headers.get('x-credits-charged'), '2');
        harness.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', answerAfter(4_000));
        const started = Date.now();
        const late = await harness.call('POST', '/api/v1/timepoints/generate/sync', {
          headers: someone.headers,
          body: { query: 'The first flight at Kitty Hawk, 1903' },
        });
        assert.equal(late.status, 504);
        assert.match(late.body.detail, /did not answer within 3 s/);
        assert.ok(Date.now() - started < 3_900, `gave up after ${Date.now() - started} ms`);
        assert.equal(late.headers.get('x-credits-charged'), '0');
      } finally {
        await harness.stop();
      }
    });
    it('passes upstream errors through unchanged', async () => {
      gw.upstreams.generation.on('GET /api/v1/teapot', (_req, res) => {
        res.writeHead(418, { 'content-type': 'application/problem+json' });
        res.end(JSON.stringify({ status: 418, title: 'teapot' }));
      });
      const reply = await gw.call('GET', '/api/v1/teapot', { headers: user.headers });
      assert.equal(reply.status, 418);
      assert.equal(reply.body.title, 'teapot');
    });
  });
});
