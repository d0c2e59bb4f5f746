import {
  ACCESS_TOKEN_CLOCK_TOLERANCE_SECONDS,
  type Authenticator,
  accessClaimsRefusal,
  adminKeyAuth,
  type Principal,
  Problem,
  serviceKeyAuth,
  unauthorized,
} from '@tempora/kit/http';
import type { JWTPayload } from 'jose';
import type { Context, Middleware, Next } from 'koa';
import koaJwt from 'koa-jwt';
import type { AuthCache } from './auth-cache.ts';
import type { KeyStore } from './domain/keys.ts';
import type { Tier } from './domain/limits.ts';
import { API_KEY_PREFIX, sha256 } from './domain/secrets.ts';
import { type AccessClaims, BEARER_CHALLENGE } from './domain/tokens.ts';
import { readsOnly } from './proxy/routing.ts';
import type { ApiKeyRow, GatewayRepository, UserRow } from './repository/index.ts';

/** Security scheme names (the OpenAPI document's, shared with the kit's route authorizer). */
export const BEARER = 'BearerJWT';
export const API_KEY = 'ApiKey';
export const SERVICE = 'ServiceKey';
export const ADMIN = 'AdminKey';
export const API_KEY_CHALLENGE = 'ApiKey header="X-API-Key"';

/** A signed-in end user, by access token or API key. */
export interface UserPrincipal extends Principal {
  kind: 'user';
  userId: string;
  tier: Tier;
  via: 'jwt' | 'api_key';
  user: UserRow;
  /** API keys: the key's id and scopes. */
  apiKeyId?: string;
  scopes?: string[];
  /** Access tokens: for revocation at logout. */
  token?: { jti: string; exp: number };
}

export interface AuthDeps {
  cache: AuthCache;
  keys: KeyStore;
  repository: GatewayRepository;
  issuer: string;
  audience: string;
  serviceKeys: readonly string[];
  adminKey: string | undefined;
}

/** Why jsonwebtoken refused a token, in words a client can act on. */
function explain(error: unknown): string {
  const e = error as { name?: string; message?: string };
  if (e.name === 'TokenExpiredError') return 'the access token has expired; refresh it';
  if (e.message === 'Secret not provided') return 'the access token was not signed by a key this gateway publishes';
  if (e.message === 'invalid algorithm') return 'the access token uses an algorithm other than ES256';
  if (e.name === 'JsonWebTokenError' && /audience|issuer/.test(e.message ?? '')) return `the access token is not for this gateway (${e.message})`;
  return 'the access token is not valid';
}

const bearerRefused = (detail: string) => unauthorized(detail, `${BEARER_CHALLENGE}, error="invalid_token"`);

type TokenUser = { user: UserRow; revoked: boolean };
type KeyUser = { key: ApiKeyRow; user: UserRow };

/** The access token of an Authorization header; throws the refusal a client sees when it is malformed. */
function bearerToken(authorization: string): string {
  const value = authorization.trim();
  // What a shell script sends when it stored a refused sign-in's answer, or nothing, as the token.
  if (/^Bearer\s+\{/i.test(value))
    throw bearerRefused(
      'the Authorization header holds a JSON document where the access token belongs: the sign-in that was to give the token was probably refused (its answer is a problem document, not a token pair)',
    );
  if (/^Bearer$/i.test(value)) throw bearerRefused('the Authorization header holds no access token after "Bearer"');
  if (!/^Bearer\s+\S+$/i.test(value)) throw bearerRefused('Authorization must be "Bearer <access token>"');
  return value.split(/\s+/)[1]!;
}

/**
 * Why a verified token's claims are not those of a token this gateway signs, or undefined: the kit's one
 * rule for every service (a subject that is an account or a service, a UUID jti, an expiry, an issue time
 * not in the future). jsonwebtoken accepts a token without exp and checks no iat, so it is checked here.
 */
export const claimsProblem = (claims: AccessClaims | undefined): string | undefined =>
  claims ? accessClaimsRefusal(claims as unknown as JWTPayload) : 'the access token has no claims';

function checkClaims(claims: AccessClaims | undefined): AccessClaims {
  const problem = claimsProblem(claims);
  if (problem) throw bearerRefused(problem);
  return claims!;
}

const isServiceToken = (claims: AccessClaims) => claims.scope === 'service' && claims.sub.startsWith('service:');

/** The user of a verified access token whose account exists; throws when it was revoked or signed out since. */
function tokenPrincipal(claims: AccessClaims, found: TokenUser): UserPrincipal {
  if (found.revoked) throw bearerRefused('the access token has been revoked (signed out)');
  const validAfter = found.user.tokens_valid_after?.getTime();
  if (validAfter !== undefined && claims.iat * 1000 < validAfter - 999) throw bearerRefused('the access token was issued before a sign-out of every session');
  return {
    kind: 'user',
    id: `user:${found.user.id}`,
    userId: found.user.id,
    tier: found.user.tier,
    via: 'jwt',
    user: found.user,
    token: { jti: claims.jti, exp: claims.exp },
  };
}

const keyPrincipal = (found: KeyUser): UserPrincipal => ({
  kind: 'user',
  id: `apikey:${found.key.id}`,
  userId: found.user.id,
  tier: found.user.tier,
  via: 'api_key',
  user: found.user,
  apiKeyId: found.key.id,
  scopes: found.key.scopes,
});

/** A signed-in user's principal (not a service's, nor the stand-in for an account already deleted). */
const isUser = (principal: Principal | undefined): principal is UserPrincipal => principal?.kind === 'user' && 'userId' in principal;

const acceptableApiKey = (presented: string) => presented.startsWith(API_KEY_PREFIX) && presented.length <= 200;

export interface Authentication {
  /**
   * Resolves every credential a request carries, asynchronously (the kit's own `identify` takes
   * synchronous authenticators; access tokens need koa-jwt and the user's row, API keys a database
   * lookup). It is the app's `identify` middleware. A credential that is
   * present but invalid is remembered in `ctx.state.credentialProblem` and refused by the kit's
   * `refuseInvalidCredentials` after the rate limiter has counted the request, so refused requests still
   * carry rate-limit headers and still count.
   */
  middleware: Middleware;
  /**
   * The user of a request's one credential (a Bearer token or an API key) when everything about it is
   * already known from the last AUTH_CACHE_MS and it is valid; undefined otherwise (the middleware decides).
   */
  cachedUser(authorization: string | undefined, apiKey: string | undefined, connection?: object): UserPrincipal | undefined;
}

/** What the cache already knows of a credential's user, and since when. */
type CachedUser = { value: UserPrincipal; since: number };

/** Access tokens: a verifier and the cache of verified tokens and their users, shared by the middleware and `cachedUser`. */
function bearerCredentials(deps: AuthDeps) {
  const verifyJwt = koaJwt({
    secret: (async (header: { kid?: string }) => deps.keys.publicKey(header.kid)) as never,
    algorithms: ['ES256'],
    issuer: deps.issuer,
    audience: deps.audience,
    passthrough: true,
    key: 'jwt',
    clockTolerance: ACCESS_TOKEN_CLOCK_TOLERANCE_SECONDS,
  } as koaJwt.Options);
  const tokenUserKey = (claims: AccessClaims) => `jwt:${claims.sub}:${claims.jti}`;

  async function bearer(ctx: Context, authorization: string, principals: Map<string, Principal>) {
    const token = bearerToken(authorization);
    // koa-jwt verifies each distinct token; a token seen within the cache period is not re-verified
    // (refusals are never remembered).
    const claims = checkClaims(
      await deps.cache.get(`sig:${token}`, async () => {
        ctx.state.jwt = undefined;
        ctx.state.jwtOriginalError = undefined;
        await verifyJwt(ctx, async () => {});
        if (ctx.state.jwtOriginalError) throw bearerRefused(explain(ctx.state.jwtOriginalError));
        return ctx.state.jwt;
      }),
    );
    if (isServiceToken(claims)) {
      principals.set(SERVICE, { kind: 'service', id: claims.sub });
      return;
    }
    const found = await deps.cache.get(tokenUserKey(claims), () => deps.repository.users.userForToken(claims.sub, claims.jti));
    if (!found) {
      // Deleting an account is idempotent: a still-valid token of a deleted account may delete it again.
      if (ctx.method === 'DELETE' && ctx.path === '/api/v1/auth/me') {
        ctx.state.deletedUserId = claims.sub;
        principals.set(BEARER, { kind: 'user', id: `deleted:${claims.sub}` });
        return;
      }
      throw bearerRefused('the account of this access token no longer exists');
    }
    principals.set(BEARER, tokenPrincipal(claims, found));
  }

  /** The user of a Bearer header from the cache's fresh entries; undefined for anything the middleware must decide. */
  function cachedTokenUser(authorization: string): CachedUser | undefined {
    const claims = deps.cache.peek<AccessClaims | undefined>(`sig:${bearerToken(authorization)}`);
    if (!claims) return undefined;
    const checked = checkClaims(claims.value);
    if (isServiceToken(checked)) return undefined;
    const found = deps.cache.peek<TokenUser | undefined>(tokenUserKey(checked));
    return found?.value ? { value: tokenPrincipal(checked, found.value), since: Math.min(claims.at, found.at) } : undefined;
  }

  return { bearer, cachedTokenUser };
}

/** API keys: their lookup by hash through the cache, and the key's last use, shared by the middleware and `cachedUser`. */
function apiKeyCredentials(deps: AuthDeps) {
  // last_used_at is written at most once a minute per key: remembered here so a busy key costs no write.
  const touched = new Map<string, number>();
  const touch = (id: string) => {
    const now = Date.now();
    if ((touched.get(id) ?? 0) > now - 60_000) return;
    touched.set(id, now);
    if (touched.size > 10_000) touched.clear();
    void deps.repository.apiKeys.touchApiKey(id).catch(() => undefined);
  };

  async function apiKeyPrincipal(presented: string, principals: Map<string, Principal>) {
    const refused = () => unauthorized('the X-API-Key header does not hold a valid API key', API_KEY_CHALLENGE);
    if (!acceptableApiKey(presented)) throw refused();
    const hash = sha256(presented);
    const found = await deps.cache.get(`key:${hash}`, () => deps.repository.apiKeys.apiKeyByHash(hash));
    if (!found) throw refused();
    touch(found.key.id);
    principals.set(API_KEY, keyPrincipal(found));
  }

  function cachedKeyUser(apiKey: string): CachedUser | undefined {
    if (!acceptableApiKey(apiKey)) return undefined;
    const found = deps.cache.peek<KeyUser | undefined>(`key:${sha256(apiKey)}`);
    return found?.value ? { value: keyPrincipal(found.value), since: found.at } : undefined;
  }

  return { apiKeyPrincipal, cachedKeyUser, touch };
}

export function authenticate(deps: AuthDeps): Authentication {
  const keyed: Authenticator[] = [serviceKeyAuth(deps.serviceKeys), adminKeyAuth(deps.adminKey)];
  const { bearer, cachedTokenUser } = bearerCredentials(deps);
  const { apiKeyPrincipal, cachedKeyUser, touch } = apiKeyCredentials(deps);

  function cachedUser(authorization: string | undefined, apiKey: string | undefined, connection?: object): UserPrincipal | undefined {
    try {
      if (authorization && !apiKey) return deps.cache.derived('bearer', authorization, cachedTokenUser, connection);
      if (apiKey && !authorization) {
        const user = deps.cache.derived('api-key', apiKey, cachedKeyUser, connection);
        if (user) touch(user.apiKeyId!);
        return user;
      }
    } catch {
      // A refusal is the middleware's to explain.
    }
    return undefined;
  }

  const middleware: Middleware = async function authenticateRequest(ctx: Context, next: Next) {
    // Already identified for its rate-limit report (rate-limiting.ts), as an answer never refused.
    if (ctx.state.principals) return next();
    const principals = new Map<string, Principal>();
    ctx.state.principals = principals;
    try {
      for (const authenticator of keyed) {
        const principal = authenticator.authenticate(ctx);
        if (principal) principals.set(authenticator.scheme, principal);
      }
      const authorization = ctx.get('Authorization');
      // A refresh authenticates by its refresh token: the expired access token clients often still send is ignored.
      if (authorization && ctx.path !== '/api/v1/auth/refresh') await bearer(ctx, authorization, principals);
      const apiKey = ctx.get('X-API-Key');
      if (apiKey) await apiKeyPrincipal(apiKey, principals);
    } catch (error) {
      if (!(error instanceof Problem)) throw error;
      ctx.state.credentialProblem = error;
      principals.clear();
    }
    ctx.state.principal = principals.get(BEARER) ?? principals.get(API_KEY) ?? principals.values().next().value;
    const credential = principals.get(BEARER) ?? principals.get(API_KEY);
    ctx.state.user = isUser(credential) ? credential : undefined;
    await next();
  };

  return { middleware, cachedUser };
}

/** API-key scopes: `read` admits GET and HEAD (and the graph's MCP server, see `readsOnly`), `write` every other request. */
export const API_KEY_SCOPES = ['read', 'write'] as const;

/** Why `user` may not make a `method` request of `path`: an API key without the scope it needs; undefined when it may. */
export function missingScope(user: UserPrincipal | undefined, method: string, path: string): string | undefined {
  if (user?.via !== 'api_key') return undefined;
  const needed = readsOnly(method, path) ? 'read' : 'write';
  return user.scopes?.includes(needed) ? undefined : `this API key lacks the "${needed}" scope that ${method} requests need`;
}

/** 403 when an API key lacks the scope the method needs. */
export function requireScope(ctx: Context): void {
  const missing = missingScope(ctx.state.user, ctx.method, ctx.path);
  if (missing) throw new Problem(403, missing);
}
