import type { Context, Middleware } from 'koa';
import { z } from 'zod';
import { optionalString } from '../runtime/config.ts';
import { type Authenticator, type Principal, serviceKeyAuth } from './auth.ts';
import { OUTAGE_RETRY_AFTER_SECONDS, Problem, unauthorized } from './errors.ts';
import { type AccessTokenClaims, AccessTokenError, type AccessTokenVerifier, createAccessTokenVerifier } from './jwt.ts';
import { ServiceClient } from './service-client.ts';

/** RFC 7662's answer as the gateway gives it; a tier this service does not know is left out, not refused. */
const IntrospectionAnswer = z.object({ active: z.boolean(), tier: z.unknown().optional() });

/**
 * Who is calling a service behind the gateway (conductor, simulation, generation), decided once for all of
 * them by the rules of docs/reliability.md, "Who gets in":
 *
 * - `X-User-ID` names a user only beside a valid `X-Service-Key` or a service token (the gateway's proxy,
 *   the conductor); alone, or not a UUID (the gateway's user ids), it is refused 401.
 * - A user's access token (`Authorization: Bearer`) is verified against the gateway's JWKS, then
 *   introspected at the gateway, so a signed-out token or a deleted account stops working at once. When
 *   the gateway cannot answer either, the request is refused 503 with Retry-After: a token must not pass
 *   because its check was unavailable.
 * - A service token (`scope: service`, `sub: service:<name>`) is a service, like the service key.
 * - A service may accept one credential of its own (the simulation API key), passed in as an Authenticator.
 *
 * A present but refused credential is kept in `ctx.state.credentialProblem` and answered after rate
 * limiting (the kit's `refuseInvalidCredentials`), as the kit's `identify` does.
 */

/** The security scheme names routes declare (the OpenAPI document's and the kit's route authorizer's). */
export const CALLER_SCHEMES = {
  /** X-Service-Key, or a service token. */
  service: 'ServiceKey',
  /** A user's own access token. */
  bearer: 'BearerJWT',
  /** A credential of the service's own (the simulation API key). */
  apiKey: 'ApiKey',
  /** A user is named: X-User-ID beside a service credential, or a user's own access token. */
  user: 'UserId',
} as const;

export const BEARER_CHALLENGE = 'Bearer realm="tempora"';
const INVALID_TOKEN_CHALLENGE = `${BEARER_CHALLENGE}, error="invalid_token"`;

export type Tier = 'free' | 'pro' | 'enterprise';
const TIERS: ReadonlySet<string> = new Set<Tier>(['free', 'pro', 'enterprise']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Who a request comes from, once its credentials are accepted. */
export interface Caller {
  /** The user it acts for (a UUID, lower-case): absent for a service acting as itself or an API-key holder. */
  userId?: string;
  /** The user's tier: introspected for a token, X-User-Tier from a service (else free). */
  tier?: Tier;
  /**
   * `gateway`: a service (the gateway's proxy, the conductor) naming the user in X-User-ID; `token`: the user's
   * own access token; `api_key`: the service's own credential; `service`: a service acting as itself.
   */
  via: 'gateway' | 'token' | 'api_key' | 'service';
  /** Who presented the credential: `service:…`, the user's id, or the API key's principal (`apikey:<name>`). */
  principal: string;
}

/** A caller that acts for a user. */
export type UserCaller = Caller & { userId: string; tier: Tier };

declare module './request-state.ts' {
  interface RequestState {
    /** Who the request comes from (`gatewayCaller`), once its credentials are accepted. */
    caller?: Caller;
  }
}

export interface TokenState {
  active: boolean;
  /** The account's tier now (user tokens). */
  tier?: Tier;
}

/** Whether a token whose signature verified is still active; throws a 503 problem when that cannot be known. */
export type TokenIntrospector = (token: string, claims: Pick<AccessTokenClaims, 'jti' | 'exp'>, requestId: string) => Promise<TokenState>;

/**
 * Answers kept for a while by key: concurrent askers share one call, and a failed call is not kept, so
 * the next asker tries again.
 */
export class Reuse<T> {
  private readonly entries = new Map<string, { until: number; value: Promise<T> }>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(maxEntries = 50_000, now: () => number = Date.now) {
    this.maxEntries = maxEntries;
    this.now = now;
  }

  /** The kept answer for `key`, or `load()`'s, kept until `until` (epoch ms). */
  get(key: string, until: number, load: () => Promise<T>): Promise<T> {
    const now = this.now();
    const kept = this.entries.get(key);
    if (kept && kept.until > now) return kept.value;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const entry = { until, value: load() };
    this.entries.set(key, entry);
    entry.value.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    return entry.value;
  }
}

const gatewayUnavailable = (detail: string) =>
  new Problem(503, `${detail}; try again in ${OUTAGE_RETRY_AFTER_SECONDS} s`, { headers: { 'Retry-After': String(OUTAGE_RETRY_AFTER_SECONDS) } });

export interface IntrospectionOptions {
  /** How long an answer is reused (never past the token's expiry): a revoked token works here at most this long after. */
  cacheMs: number;
  timeoutMs: number;
  /** The clock answers are kept by (a test's own, to pass a token's expiry without waiting for it). */
  now?: () => number;
}

/**
 * RFC 7662 token introspection at the gateway (`POST /api/v1/auth/introspect`, the token in a JSON body,
 * which the gateway takes beside the RFC's form encoding, with this service's X-Service-Key). Answers are
 * kept by token id (`jti`, from a token whose signature already verified) for `cacheMs`, never past the
 * token's expiry; concurrent checks of one token share a call; failures are not kept.
 */
export function gatewayIntrospector(gatewayUrl: string, serviceKey: string | undefined, options: IntrospectionOptions): TokenIntrospector {
  const client = new ServiceClient(gatewayUrl, serviceKey, options.timeoutMs, 'the gateway');
  const now = options.now ?? Date.now;
  const answers = new Reuse<TokenState>(undefined, now);
  const ask = async (token: string, requestId: string): Promise<TokenState> => {
    let reply;
    try {
      reply = await client.call('POST', '/api/v1/auth/introspect', { requestId, json: { token, token_type_hint: 'access_token' } });
    } catch {
      throw gatewayUnavailable('the gateway could not be reached to check the access token');
    }
    if (reply.status !== 200) throw gatewayUnavailable(`the gateway answered ${reply.status} when asked to check the access token`);
    let body: z.output<typeof IntrospectionAnswer>;
    try {
      body = reply.json(IntrospectionAnswer);
    } catch (error) {
      throw gatewayUnavailable(`the gateway's token introspection answered outside its schema: ${error instanceof Error ? error.message : String(error)}`);
    }
    return { active: body.active, ...(typeof body.tier === 'string' && TIERS.has(body.tier) ? { tier: body.tier as Tier } : {}) };
  };
  return (token, claims, requestId) => answers.get(claims.jti, Math.min(now() + options.cacheMs, claims.exp * 1000), () => ask(token, requestId));
}

/** The settings every service behind the gateway reads to know its callers (spread into its config schema). */
export const gatewayCallerConfigFields = {
  /** The X-Service-Key this service presents to the gateway (introspection, and its other calls there); unset: the first SERVICE_KEY. */
  GATEWAY_SERVICE_KEY: optionalString,
  /** The gateway's access tokens: issuer and audience (as the gateway's JWT_ISSUER, JWT_AUDIENCE). */
  JWT_ISSUER: z.string().min(1).default('tempora-gateway'),
  JWT_AUDIENCE: z.string().min(1).default('tempora'),
  /** Unset: GATEWAY_URL/.well-known/jwks.json */
  JWKS_URL: optionalString.pipe(z.url().optional()),
  /** How long an introspection answer is reused: a signed-out token works here at most this long after. */
  INTROSPECTION_CACHE_MS: z.coerce.number().int().min(0).default(5_000),
  INTROSPECTION_TIMEOUT_MS: z.coerce.number().int().min(1).default(3_000),
};

export interface GatewayCallerConfig {
  GATEWAY_URL: string;
  SERVICE_KEY: readonly string[];
  GATEWAY_SERVICE_KEY?: string | undefined;
  JWT_ISSUER: string;
  JWT_AUDIENCE: string;
  JWKS_URL?: string | undefined;
  INTROSPECTION_CACHE_MS: number;
  INTROSPECTION_TIMEOUT_MS: number;
}

/** The gateway's key set: JWKS_URL, or the gateway's well-known address. */
export const jwksUrlOf = (config: Pick<GatewayCallerConfig, 'GATEWAY_URL' | 'JWKS_URL'>) =>
  config.JWKS_URL ?? `${config.GATEWAY_URL.replace(/\/$/, '')}/.well-known/jwks.json`;

export interface GatewayCallerOptions {
  /** SERVICE_KEY: the keys X-Service-Key is checked against. */
  serviceKeys: readonly string[];
  verify: AccessTokenVerifier;
  introspect: TokenIntrospector;
  /** A credential of the service's own (scheme `ApiKey`); its principal's id becomes the caller's principal. */
  apiKey?: Authenticator;
}

/** The options of `gatewayCaller` from a service's configuration. */
export function gatewayCallerOptions(config: GatewayCallerConfig): GatewayCallerOptions {
  const gatewayKey = config.GATEWAY_SERVICE_KEY ?? config.SERVICE_KEY[0];
  return {
    serviceKeys: config.SERVICE_KEY,
    verify: createAccessTokenVerifier({ jwksUrl: jwksUrlOf(config), issuer: config.JWT_ISSUER, audience: config.JWT_AUDIENCE }),
    introspect: gatewayIntrospector(config.GATEWAY_URL, gatewayKey, { cacheMs: config.INTROSPECTION_CACHE_MS, timeoutMs: config.INTROSPECTION_TIMEOUT_MS }),
  };
}

interface Found {
  principals: Map<string, Principal>;
  caller: Caller | undefined;
}

/**
 * The identification of a service behind the gateway, for `createApp`: `identify` decides the caller;
 * `authenticators` only name each scheme's challenge for the routes that refuse a request.
 */
export function gatewayCaller(options: GatewayCallerOptions): { identify: Middleware; authenticators: Authenticator[] } {
  const serviceKey = serviceKeyAuth(options.serviceKeys);
  const challenge = (scheme: string, value: string): Authenticator => ({ scheme, challenge: value, authenticate: () => undefined });
  const authenticators = [
    challenge(CALLER_SCHEMES.service, serviceKey.challenge),
    challenge(CALLER_SCHEMES.bearer, BEARER_CHALLENGE),
    challenge(CALLER_SCHEMES.user, BEARER_CHALLENGE),
    ...(options.apiKey ? [challenge(CALLER_SCHEMES.apiKey, options.apiKey.challenge)] : []),
  ];

  async function bearer(ctx: Context): Promise<{ claims: AccessTokenClaims; state: TokenState } | undefined> {
    const header = ctx.get('Authorization');
    if (!header) return undefined;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) throw unauthorized('Authorization must be "Bearer <access token>"', INVALID_TOKEN_CHALLENGE);
    let claims: AccessTokenClaims;
    try {
      claims = await options.verify(match[1]);
    } catch (error) {
      // The key set is the gateway's: not being able to fetch it says nothing about the token.
      if (error instanceof AccessTokenError && /could not be fetched/.test(error.message))
        throw gatewayUnavailable('the gateway key set could not be fetched to verify the access token');
      throw unauthorized(error instanceof AccessTokenError ? error.message : 'the access token is not valid', INVALID_TOKEN_CHALLENGE);
    }
    const state = await options.introspect(match[1], claims, ctx.state.requestId);
    if (!state.active) throw unauthorized('the access token is no longer active (signed out, revoked, or its account deleted)', INVALID_TOKEN_CHALLENGE);
    return { claims, state };
  }

  async function find(ctx: Context): Promise<Found> {
    const principals = new Map<string, Principal>();
    const keyed = serviceKey.authenticate(ctx);
    if (keyed) principals.set(CALLER_SCHEMES.service, keyed);
    const own = options.apiKey?.authenticate(ctx);
    if (own) principals.set(CALLER_SCHEMES.apiKey, own);
    const token = await bearer(ctx);
    const serviceToken = token && token.claims.scope === 'service' && token.claims.sub.startsWith('service:');
    if (token && serviceToken && !keyed) principals.set(CALLER_SCHEMES.service, { kind: 'service', id: token.claims.sub });
    if (token && !serviceToken) principals.set(CALLER_SCHEMES.bearer, { kind: 'user', id: token.claims.sub.toLowerCase() });
    const service = principals.get(CALLER_SCHEMES.service);

    const named = ctx.get('X-User-ID');
    if (named && !service)
      throw unauthorized('X-User-ID is accepted only with X-Service-Key or a service token (the gateway sends both)', serviceKey.challenge);
    if (named && !UUID.test(named)) throw unauthorized("X-User-ID must be the user's id, a UUID, as the gateway sends it", serviceKey.challenge);

    let caller: Caller | undefined;
    if (token && !serviceToken) {
      const userId = token.claims.sub.toLowerCase();
      if (named && named.toLowerCase() !== userId) throw unauthorized('X-User-ID names another user than the access token', INVALID_TOKEN_CHALLENGE);
      caller = { userId, tier: token.state.tier ?? token.claims.tier ?? 'free', via: 'token', principal: userId };
    } else if (named && service) {
      const tier = ctx.get('X-User-Tier');
      caller = { userId: named.toLowerCase(), tier: TIERS.has(tier) ? (tier as Tier) : 'free', via: 'gateway', principal: service.id };
    } else if (service) {
      caller = { via: 'service', principal: service.id };
    } else if (own) {
      caller = { via: 'api_key', principal: own.id };
    }
    if (caller?.userId) principals.set(CALLER_SCHEMES.user, { kind: 'user', id: caller.userId });
    return { principals, caller };
  }

  const identify: Middleware = async (ctx, next) => {
    let found: Found = { principals: new Map(), caller: undefined };
    try {
      found = await find(ctx);
    } catch (error) {
      if (!(error instanceof Problem)) throw error;
      ctx.state.credentialProblem = error;
    }
    ctx.state.principals = found.principals;
    ctx.state.principal = found.principals.values().next().value;
    if (found.caller) ctx.state.caller = found.caller;
    await next();
  };
  return { identify, authenticators };
}

/**
 * The user a request acts for: 401 without any credential, 403 for a caller that names no user (a service
 * acting as itself, an API key). `detail` says what the operation needs.
 */
export function requireUser(
  ctx: Context,
  detail = 'this operation acts for a user: send their access token, or X-User-ID with a service credential',
): UserCaller {
  const caller = ctx.state.caller;
  if (!caller) throw unauthorized(detail, BEARER_CHALLENGE);
  if (!caller.userId) throw new Problem(403, detail);
  return caller as UserCaller;
}

/** The user the request acts for, if any. */
export const userOf = (ctx: Context): string | null => ctx.state.caller?.userId ?? null;

/** A service acting as itself (a service credential naming no user): the platform's own calls, never a user's. */
export const isServiceItself = (ctx: Context): boolean => ctx.state.caller?.via === 'service';
