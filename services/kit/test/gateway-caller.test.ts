import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import Koa from 'koa';
import { listenStandIn, request, type StandIn } from '../../../test/support/http.ts';
import type { Authenticator } from '../src/http/auth.ts';
import { problemMiddleware, unauthorized } from '../src/http/errors.ts';
import {
  type GatewayCallerConfig,
  gatewayCaller,
  gatewayCallerOptions,
  gatewayIntrospector,
  isServiceItself,
  requireUser,
} from '../src/http/gateway-caller.ts';
import { requestId } from '../src/http/request-id.ts';
import { refuseInvalidCredentials } from '../src/http/routes.ts';
import { createLogger } from '../src/observability/logger.ts';

const SERVICE_KEY = 'svc-key-0123456789abcdef';
const GATEWAY_KEY = 'gateway-key-0123456789ab';
const OWN_KEY = 'own-key-0123456789abcdef';

/** The service's own credential (the simulation API key's shape): `X-API-Key`. */
const ownKey: Authenticator = {
  scheme: 'ApiKey',
  challenge: 'ApiKey header="X-API-Key"',
  authenticate(ctx) {
    const presented = ctx.get('X-API-Key');
    if (!presented) return undefined;
    if (presented !== OWN_KEY) throw unauthorized('not a key of ours', 'ApiKey header="X-API-Key"');
    return { kind: 'user', id: 'apikey:tester' };
  },
};

/** A service's app as createApp builds it around identification: identify, (rate limits), refuse, route. */
async function serviceApp(config: GatewayCallerConfig, passedIdentification: { count: number }): Promise<{ url: string; close(): Promise<void> }> {
  const app = new Koa();
  const { identify } = gatewayCaller({ ...gatewayCallerOptions(config), apiKey: ownKey });
  app.use(requestId);
  app.use(problemMiddleware(createLogger('test', 'silent')));
  app.use(identify);
  // Where the rate limiter sits: every request reaches it, refused credentials included.
  app.use(async (_ctx, next) => {
    passedIdentification.count += 1;
    await next();
  });
  app.use(refuseInvalidCredentials);
  app.use((ctx) => {
    if (ctx.path === '/user') {
      const user = requireUser(ctx);
      ctx.body = { userId: user.userId, tier: user.tier };
      return;
    }
    ctx.body = { caller: ctx.state.caller ?? null, schemes: [...(ctx.state.principals?.keys() ?? [])], itself: isServiceItself(ctx) };
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('kit gatewayCaller: who is calling a service behind the gateway', () => {
  const kid = 'gateway-key';
  let gateway: StandIn;
  let sign: (claims: JWTPayload) => Promise<string>;
  let otherSign: (claims: JWTPayload) => Promise<string>;
  /** How the gateway's introspection answers: normally, or failing in one way. */
  let mode: 'normal' | 'error' | 'garbage' | 'slow' = 'normal';
  const introspected: string[] = [];
  const revoked = new Set<string>();
  const tiers = new Map<string, string>();
  const keysSeen: string[] = [];
  let service: { url: string; close(): Promise<void> };
  const passed = { count: 0 };
  const now = () => Math.floor(Date.now() / 1000);
  const alice = randomUUID();
  const bob = randomUUID();
  const claims = (changes: Record<string, unknown> = {}): JWTPayload => {
    const base: Record<string, unknown> = {
      iss: 'tempora-gateway',
      aud: 'tempora',
      sub: alice,
      jti: randomUUID(),
      iat: now(),
      exp: now() + 600,
      tier: 'free',
      ...changes,
    };
    return Object.fromEntries(Object.entries(base).filter(([, value]) => value !== undefined));
  };
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  const keyed = { 'X-Service-Key': SERVICE_KEY };
  let config: GatewayCallerConfig;

  before(async () => {
    const pair = await generateKeyPair('ES256');
    const other = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(pair.publicKey)), kid, alg: 'ES256', use: 'sig' };
    sign = (payload) => new SignJWT(payload).setProtectedHeader({ alg: 'ES256', kid }).sign(pair.privateKey);
    otherSign = (payload) => new SignJWT(payload).setProtectedHeader({ alg: 'ES256', kid }).sign(other.privateKey);
    // The gateway: its key set, and RFC 7662 introspection behind its service key.
    gateway = await listenStandIn((req, res) => {
      if (req.url === '/.well-known/jwks.json') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ keys: [jwk] }));
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', () => {
        keysSeen.push(String(req.headers['x-service-key']));
        if (req.headers['x-service-key'] !== GATEWAY_KEY) return void res.writeHead(401).end();
        const { token } = JSON.parse(Buffer.concat(chunks).toString()) as { token: string };
        introspected.push(token);
        if (mode === 'error') return void res.writeHead(500).end('down');
        if (mode === 'garbage') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>');
        const jti = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).jti as string;
        const answer = JSON.stringify(revoked.has(jti) ? { active: false } : { active: true, ...(tiers.has(jti) ? { tier: tiers.get(jti) } : {}) });
        setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(answer), mode === 'slow' ? 200 : 0);
      });
    });
    config = {
      GATEWAY_URL: gateway.url,
      SERVICE_KEY: [SERVICE_KEY],
      GATEWAY_SERVICE_KEY: GATEWAY_KEY,
      JWT_ISSUER: 'tempora-gateway',
      JWT_AUDIENCE: 'tempora',
      INTROSPECTION_CACHE_MS: 60_000,
      INTROSPECTION_TIMEOUT_MS: 1_000,
    };
    service = await serviceApp(config, passed);
  });
  beforeEach(() => {
    mode = 'normal';
    introspected.length = 0;
  });
  after(async () => {
    await service?.close();
    await gateway?.stop();
  });

  const call = (headers: Record<string, string>, path = '/') => request(service.url, path, { headers });

  it('knows nobody without a credential: 401 where a user is needed', async () => {
    assert.deepEqual((await call({})).body, { caller: null, schemes: [], itself: false });
    const refused = await call({}, '/user');
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /Bearer/);
  });

  it('takes the service key alone as a service acting as itself, never a user (403 where one is needed)', async () => {
    const reply = await call(keyed);
    assert.equal(reply.body.caller.via, 'service');
    assert.match(reply.body.caller.principal, /^service:/);
    assert.equal(reply.body.caller.userId, undefined);
    assert.deepEqual(reply.body.schemes, ['ServiceKey']);
    assert.equal(reply.body.itself, true);
    assert.equal((await call(keyed, '/user')).status, 403);
  });

  it("believes X-User-ID beside the service key: the gateway's user, with X-User-Tier (free unless a known tier)", async () => {
    const reply = await call({ ...keyed, 'X-User-ID': alice.toUpperCase(), 'X-User-Tier': 'pro' });
    assert.equal(reply.status, 200);
    assert.deepEqual({ ...reply.body.caller, principal: undefined }, { userId: alice, tier: 'pro', via: 'gateway', principal: undefined });
    assert.deepEqual(reply.body.schemes, ['ServiceKey', 'UserId']);
    assert.equal(reply.body.itself, false);
    assert.equal((await call({ ...keyed, 'X-User-ID': alice, 'X-User-Tier': 'platinum' })).body.caller.tier, 'free');
    assert.deepEqual((await call({ ...keyed, 'X-User-ID': alice }, '/user')).body, { userId: alice, tier: 'free' });
  });

  it('refuses X-User-ID without a service credential (401), whatever else comes with it, after the rate limiter', async () => {
    const userToken = await sign(claims());
    const cases: Array<Record<string, string>> = [
      { 'X-User-ID': alice },
      { 'X-User-ID': alice, ...bearer(userToken) },
      { 'X-User-ID': alice, 'X-API-Key': OWN_KEY },
      { 'X-User-ID': alice, 'X-Service-Key': 'not-the-key-0123456789' },
    ];
    for (const headers of cases) {
      const before = passed.count;
      const reply = await call(headers);
      assert.equal(reply.status, 401, JSON.stringify(headers));
      assert.ok(reply.headers.get('www-authenticate'));
      assert.equal(passed.count, before + 1, 'the refusal comes after the rate limiter');
    }
    assert.match((await call({ 'X-User-ID': alice })).body.detail, /only with X-Service-Key or a service token/);
  });

  it('refuses an X-User-ID that is not a user id (a UUID), even beside the key: 401', async () => {
    for (const value of ['admin', 'user-7', 'someone', `${alice}x`, 'apikey:tester', 'service:conductor', 'bad id with spaces']) {
      const reply = await call({ ...keyed, 'X-User-ID': value });
      assert.equal(reply.status, 401, value);
      assert.match(reply.body.detail, /UUID/);
    }
  });

  it("takes a user's access token as that user, with the tier the gateway says now; introspected with this service's gateway key", async () => {
    const payload = claims({ tier: 'free' });
    tiers.set(payload.jti!, 'enterprise');
    const reply = await call(bearer(await sign(payload)));
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.deepEqual(reply.body.caller, { userId: alice, tier: 'enterprise', via: 'token', principal: alice });
    assert.deepEqual(reply.body.schemes, ['BearerJWT', 'UserId']);
    assert.equal(keysSeen.at(-1), GATEWAY_KEY);
  });

  it("refuses a signed-out token (401), and tokens not the gateway's (expired, another key, not Bearer)", async () => {
    const payload = claims();
    revoked.add(payload.jti!);
    const signedOut = await call(bearer(await sign(payload)));
    assert.equal(signedOut.status, 401);
    assert.match(signedOut.body.detail, /no longer active/);
    assert.match(signedOut.headers.get('www-authenticate') ?? '', /invalid_token/);
    for (const headers of [
      bearer(await sign(claims({ iat: now() - 4000, exp: now() - 3000 }))),
      bearer(await otherSign(claims())),
      { Authorization: 'Basic YWxpY2U6c2VjcmV0' },
      bearer('not.a.jwt'),
    ]) {
      const reply = await call(headers);
      assert.equal(reply.status, 401, JSON.stringify(headers));
      assert.match(reply.headers.get('www-authenticate') ?? '', /^Bearer realm="tempora", error="invalid_token"$/);
    }
    assert.equal(introspected.length, 1, 'only a verified token is introspected');
  });

  it('takes a service token as a service, which may name a user in X-User-ID', async () => {
    const token = await sign(claims({ sub: 'service:conductor', scope: 'service', tier: undefined }));
    const itself = await call(bearer(token));
    assert.deepEqual(itself.body.caller, { via: 'service', principal: 'service:conductor' });
    assert.deepEqual(itself.body.schemes, ['ServiceKey']);
    const forUser = await call({ ...bearer(token), 'X-User-ID': bob });
    assert.deepEqual(forUser.body.caller, { userId: bob, tier: 'free', via: 'gateway', principal: 'service:conductor' });
  });

  it("refuses a request naming two users (a user's token and another X-User-ID beside the key); the same user is that user", async () => {
    const token = await sign(claims());
    assert.equal((await call({ ...keyed, ...bearer(token), 'X-User-ID': bob })).status, 401);
    const same = await call({ ...keyed, ...bearer(token), 'X-User-ID': alice });
    assert.equal(same.body.caller.via, 'token');
    assert.equal(same.body.caller.userId, alice);
  });

  it("takes the service's own credential as its holder, and refuses a wrong one", async () => {
    const reply = await call({ 'X-API-Key': OWN_KEY });
    assert.deepEqual(reply.body.caller, { via: 'api_key', principal: 'apikey:tester' });
    assert.equal((await call({ 'X-API-Key': OWN_KEY }, '/user')).status, 403);
    assert.equal((await call({ 'X-API-Key': 'wrong' })).status, 401);
    assert.equal((await call({ 'X-API-Key': OWN_KEY, ...keyed })).body.caller.via, 'service', 'beside the service key, the service');
  });

  it('answers 503 with Retry-After when the gateway cannot say whether a token is active, and does not keep the failure', async () => {
    const token = await sign(claims());
    for (const failing of ['error', 'garbage'] as const) {
      mode = failing;
      const reply = await call(bearer(token));
      assert.equal(reply.status, 503, failing);
      assert.equal(reply.headers.get('retry-after'), '5');
      assert.match(reply.body.detail, /try again/);
    }
    mode = 'normal';
    assert.equal((await call(bearer(token))).status, 200, 'the failures were not kept');
    // A gateway that cannot be reached, and one that refuses this service's key.
    for (const broken of [{ GATEWAY_URL: 'http://127.0.0.1:9' }, { GATEWAY_SERVICE_KEY: 'not-the-gateway-key-0123' }]) {
      const cut = await serviceApp({ ...config, ...broken, JWKS_URL: `${gateway.url}/.well-known/jwks.json` }, { count: 0 });
      try {
        const reply = await request(cut.url, '/', { headers: bearer(await sign(claims())) });
        assert.equal(reply.status, 503, JSON.stringify(broken));
        assert.equal(reply.headers.get('retry-after'), '5');
      } finally {
        await cut.close();
      }
    }
  });

  it('answers 503 when the key set cannot be fetched to verify a token', async () => {
    const cut = await serviceApp({ ...config, JWKS_URL: 'http://127.0.0.1:9/.well-known/jwks.json' }, { count: 0 });
    try {
      const reply = await request(cut.url, '/', { headers: bearer(await sign(claims())) });
      assert.equal(reply.status, 503);
      assert.equal(reply.headers.get('retry-after'), '5');
    } finally {
      await cut.close();
    }
  });

  it('asks the gateway once per token while the answer is kept, concurrent checks sharing one call', async () => {
    const token = await sign(claims());
    mode = 'slow';
    const replies = await Promise.all(Array.from({ length: 5 }, () => call(bearer(token))));
    assert.deepEqual(
      replies.map((reply) => reply.status),
      [200, 200, 200, 200, 200],
    );
    assert.equal((await call(bearer(token))).status, 200);
    assert.equal(introspected.length, 1);
    assert.equal((await call(bearer(await sign(claims())))).status, 200);
    assert.equal(introspected.length, 2, 'another token is asked about');
  });

  it("keeps an answer no longer than INTROSPECTION_CACHE_MS, nor past the token's expiry", async () => {
    const token = await sign(claims());
    const uncached = gatewayIntrospector(gateway.url, GATEWAY_KEY, { cacheMs: 0, timeoutMs: 1_000 });
    const jti = randomUUID();
    await uncached(token, { jti, exp: now() + 600 }, 'r1');
    await uncached(token, { jti, exp: now() + 600 }, 'r2');
    assert.equal(introspected.length, 2, 'cacheMs 0: every check asks');
    // The introspector's own clock: the token's last second passes between r4 and r5, however slow the machine.
    let clock = Date.now();
    const kept = gatewayIntrospector(gateway.url, GATEWAY_KEY, { cacheMs: 60_000, timeoutMs: 1_000, now: () => clock });
    const expiring = { jti: randomUUID(), exp: Math.floor(clock / 1000) + 1 };
    await kept(token, expiring, 'r3');
    await kept(token, expiring, 'r4');
    assert.equal(introspected.length, 3, 'kept while the token lives');
    clock += 2_000;
    await kept(token, expiring, 'r5');
    assert.equal(introspected.length, 4, 'not kept past its expiry');
  });
});
