import type { Context, Middleware } from 'koa';
import { AccessTokenError, Problem, serviceKeyAuth, unauthorized, type AccessTokenVerifier, type Principal, type Principals } from '@tempora/kit/http';
import type { Introspector } from './clients/introspection.ts';

/** Security scheme names (the kit's OpenAPI schemes). */
export const BEARER = 'BearerJWT';
export const SERVICE = 'ServiceKey';
export const BEARER_CHALLENGE = 'Bearer realm="tempora"';

export type Tier = 'free' | 'pro' | 'enterprise';

/** The user a request acts for, and how the conductor knows them. */
export interface Caller {
  userId: string;
  tier: Tier;
  /** `token`: the user's own access token; `gateway`: a service (the gateway's proxy) naming the user in X-User-ID. */
  via: 'token' | 'service';
}

declare module '@tempora/kit/http' {
  interface RequestState {
    /** The user the request acts for, once its credential is accepted. */
    caller?: Caller;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TIERS = new Set<Tier>(['free', 'pro', 'enterprise']);
const refused = (detail: string) => unauthorized(detail, `${BEARER_CHALLENGE}, error="invalid_token"`);

export interface IdentityOptions {
  verify: AccessTokenVerifier;
  /** Revocation (sign-out, deleted accounts) that a key-set check cannot see. */
  introspect: Introspector;
  serviceKeys: readonly string[];
}

/**
 * Who a request comes from. Users present the gateway's access token (the spec: Bearer JWT only),
 * verified against the gateway's JWKS and then introspected at the gateway, so a signed-out token stops
 * working at once. The gateway's proxy, which has already authenticated the user, forwards the request
 * with its X-Service-Key and the user's X-User-ID (spec, authentication rule 2); a service token (`scope:
 * service`) is accepted in place of the key. A credential that is present but refused is kept for
 * `refuseInvalidCredentials`, after rate limiting.
 */
export function identify(options: IdentityOptions): Middleware {
  const serviceKey = serviceKeyAuth(options.serviceKeys);
  return async (ctx, next) => {
    const principals: Principals = new Map();
    try {
      const keyed = serviceKey.authenticate(ctx);
      if (keyed) principals.set(SERVICE, keyed);
      const bearer = await bearerPrincipal(ctx, options);
      if (bearer) principals.set(bearer.scheme, bearer.principal);
      const caller = callerOf(ctx, principals);
      if (caller) ctx.state.caller = caller;
    } catch (error) {
      ctx.state.credentialProblem = error;
    }
    ctx.state.principals = principals;
    ctx.state.principal = ctx.state.credentialProblem ? undefined : principals.values().next().value;
    await next();
  };
}

async function bearerPrincipal(ctx: Context, options: IdentityOptions): Promise<{ scheme: string; principal: Principal & { tier?: Tier } } | undefined> {
  const header = ctx.get('Authorization');
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw refused('Authorization must be "Bearer <access token>"');
  let claims;
  try {
    claims = await options.verify(match[1]);
  } catch (error) {
    if (error instanceof AccessTokenError && /could not be fetched/.test(error.message)) throw new Problem(503, 'the gateway key set could not be fetched to verify the access token; try again shortly');
    throw refused(error instanceof AccessTokenError ? error.message : 'the access token is not valid');
  }
  const state = await options.introspect(match[1], claims.jti, claims.exp);
  if (!state.active) throw refused('the access token is no longer active (signed out, revoked, or its account deleted)');
  if (claims.scope === 'service' && claims.sub.startsWith('service:')) return { scheme: SERVICE, principal: { kind: 'service', id: claims.sub } };
  const tier = state.tier ?? claims.tier;
  return { scheme: BEARER, principal: { kind: 'user', id: claims.sub, ...(tier ? { tier } : {}) } };
}

function callerOf(ctx: Context, principals: Principals): Caller | undefined {
  const user = principals.get(BEARER) as (Principal & { tier?: Tier }) | undefined;
  if (user) {
    if (!UUID.test(user.id)) throw refused('the access token does not name a user');
    return { userId: user.id.toLowerCase(), tier: user.tier ?? 'free', via: 'token' };
  }
  if (!principals.has(SERVICE)) return undefined;
  const named = ctx.get('X-User-ID');
  if (!named) return undefined;
  if (!UUID.test(named)) throw new Problem(422, 'X-User-ID must be the user\'s id (a UUID, as the gateway sends it)', { errors: [{ path: 'headers.x-user-id', message: 'must be a UUID' }] });
  const tier = ctx.get('X-User-Tier') as Tier;
  return { userId: named.toLowerCase(), tier: TIERS.has(tier) ? tier : 'free', via: 'service' };
}

/** The caller of an authorized route; a service credential without X-User-ID acts for nobody. */
export function requireCaller(ctx: Context): Caller {
  if (ctx.state.caller) return ctx.state.caller;
  throw new Problem(403, 'the conductor acts for a user: send the user\'s access token, or X-User-ID with a service credential');
}
