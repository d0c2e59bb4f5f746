import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import Koa from 'koa';
import { listenStandIn, type StandIn } from '../../../test/support/http.ts';
import { problemMiddleware } from '../src/http/errors.ts';
import { AccessTokenError, type AccessTokenVerifier, accessClaimsRefusal, accessTokenMiddleware, createAccessTokenVerifier } from '../src/http/jwt.ts';
import { createLogger } from '../src/observability/logger.ts';

describe('kit access tokens: only claims the gateway issues', () => {
  const kid = 'test-key';
  let jwks: StandIn;
  let sign: (claims: JWTPayload) => Promise<string>;
  let verify: AccessTokenVerifier;
  const now = () => Math.floor(Date.now() / 1000);
  const user = randomUUID();
  /** A user token as the gateway signs one, with `changes` applied (undefined removes a claim). */
  const claims = (changes: Record<string, unknown> = {}): JWTPayload => {
    const base: Record<string, unknown> = {
      iss: 'tempora-gateway',
      aud: 'tempora',
      sub: user,
      jti: randomUUID(),
      iat: now(),
      exp: now() + 600,
      tier: 'free',
      ...changes,
    };
    return Object.fromEntries(Object.entries(base).filter(([, value]) => value !== undefined));
  };

  before(async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
    jwks = await listenStandIn((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    sign = (payload) => new SignJWT(payload).setProtectedHeader({ alg: 'ES256', kid }).sign(privateKey);
    verify = createAccessTokenVerifier({ jwksUrl: `${jwks.url}/.well-known/jwks.json` });
  });
  after(() => jwks.stop());

  it('accepts user tokens (a UUID sub) and service tokens (service:<name> with scope service), iat within the clock tolerance', async () => {
    assert.equal((await verify(await sign(claims()))).sub, user);
    assert.equal((await verify(await sign(claims({ sub: 'service:conductor', scope: 'service', tier: undefined })))).scope, 'service');
    assert.equal((await verify(await sign(claims({ iat: now() + 3 })))).sub, user, 'a clock a few seconds ahead');
  });

  it('refuses a correctly signed token whose sub names neither a user nor a service, without exp, or issued in the future', async () => {
    const refused: Array<[string, JWTPayload, RegExp]> = [
      ['a sub that is no UUID', claims({ sub: 'alice' }), /sub claim names neither a user \(a UUID\) nor a service/],
      ['an empty sub', claims({ sub: '' }), /sub claim/],
      ['a service sub without scope service', claims({ sub: 'service:conductor' }), /sub claim names neither/],
      ['scope service on a user id', claims({ scope: 'service' }), /service token's sub claim is not service:<name>/],
      ['a malformed service name', claims({ sub: 'service:Not A Name', scope: 'service' }), /service token's sub claim/],
      ['no exp', claims({ exp: undefined }), /exp/],
      ['an iat a minute ahead', claims({ iat: now() + 60 }), /iat claim is in the future/],
      ['a jti that is no UUID', claims({ jti: 'x\u0000' }), /jti claim is not a UUID/],
    ];
    for (const [name, payload, reason] of refused) {
      await assert.rejects(verify(await sign(payload)), (error: unknown) => error instanceof AccessTokenError && reason.test(error.message), name);
    }
  });

  it('states the rule once, for the gateway too: accessClaimsRefusal', () => {
    assert.equal(accessClaimsRefusal(claims()), undefined);
    assert.match(accessClaimsRefusal(claims({ sub: 'not-a-uuid' }))!, /sub claim/);
    assert.match(accessClaimsRefusal(claims({ iat: 1_000 }), { nowSeconds: 990, clockToleranceSeconds: 5 })!, /future/);
    assert.equal(accessClaimsRefusal(claims({ iat: 1_000 }), { nowSeconds: 996, clockToleranceSeconds: 5 }), undefined);
  });

  it('answers such a token with a 401 and a WWW-Authenticate challenge, never a 5xx, behind accessTokenMiddleware', async () => {
    const app = new Koa();
    app.use(problemMiddleware(createLogger('t', 'silent')));
    app.use(accessTokenMiddleware(verify));
    app.use((ctx) => {
      ctx.body = { sub: ctx.state.accessToken?.sub };
    });
    const server: Server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const call = async (token: string) => fetch(base, { headers: { Authorization: `Bearer ${token}` } });
      assert.equal((await call(await sign(claims()))).status, 200);
      for (const payload of [claims({ sub: 'not-a-uuid' }), claims({ exp: undefined }), claims({ iat: now() + 3600, exp: now() + 7200 })]) {
        const reply = await call(await sign(payload));
        assert.equal(reply.status, 401, JSON.stringify(payload));
        assert.match(reply.headers.get('www-authenticate') ?? '', /^Bearer realm="tempora", error="invalid_token"$/);
        assert.match(reply.headers.get('content-type') ?? '', /problem\+json/);
      }
    } finally {
      server.close();
    }
  });
});
