import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { z } from 'zod';
import { request } from '../../../test/support/http.ts';
import { createApp } from '../src/http/app.ts';
import { Problem } from '../src/http/errors.ts';
import { JSON_MAX_DEPTH, readJson } from '../src/http/json-body.ts';
import { defineRoute, findUnstorableText } from '../src/http/routes.ts';
import { createLogger } from '../src/observability/logger.ts';
import { Metrics } from '../src/observability/metrics.ts';

/** The Problem `readJson` throws for `input`, which must be a 400. */
function refusal(input: Buffer | string): string {
  try {
    readJson(input);
  } catch (error) {
    assert.ok(error instanceof Problem, `a Problem, not ${String(error)}`);
    assert.equal(error.status, 400);
    return error.message;
  }
  assert.fail(`accepted ${String(input).slice(0, 40)}`);
}

const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('kit JSON reading (readJson)', () => {
  it('reads JSON as JSON.parse does, past one leading UTF-8 byte order mark', () => {
    const text = '{"a":[1,2.5e3,"x\\u00e9",null,true],"b":{"c":{}},"__proto__":1}';
    assert.deepEqual(readJson(text), JSON.parse(text));
    assert.deepEqual(readJson(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)])), JSON.parse(text));
    assert.deepEqual(readJson(`\ufeff${text}`), JSON.parse(text));
    assert.match(refusal(`\ufeff\ufeff${text}`), /not valid JSON/, 'one mark only');
  });

  it('refuses a duplicate key in any object, naming it and where the object is', () => {
    assert.equal(refusal('{"x":1,"x":2}'), 'duplicate key "x" in a JSON object at $');
    assert.equal(refusal('{"a":{"b":{"y":1,"x":1,"x":2}}}'), 'duplicate key "x" in a JSON object at $.a.b');
    assert.equal(refusal('{"a":[{"k":1},{"k":1,"k":1}]}'), 'duplicate key "k" in a JSON object at $.a[1]');
    assert.equal(refusal('{"x":1,"\\u0078":2}'), 'duplicate key "x" in a JSON object at $', 'the same key, spelt with an escape');
    assert.deepEqual(readJson('[{"x":1},{"x":2}]'), [{ x: 1 }, { x: 2 }], 'one key in two objects is no duplicate');
  });

  it(`reads ${JSON_MAX_DEPTH} levels of nesting and refuses a level more`, () => {
    assert.equal(JSON_MAX_DEPTH, 64);
    assert.doesNotThrow(() => readJson(nested(64)));
    assert.doesNotThrow(() => readJson(`${'{"a":'.repeat(63)}[]${'}'.repeat(63)}`));
    assert.equal(refusal(nested(65)), 'JSON nesting deeper than 64 levels');
    assert.equal(refusal(`${'{"a":'.repeat(64)}[]${'}'.repeat(64)}`), 'JSON nesting deeper than 64 levels');
  });

  it('answers a 4 KB body of 2000 nested arrays, or a megabyte of them, with a 400, never a stack overflow', () => {
    assert.equal(refusal(nested(2000)), 'JSON nesting deeper than 64 levels');
    assert.equal(refusal(Buffer.from('['.repeat(1_048_576))), 'JSON nesting deeper than 64 levels');
  });

  it('refuses what is not one JSON value, saying what is wrong', () => {
    for (const text of ['', ' ', '{"a":1,}', '[1,]', '// c\n{}', "{'a':1}", '{"a":1} {"b":2}', 'NaN', '{"a":01}', '"\t"', '{"a" 1}']) {
      assert.match(refusal(text), /^request body is not valid JSON: /, JSON.stringify(text));
    }
    assert.equal(refusal(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])), 'request body is not valid UTF-8');
  });
});

describe('kit findUnstorableText', () => {
  it('walks a value nested far deeper than the call stack goes', () => {
    let value: unknown = ['ok', 'bad\u0000'];
    for (let level = 0; level < 200_000; level += 1) value = [value];
    const errors: Array<{ path: string; message: string }> = [];
    findUnstorableText(value, 'body', errors);
    assert.equal(errors.length, 1);
    assert.match(errors[0]!.path, /^body(\.0){200000}\.1$/);
  });

  it('reports in document order, keys before their values', () => {
    const errors: Array<{ path: string; message: string }> = [];
    findUnstorableText({ a: ['\ud800', { 'k\u0000': 'v\u0000' }], b: 'x\u0000' }, 'body', errors);
    assert.deepEqual(
      errors.map((error) => error.path),
      ['body.a.0', 'body.a.1.k\u0000', 'body.a.1.k\u0000', 'body.b'],
    );
  });
});

describe('kit request bodies (createApp)', () => {
  let server: Server;
  let base: string;
  const received: unknown[] = [];

  before(async () => {
    const { app } = createApp({
      name: 'graph',
      version: '0.0.0',
      title: 't',
      description: 't',
      config: { TEMPORA_DOMAIN: undefined, BODY_LIMIT: '1kb', TRUSTED_PROXIES: [], TRUSTED_PROXY_HOPS: 1 },
      logger: createLogger('t', 'silent'),
      metrics: new Metrics('json_body_test'),
      authenticators: [],
      health: async () => ({ status: 'ok' }),
      // As billing's webhooks take theirs: the raw bytes, with the JSON reader kept off.
      beforeBody: [
        async (ctx, next) => {
          if (ctx.path !== '/api/v1/raw') return next();
          const chunks: Buffer[] = [];
          for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
          ctx.state.raw = Buffer.concat(chunks).toString();
          (ctx as { disableBodyParser?: boolean }).disableBodyParser = true;
          await next();
        },
      ],
      routes: [
        defineRoute({
          method: 'post',
          path: '/api/v1/things',
          operationId: 'makeThing',
          security: [],
          summary: 's',
          tags: ['t'],
          body: z.union([z.object({ name: z.string() }).passthrough(), z.array(z.unknown())]),
          responses: { 200: { description: 'ok' } },
          handler: async (_ctx, { body }) => {
            received.push(body);
            return { body };
          },
        }),
        defineRoute({
          method: 'post',
          path: '/api/v1/form',
          operationId: 'form',
          security: [],
          summary: 'reads a form body from the stream itself, as token introspection does',
          tags: ['t'],
          responses: { 200: { description: 'ok' } },
          handler: async (ctx) => {
            const parsed = (ctx.request as { body?: unknown }).body;
            const chunks: Buffer[] = [];
            for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
            return { parsed, form: Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString())) };
          },
        }),
        defineRoute({
          method: 'post',
          path: '/api/v1/raw',
          operationId: 'raw',
          security: [],
          summary: 's',
          tags: ['t'],
          responses: { 200: { description: 'ok' } },
          handler: async (ctx) => ({ raw: ctx.state.raw, parsed: (ctx.request as { body?: unknown }).body ?? null }),
        }),
      ],
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());
  beforeEach(() => {
    received.length = 0;
  });

  const post = (raw: string | Buffer, headers: Record<string, string> = {}) =>
    fetch(`${base}/api/v1/things`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: raw }).then(async (response) => ({
      status: response.status,
      headers: response.headers,
      body: (await response.json()) as { detail?: string; body?: unknown },
    }));

  it('answers a duplicate key, deep nesting and invalid JSON with a 400 problem naming the rule, before the route runs', async () => {
    const duplicate = await post('{"name":"a","meta":{"x":1,"x":2}}');
    assert.equal(duplicate.status, 400);
    assert.match(duplicate.headers.get('content-type')!, /problem\+json/);
    assert.equal(duplicate.body.detail, 'duplicate key "x" in a JSON object at $.meta');
    const deep = await post(nested(500));
    assert.equal(deep.status, 400);
    assert.equal(deep.body.detail, 'JSON nesting deeper than 64 levels');
    const broken = await post('{"name":');
    assert.equal(broken.status, 400);
    assert.match(broken.body.detail!, /^request body is not valid JSON: /);
    const scalar = await post('"just a string"');
    assert.equal(scalar.status, 400);
    assert.equal(scalar.body.detail, 'request body must be a JSON object or array');
    assert.deepEqual(received, []);
  });

  it('reads application/json and +json types, with or without a byte order mark', async () => {
    assert.deepEqual((await post('\ufeff{"name":"a"}')).body.body, { name: 'a' });
    const patch = await post('{"name":"b"}', { 'content-type': 'application/merge-patch+json; charset=utf-8' });
    assert.equal(patch.status, 200);
    assert.deepEqual(patch.body.body, { name: 'b' });
  });

  it('answers a body past BODY_LIMIT with a 413 naming the limit, declared or chunked', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(2000) });
    const declared = await post(big);
    assert.equal(declared.status, 413);
    assert.equal(declared.body.detail, 'request body exceeds the size limit of 1kb (BODY_LIMIT)');
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${base}/api/v1/things`,
        { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
        (res) => {
          let body = '';
          res.on('data', (chunk) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.write(big.slice(0, 800));
      req.end(big.slice(800));
    });
    assert.equal(chunked.status, 413);
    assert.match(chunked.body, /size limit of 1kb/);
    assert.equal((await post(JSON.stringify({ name: 'x'.repeat(900) }))).status, 200, 'the next request on the connection is answered');
  });

  it('refuses a content coding with a 415 that says bodies arrive decoded', async () => {
    const reply = await post(gzipSync('{"name":"a"}'), { 'content-encoding': 'gzip' });
    assert.equal(reply.status, 415);
    assert.match(reply.body.detail!, /^Content-Encoding gzip is not accepted: .*decoded by the gateway/);
    assert.equal(reply.headers.get('accept-encoding'), 'identity');
    assert.equal((await post('{"name":"a"}', { 'content-encoding': 'identity' })).status, 200);
    assert.deepEqual(received, [{ name: 'a' }]);
  });

  it('leaves a body of another media type unread for the route ({} as before), and a raw body taken before it alone', async () => {
    const form = await request(base, '/api/v1/form', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      raw: 'token=abc&x=1',
    });
    assert.equal(form.status, 200);
    assert.deepEqual(form.body, { parsed: {}, form: { token: 'abc', x: '1' } });
    const raw = await request(base, '/api/v1/raw', { method: 'POST', headers: { 'content-type': 'application/json' }, raw: '{"a":1,"a":2}' });
    assert.equal(raw.status, 200, "a duplicate key is the raw reader's business");
    assert.deepEqual(raw.body, { raw: '{"a":1,"a":2}', parsed: null });
  });

  it('reads a typical 1 KB body in well under a millisecond', () => {
    const item = {
      id: '3f2b8c1e-9a4d-4c7b-8e2f-1a2b3c4d5e6f',
      year: -44,
      title: 'The Ides of March',
      tags: ['rome', 'caesar', 'senate'],
      weight: 0.75,
      done: false,
    };
    const typical = Buffer.from(JSON.stringify({ name: 'batch', items: Array.from({ length: 6 }, (_, index) => ({ ...item, index })) }));
    assert.ok(typical.length > 900 && typical.length < 1200, String(typical.length));
    for (let i = 0; i < 2_000; i += 1) readJson(typical);
    const rounds = 20_000;
    const started = process.hrtime.bigint();
    for (let i = 0; i < rounds; i += 1) readJson(typical);
    const microseconds = Number(process.hrtime.bigint() - started) / 1000 / rounds;
    assert.ok(microseconds < 500, `${microseconds.toFixed(1)} µs per body`);
  });
});
