import { createRemoteJWKSet, type JWTPayload, errors as joseErrors, jwtVerify } from 'jose';
import type { Context, Next } from 'koa';
import { unauthorized } from './errors.ts';

/**
 * Verification of the gateway's ES256 access tokens for the other services (conductor, simulation):
 * signature against the gateway's published JWK Set (fetched once, refreshed on an unknown key id),
 * issuer, audience, expiry, and the claims' shapes (`accessClaimsRefusal`). Only ES256 is accepted, so
 * `alg: none` and HS256 forgeries are refused.
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

/** The seconds by which clocks may disagree when `exp` and `iat` are judged. */
export const ACCESS_TOKEN_CLOCK_TOLERANCE_SECONDS = 5;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The gateway's service-token subjects (its service-token route takes the same names). */
const SERVICE_SUBJECT = /^service:[a-z][a-z0-9-]{1,62}$/;

/**
 * Why claims whose signature verified are still not an access token as the gateway issues them, or
 * undefined when they are: an expiry, an issue time not in the future, a `jti` (a UUID), and a `sub` that
 * is a user's id (a UUID) or, with `scope: service`, `service:<name>`. Every reader of the claims (the
 * gateway's lookups by user id, introspection, the services' callers) relies on those shapes, so a token
 * signed with them wrong is a 401 here rather than a 500 wherever the first reader trips on it.
 */
export function accessClaimsRefusal(claims: JWTPayload, options: { nowSeconds?: number; clockToleranceSeconds?: number } = {}): string | undefined {
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  const tolerance = options.clockToleranceSeconds ?? ACCESS_TOKEN_CLOCK_TOLERANCE_SECONDS;
  if (typeof claims.exp !== 'number') return 'the access token has no exp claim; tokens that never expire are not accepted';
  if (typeof claims.iat !== 'number') return 'the access token has no iat claim';
  if (claims.iat > now + tolerance) return "the access token's iat claim is in the future";
  if (typeof claims.jti !== 'string' || !UUID.test(claims.jti)) return "the access token's jti claim is not a UUID";
  const { sub } = claims;
  const service = claims.scope === 'service';
  if (typeof sub !== 'string' || !(service ? SERVICE_SUBJECT.test(sub) : UUID.test(sub))) {
    return service
      ? "the service token's sub claim is not service:<name>"
      : "the access token's sub claim names neither a user (a UUID) nor a service (service:<name>, with scope service)";
  }
  return undefined;
}

export class AccessTokenError extends Error {
  override name = 'AccessTokenError';
}

export function createAccessTokenVerifier(options: AccessTokenVerifierOptions): AccessTokenVerifier {
  const jwks = createRemoteJWKSet(new URL(options.jwksUrl), { cooldownDuration: 30_000, cacheMaxAge: 600_000, timeoutDuration: 5_000 });
  const tolerance = options.clockToleranceSeconds ?? ACCESS_TOKEN_CLOCK_TOLERANCE_SECONDS;
  return async (token) => {
    let claims: JWTPayload;
    try {
      const { payload } = await jwtVerify(token, jwks, {
        algorithms: ['ES256'],
        issuer: options.issuer ?? 'tempora-gateway',
        audience: options.audience ?? 'tempora',
        requiredClaims: ['sub', 'exp', 'iat', 'jti'],
        clockTolerance: tolerance,
      });
      claims = payload;
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw new AccessTokenError('the access token has expired');
      if (error instanceof joseErrors.JOSEAlgNotAllowed) throw new AccessTokenError('the access token uses an algorithm other than ES256');
      if (error instanceof joseErrors.JWTClaimValidationFailed) throw new AccessTokenError(`the access token's ${error.claim} claim is not valid`);
      if (error instanceof joseErrors.JWKSTimeout || error instanceof TypeError) throw new AccessTokenError('the gateway key set could not be fetched');
      throw new AccessTokenError('the access token is not valid');
    }
    const refusal = accessClaimsRefusal(claims, { clockToleranceSeconds: tolerance });
    if (refusal) throw new AccessTokenError(refusal);
    return claims as AccessTokenClaims;
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
