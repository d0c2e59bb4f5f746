import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { z } from 'zod';
import { request } from '../../../test/support/http.ts';
import { createApp } from '../src/http/app.ts';
import { defineRoute } from '../src/http/routes.ts';
import { createLogger } from '../src/observability/logger.ts';
import { Metrics } from '../src/observability/metrics.ts';

describe('kit validation', () => {
  let server: Server;
  let base: string;
  const stored: unknown[] = [];

  before(async () => {
    const { app } = createApp({
      name: 'graph',
      version: '0.0.0',
      title: 't',
      description: 't',
      config: { TEMPORA_DOMAIN: undefined, BODY_LIMIT: '1kb', TRUSTED_PROXIES: [], TRUSTED_PROXY_HOPS: 0 },
      logger: createLogger('t', 'silent'),
      metrics: new Metrics('validation_test'),
      authenticators: [],
      health: async () => ({ status: 'ok' }),
      routes: [
        defineRoute({
          method: 'get',
          path: '/api/v1/things',
          operationId: 'things',
          security: [],
          summary: 's',
          tags: ['t'],
          query: z.object({ q: z.string().optional(), tag: z.string().optional() }),
          responses: { 200: { description: 'ok' } },
          handler: async (_ctx, { query }) => ({ query }),
        }),
        defineRoute({
          method: 'post',
          path: '/api/v1/things',
          operationId: 'makeThing',
          security: [],
          summary: 's',
          tags: ['t'],
          body: z.object({ name: z.string(), meta: z.record(z.string(), z.unknown()).optional() }),
          responses: { 200: { description: 'ok' } },
          handler: async (_ctx, { body }) => {
            stored.push(body);
            return body;
          },
        }),
        defineRoute({
          method: 'post',
          path: '/api/v1/batch',
          operationId: 'batch',
          security: [],
          summary: 's',
          tags: ['t'],
          documentedBody: z.array(z.object({ name: z.string() })),
          responses: { 200: { description: 'ok' } },
          handler: async () => ({ validated: 'by the handler' }),
        }),
      ],
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  it('refuses a NUL character in a query parameter with a 422 naming it', async () => {
    const reply = await request(base, '/api/v1/things?q=%00&tag=ok');
    assert.equal(reply.status, 422);
    assert.match(reply.headers.get('content-type')!, /problem\+json/);
    assert.deepEqual(
      reply.body.errors.map((e: { path: string }) => e.path),
      ['query.q'],
    );
  });

  it('refuses NUL characters and lone surrogates anywhere in a JSON body, keys included, and stores nothing', async () => {
    const cases: Array<[string, string]> = [
      ['{"name":"a\\u0000b"}', 'body.name'],
      ['{"name":"\\ud800"}', 'body.name'],
      ['{"name":"ok","meta":{"deep":["x","\\udc00y"]}}', 'body.meta.deep.1'],
      ['{"name":"ok","meta":{"k\\u0000":1}}', 'body.meta.k\u0000'],
    ];
    for (const [raw, path] of cases) {
      const reply = await request(base, '/api/v1/things', { method: 'POST', headers: { 'content-type': 'application/json' }, raw });
      assert.equal(reply.status, 422, raw);
      assert.equal(reply.body.errors[0].path, path, raw);
    }
    assert.deepEqual(stored, []);
    const paired = await request(base, '/api/v1/things', { body: { name: 'Ἀθῆναι 😀' } });
    assert.equal(paired.status, 200, 'well-formed text, astral characters included, passes');
  });

  it('answers an empty or missing body with a 422 that says the body is required', async () => {
    for (const headers of [{ 'content-type': 'application/json' }, {} as Record<string, string>]) {
      const reply = await request(base, '/api/v1/things', { method: 'POST', headers, raw: '' });
      assert.equal(reply.status, 422, JSON.stringify(headers));
      assert.deepEqual(reply.body.errors, [{ path: 'body', message: 'a JSON body is required' }]);
    }
    // As `curl -X POST -H 'content-type: application/json'` sends it: no Content-Length at all.
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect((server.address() as AddressInfo).port, '127.0.0.1', () =>
        socket.end('POST /api/v1/things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n'),
      );
      let text = '';
      socket.on('data', (chunk) => (text += chunk));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    assert.match(raw, /^HTTP\/1\.1 422/);
    assert.match(raw, /a JSON body is required/);
  });

  it('says the body is required for a route that validates its body itself, too', async () => {
    const reply = await request(base, '/api/v1/batch', { method: 'POST', headers: { 'content-type': 'application/json' }, raw: '' });
    assert.equal(reply.status, 422);
    assert.deepEqual(reply.body.errors, [{ path: 'body', message: 'a JSON body is required' }]);
  });

  it('refuses unstorable text in the body of a route that validates its body itself (POST /ingest/tdf is one)', async () => {
    const reply = await request(base, '/api/v1/batch', { method: 'POST', headers: { 'content-type': 'application/json' }, raw: '[{"name":"a\\u0000b"}]' });
    assert.equal(reply.status, 422);
    assert.deepEqual(
      reply.body.errors.map((e: { path: string }) => e.path),
      ['body.0.name'],
    );
  });

  it('still answers a body of another media type with a 415 naming it', async () => {
    const reply = await request(base, '/api/v1/things', { method: 'POST', headers: { 'content-type': 'text/plain' }, raw: 'name' });
    assert.equal(reply.status, 415);
    assert.match(reply.body.detail, /not text\/plain/);
  });
});
