import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { createApp } from '../src/http/app.ts';
import { serviceKeyAuth } from '../src/http/auth.ts';
import { createClientAddress } from '../src/http/client-address.ts';
import { defineRoute } from '../src/http/routes.ts';
import { createLogger } from '../src/observability/logger.ts';
import { Metrics } from '../src/observability/metrics.ts';
import { baseConfigSchema, ConfigError, loadConfig } from '../src/runtime/config.ts';

interface RawReply {
  status: number;
  body: { detail?: string; ip?: string; [field: string]: unknown };
}

/** A request as written: repeated header fields stay repeated on the wire (fetch would join them). */
function send(base: string, method: string, path: string, headers: OutgoingHttpHeaders = {}): Promise<RawReply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname: url.hostname, port: url.port, method, path, headers, agent: false });
    req.once('error', reject);
    req.once('response', (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body: text.startsWith('{') ? JSON.parse(text) : { text } }));
    });
    req.end();
  });
}

async function startApp(proxies: { TRUSTED_PROXIES: string[]; TRUSTED_PROXY_HOPS: number }): Promise<{ base: string; server: Server }> {
  const { app } = createApp({
    name: 'graph',
    version: '0.0.0',
    title: 't',
    description: 't',
    config: { TEMPORA_DOMAIN: undefined, BODY_LIMIT: '1kb', ...proxies },
    logger: createLogger('t', 'silent'),
    metrics: new Metrics(`request_reading_test_${proxies.TRUSTED_PROXIES.length}`),
    authenticators: [serviceKeyAuth(['service-key-0123456789'])],
    health: async () => ({ status: 'ok' }),
    routes: [
      defineRoute({
        method: 'get',
        path: '/api/v1/things/{id}',
        operationId: 'thing',
        security: [],
        summary: 's',
        tags: ['t'],
        params: z.object({ id: z.string() }),
        responses: { 200: { description: 'ok' } },
        handler: async (ctx, { params }) => ({ id: params.id, ip: ctx.ip }),
      }),
      defineRoute({
        method: 'get',
        path: '/api/v1/whoami',
        operationId: 'whoami',
        security: [],
        summary: 's',
        tags: ['t'],
        responses: { 200: { description: 'ok' } },
        handler: async (ctx) => ({ ip: ctx.ip, principal: ctx.state.principal?.kind ?? null }),
      }),
    ],
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('kit: one reading of a request', () => {
  let direct: { base: string; server: Server };
  let proxied: { base: string; server: Server };
  before(async () => {
    direct = await startApp({ TRUSTED_PROXIES: [], TRUSTED_PROXY_HOPS: 1 });
    proxied = await startApp({ TRUSTED_PROXIES: ['127.0.0.1'], TRUSTED_PROXY_HOPS: 1 });
  });
  after(() => {
    direct.server.close();
    proxied.server.close();
  });

  describe('strict routes', () => {
    it('match paths exactly: no other case, no trailing slash, on API, operational and documentation routes', async () => {
      assert.equal((await send(direct.base, 'GET', '/api/v1/things/a')).status, 200);
      assert.equal((await send(direct.base, 'GET', '/api/v1/things/A')).body.id, 'A', 'parameters keep their case');
      for (const path of [
        '/api/v1/things/a/',
        '/API/v1/things/a',
        '/api/v1/Things/a',
        '/api/v1/whoami/',
        '/api/v1/WhoAmI',
        '/health/',
        '/Health',
        '/metrics',
        '/openapi.json/',
        '/OpenAPI.json',
        '/docs/',
      ]) {
        const reply = await send(direct.base, 'GET', path);
        assert.equal(reply.status, 404, path);
        assert.equal(reply.body.detail, `no route for GET ${path}`);
      }
      for (const path of ['/health', '/openapi.json', '/docs']) assert.equal((await send(direct.base, 'GET', path)).status, 200, path);
    });
  });

  describe('credential headers', () => {
    it('answers two Authorization, X-API-Key or X-Service-Key headers with a 400 naming the field', async () => {
      const repeated: Array<[string, string[]]> = [
        ['Authorization', ['Bearer a', 'Bearer b']],
        ['X-API-Key', ['k1', 'k2']],
        ['X-Service-Key', ['service-key-0123456789', 'service-key-0123456789']],
      ];
      for (const [field, values] of repeated) {
        const reply = await send(direct.base, 'GET', '/api/v1/whoami', { [field]: values });
        assert.equal(reply.status, 400, field);
        assert.equal(reply.body.detail, `more than one ${field} header`);
      }
      const once = await send(direct.base, 'GET', '/api/v1/whoami', { 'X-Service-Key': 'service-key-0123456789' });
      assert.deepEqual([once.status, once.body.principal], [200, 'service'], 'one of each is read as before');
    });
  });

  describe('the client address', () => {
    it('ignores X-Forwarded-For when no proxy is trusted (the default)', async () => {
      const reply = await send(direct.base, 'GET', '/api/v1/whoami', { 'X-Forwarded-For': '203.0.113.7' });
      assert.equal(reply.body.ip, '127.0.0.1');
      assert.deepEqual(loadConfig(baseConfigSchema('graph'), {}).TRUSTED_PROXIES, []);
    });

    it('takes the entry a trusted peer appended, walking no further than TRUSTED_PROXY_HOPS', async () => {
      assert.equal((await send(proxied.base, 'GET', '/api/v1/whoami', { 'X-Forwarded-For': '203.0.113.7' })).body.ip, '203.0.113.7');
      assert.equal(
        (await send(proxied.base, 'GET', '/api/v1/whoami', { 'X-Forwarded-For': '10.0.0.1, 198.51.100.2' })).body.ip,
        '198.51.100.2',
        'a spoofed leftmost entry is not reached',
      );
      assert.equal((await send(proxied.base, 'GET', '/api/v1/whoami')).body.ip, '127.0.0.1', 'a trusted peer that forwards nobody is the client');
    });

    it('is one decision, exported for the gateway: peers and hops walked right to left through trusted proxies only', () => {
      const message = (peer: string, forwarded?: string) =>
        ({
          socket: { remoteAddress: peer },
          connection: { remoteAddress: peer },
          headers: forwarded ? { 'x-forwarded-for': forwarded } : {},
        }) as unknown as IncomingMessage;
      const config = (TRUSTED_PROXIES: string[], TRUSTED_PROXY_HOPS: number) => createClientAddress({ TRUSTED_PROXIES, TRUSTED_PROXY_HOPS });
      const chain = '203.0.113.9, 10.1.0.5, 10.2.0.7';
      assert.equal(config([], 3)(message('10.0.0.1', chain)), '10.0.0.1');
      assert.equal(config(['10.0.0.0/8'], 0)(message('10.0.0.1', chain)), '10.0.0.1', 'no hops: nothing trusted');
      assert.equal(config(['10.0.0.0/8'], 1)(message('10.0.0.1', chain)), '10.2.0.7');
      assert.equal(config(['10.0.0.0/8'], 2)(message('10.0.0.1', chain)), '10.1.0.5');
      assert.equal(config(['10.0.0.0/8'], 3)(message('10.0.0.1', chain)), '203.0.113.9');
      assert.equal(config(['10.0.0.0/8'], 5)(message('10.0.0.1', chain)), '203.0.113.9', 'the first untrusted address ends the walk');
      assert.equal(config(['10.0.0.0/8'], 3)(message('198.51.100.1', chain)), '198.51.100.1', 'an untrusted peer is the client, whatever it forwards');
      assert.equal(config(['127.0.0.1'], 1)(message('::ffff:127.0.0.1', '203.0.113.9')), '203.0.113.9', 'an IPv4-mapped peer');
      assert.equal(config(['::1', '10.0.0.0/8'], 2)(message('::1', '203.0.113.9, 10.9.9.9')), '203.0.113.9');
    });

    it('refuses a TRUSTED_PROXIES entry that is neither an address nor a CIDR range, naming the variable', () => {
      assert.deepEqual(loadConfig(baseConfigSchema('graph'), { TRUSTED_PROXIES: ' 10.0.0.0/8, 127.0.0.1 ,::1' }).TRUSTED_PROXIES, [
        '10.0.0.0/8',
        '127.0.0.1',
        '::1',
      ]);
      for (const value of ['ingress', '10.0.0.0/33', '300.1.1.1']) {
        assert.throws(
          () => loadConfig(baseConfigSchema('graph'), { TRUSTED_PROXIES: value }),
          (error: unknown) => error instanceof ConfigError && /TRUSTED_PROXIES: .*neither an IP address nor a CIDR range/.test(error.message),
          value,
        );
      }
    });
  });
});
