import type { Context, Next } from 'koa';
import { createRemoteJWKSet, jwtVerify, errors as joseErrors, type JWTPayload } from 'jose';
import { unauthorized } from './errors.ts';

/**
 * Verification of the gateway's ES256 access tokens for the other services (conductor, simulation):
 * signature against the gateway's published JWK Set (fetched once, refreshed on an unknown key id),
 * issuer, audience and expiry. Only ES256 is accepted, so `alg: none` and HS256 forgeries are refused.
 */
export interface AccessTokenClaims extends JWTPayload {
  sub: string;
  jti: string;
  exp: number;
  iat: number;
  /** User tokens: the account's tier. */
  tier?: 'free' | 'pro' | 'enterprise';
  /** Service tokens (`sub` = `service:<name>`): `service`. */
  scope?: string;
}

export interface AccessTokenVerifierOptions {
  /** e.g. `${GATEWAY_URL}/.well-known/jwks.json` */
  jwksUrl: string;
  issuer?: string;
  audience?: string;
  clockToleranceSeconds?: number;
}

export type AccessTokenVerifier = (token: string) => Promise<AccessTokenClaims>;

export class AccessTokenError extends Error {
  override name = 'AccessTokenError';
}

export function createAccessTokenVerifier(options: AccessTokenVerifierOptions): AccessTokenVerifier {
  const jwks = createRemoteJWKSet(new URL(options.jwksUrl), { cooldownDuration: 30_000, cacheMaxAge: 600_000, timeoutDuration: 5_000 });
  return async (token) => {
    try {
      const { payload } = await jwtVerify(token, jwks, {
        algorithms: ['ES256'],
        issuer: options.issuer ?? 'tempora-gateway',
        audience: options.audience ?? 'tempora',
        requiredClaims: ['sub', 'exp', 'iat', 'jti'],
        clockTolerance: options.clockToleranceSeconds ?? 5,
      });
      return payload as AccessTokenClaims;
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw new AccessTokenError('the access token has expired');
      if (error instanceof joseErrors.JOSEAlgNotAllowed) throw new AccessTokenError('the access token uses an algorithm other than ES256');
      if (error instanceof joseErrors.JWTClaimValidationFailed) throw new AccessTokenError(`the access token's ${error.claim} claim is not valid`);
      if (error instanceof joseErrors.JWKSTimeout || error instanceof TypeError) throw new AccessTokenError('the gateway key set could not be fetched');
      throw new AccessTokenError('the access token is not valid');
    }
  };
}

/**
 * Koa middleware: a present Bearer token must verify (401 otherwise); its claims land in
 * `ctx.state.accessToken`. The kit's `Authenticator` is synchronous, so services put this before
 * their routes and read the claims from an authenticator or a handler.
 */
export function accessTokenMiddleware(verify: AccessTokenVerifier, realm = 'tempora') {
  const challenge = `Bearer realm="${realm}"`;
  return async (ctx: Context, next: Next): Promise<void> => {
    const header = ctx.get('Authorization');
    if (header) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match?.[1]) throw unauthorized('Authorization must be "Bearer <access token>"', challenge);
      try {
        ctx.state.accessToken = await verify(match[1]);
      } catch (error) {
        throw unauthorized(error instanceof AccessTokenError ? error.message : 'the access token is not valid', `${challenge}, error="invalid_token"`);
      }
    }
    await next();
  };
}
