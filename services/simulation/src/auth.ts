import { createHash } from 'node:crypto';
import type { Context, Middleware, Next } from 'koa';
import { AccessTokenError, matchSecret, Problem, serviceKeyAuth, unauthorized, ServiceClient, type AccessTokenVerifier, type Principal } from '@tempora/kit/http';
import type { NamedKey } from './config.ts';

/** Security scheme names (the OpenAPI document's and the kit's route authorizer's). */
export const SERVICE = 'ServiceKey';
export const API_KEY = 'ApiKey';
export const BEARER = 'BearerJWT';
export const ANY_CALLER = [SERVICE, API_KEY, BEARER];

const API_KEY_CHALLENGE = 'ApiKey header="X-API-Key"';
const BEARER_CHALLENGE = 'Bearer realm="tempora"';
const USER_ID = /^[A-Za-z0-9._:@|+-]{1,128}$/;

/**
 * Who a request acts for. `owner` owns the runs it starts and sees; `service` is true for a service
 * acting as itself (a service key without X-User-ID, or a service token), which may also read budgets and
 * anyone's usage. The gateway calls with its service key and the user's X-User-ID, so its users are
 * never service-level.
 */
export interface Caller {
  owner: string;
  principal: string;
  via: 'service_key' | 'api_key' | 'bearer';
  service: boolean;
}

declare module '@tempora/kit/http' {
  interface RequestState {
    /** Who a simulation request acts for, once its credential is accepted. */
    simulationCaller?: Caller;
  }
}

export interface Introspection {
  active: boolean;
  sub?: string;
  scope?: string;
  tier?: string;
}

/**
 * Token introspection at the gateway (RFC 7662), so a signed-out or deleted account's access token stops
 * working here although its signature is still valid. Answers are kept INTROSPECTION_CACHE_MS (that is
 * how long a revocation may take to reach this service); concurrent checks of one token share one call;
 * failures are not kept.
 */
export class Introspector {
  private readonly client: ServiceClient;
  private readonly ttlMs: number;
  private readonly cache = new Map<string, { at: number; answer: Promise<Introspection> }>();

  constructor(gatewayUrl: string, serviceKey: string | undefined, ttlMs: number, timeoutMs: number) {
    this.client = new ServiceClient(gatewayUrl, serviceKey, timeoutMs);
    this.ttlMs = ttlMs;
  }

  introspect(token: string, requestId: string): Promise<Introspection> {
    const key = createHash('sha256').update(token).digest('base64url');
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && now - hit.at < this.ttlMs) return hit.answer;
    const answer = this.ask(token, requestId);
    if (this.ttlMs > 0) {
      if (this.cache.size >= 10_000) this.cache.clear();
      const entry = { at: now, answer };
      this.cache.set(key, entry);
      answer.catch(() => {
        if (this.cache.get(key) === entry) this.cache.delete(key);
      });
    }
    return answer;
  }

  private async ask(token: string, requestId: string): Promise<Introspection> {
    let reply;
    try {
      reply = await this.client.call('POST', '/api/v1/auth/introspect', { requestId, json: { token } });
    } catch {
      throw new Problem(502, 'the gateway could not be asked whether the access token is still valid');
    }
    if (reply.status !== 200) throw new Problem(502, `the gateway's token introspection answered ${reply.status}`);
    try {
      const body = JSON.parse(reply.text) as Introspection;
      if (typeof body.active !== 'boolean') throw new Error('no active field');
      return body;
    } catch {
      throw new Problem(502, 'the gateway\'s token introspection answered something other than an RFC 7662 response');
    }
  }
}

export interface IdentifyOptions {
  serviceKeys: readonly string[];
  apiKeys: readonly NamedKey[];
  verify: AccessTokenVerifier;
  introspector: Introspector;
}

/**
 * Resolves the credentials of a request: a service key (with the user it acts for in X-User-ID), a
 * simulation API key (X-API-Key), or a gateway access token (Bearer), verified against the gateway's JWKS
 * and then checked for revocation by introspection. Like the kit's `identify`, a present but invalid
 * credential is kept in `ctx.state.credentialProblem` and refused after rate limiting.
 */
export function identify(options: IdentifyOptions): Middleware {
  const serviceKey = serviceKeyAuth(options.serviceKeys);
  const apiKeys = options.apiKeys.map((entry) => entry.key);

  async function resolve(ctx: Context, principals: Map<string, Principal>): Promise<Caller | undefined> {
    let caller: Caller | undefined;
    const service = serviceKey.authenticate(ctx);
    const user = ctx.get('X-User-ID');
    if (user && !service) throw unauthorized('X-User-ID is accepted only with X-Service-Key', serviceKey.challenge);
    if (user && !USER_ID.test(user)) throw unauthorized('X-User-ID must be 1 to 128 characters of letters, digits and ._:@|+-', serviceKey.challenge);
    if (service) {
      principals.set(SERVICE, service);
      caller = user ? { owner: user, principal: service.id, via: 'service_key', service: false } : { owner: service.id, principal: service.id, via: 'service_key', service: true };
    }
    const presented = ctx.get('X-API-Key');
    if (presented) {
      const index = matchSecret(presented, apiKeys);
      if (index < 0) throw unauthorized('the X-API-Key header does not hold a valid simulation API key', API_KEY_CHALLENGE);
      const name = options.apiKeys[index]!.name;
      principals.set(API_KEY, { kind: 'user', id: `apikey:${name}` });
      caller ??= { owner: `apikey:${name}`, principal: `apikey:${name}`, via: 'api_key', service: false };
    }
    const authorization = ctx.get('Authorization');
    if (authorization) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (!match?.[1]) throw unauthorized('Authorization must be "Bearer <access token>"', BEARER_CHALLENGE);
      let claims;
      try {
        claims = await options.verify(match[1]);
      } catch (error) {
        throw unauthorized(error instanceof AccessTokenError ? error.message : 'the access token is not valid', `${BEARER_CHALLENGE}, error="invalid_token"`);
      }
      const state = await options.introspector.introspect(match[1], String(ctx.state.requestId ?? ''));
      if (!state.active) throw unauthorized('the access token has been revoked (signed out, or its account deleted)', `${BEARER_CHALLENGE}, error="invalid_token"`);
      const isService = claims.scope === 'service' && claims.sub.startsWith('service:');
      principals.set(BEARER, { kind: isService ? 'service' : 'user', id: claims.sub });
      caller ??= { owner: claims.sub, principal: claims.sub, via: 'bearer', service: isService };
    }
    return caller;
  }

  return async function identifyCaller(ctx: Context, next: Next) {
    const principals = new Map<string, Principal>();
    ctx.state.principals = principals;
    try {
      ctx.state.simulationCaller = await resolve(ctx, principals);
    } catch (error) {
      if (!(error instanceof Problem)) throw error;
      ctx.state.credentialProblem = error;
      principals.clear();
      ctx.state.simulationCaller = undefined;
    }
    ctx.state.principal = principals.values().next().value;
    await next();
  };
}

/** The caller of a route whose security admitted the request. */
export function callerOf(ctx: Context): Caller {
  const caller = ctx.state.simulationCaller;
  if (!caller) throw unauthorized('this operation needs a credential', `${BEARER_CHALLENGE}, ${API_KEY_CHALLENGE}, ApiKey header="X-Service-Key"`);
  return caller;
}

export function requireServiceLevel(caller: Caller): void {
  if (!caller.service) throw new Problem(403, 'only a service acting as itself (X-Service-Key without X-User-ID, or a service token) may read this');
}

/**
 * Starting a run is paid, and only the gateway takes the payment: it charges the user's credits, then
 * forwards with its service key and X-User-ID (the conductor charges through the gateway's ledger the same
 * way). A user's own access token or the simulation API key presented here would start runs nobody paid
 * for, so they read (runs, results, events, templates) but do not start; a service acting as itself (the
 * service key alone, a service token) is the platform's own caller, held by the budgets.
 */
export function requirePaidStart(caller: Caller, gatewayUrl: string): void {
  if (caller.via === 'service_key' || caller.service) return;
  const credential = caller.via === 'api_key' ? 'the simulation API key' : 'an access token presented here';
  throw new Problem(403, `starting a simulation is paid: start it through the gateway at ${gatewayUrl.replace(/\/$/, '')}/api/v1/simulate, which charges it to your credits; ${credential} may read runs, results, events and templates but not start a run`, {
    title: 'Starts are paid through the gateway',
  });
}
