import { type Authenticator, BEARER_CHALLENGE, CALLER_SCHEMES, matchSecret, type Caller as PlatformCaller, Problem, unauthorized } from '@tempora/kit/http';
import type { Context } from 'koa';
import type { NamedKey } from './config.ts';

/** Security scheme names (the kit's, docs/reliability.md "Who gets in"; `ApiKey` is the simulation API key). */
export const SERVICE = CALLER_SCHEMES.service;
export const API_KEY = CALLER_SCHEMES.apiKey;
export const BEARER = CALLER_SCHEMES.bearer;
export const ANY_CALLER = [SERVICE, API_KEY, BEARER];

const API_KEY_CHALLENGE = 'ApiKey header="X-API-Key"';

/** The simulation API key (X-API-Key, SIMULATION_API_KEYS): its holder is `apikey:<name>`, who owns the runs it starts. */
export function simulationApiKeyAuth(keys: readonly NamedKey[]): Authenticator {
  const secrets = keys.map((entry) => entry.key);
  return {
    scheme: API_KEY,
    challenge: API_KEY_CHALLENGE,
    authenticate(ctx) {
      const presented = ctx.get('X-API-Key');
      if (!presented) return undefined;
      const index = matchSecret(presented, secrets);
      if (index < 0) throw unauthorized('the X-API-Key header does not hold a valid simulation API key', API_KEY_CHALLENGE);
      return { kind: 'user', id: `apikey:${keys[index]!.name}` };
    },
  };
}

/**
 * The platform's caller (the kit's `gatewayCaller`) with what the simulation makes of it: `owner` owns the
 * runs it starts and sees (the user, else the credential's principal: a service, `apikey:<name>`);
 * `service` is a service acting as itself, which may also read budgets and anyone's usage and runs.
 */
export interface Caller extends PlatformCaller {
  owner: string;
  service: boolean;
}

/** The caller of a route whose security admitted the request. */
export function callerOf(ctx: Context): Caller {
  const caller = ctx.state.caller;
  if (!caller) throw unauthorized('this operation needs a credential', `${BEARER_CHALLENGE}, ${API_KEY_CHALLENGE}, ApiKey header="X-Service-Key"`);
  return { ...caller, owner: caller.userId ?? caller.principal, service: caller.via === 'service' };
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
  if (caller.via === 'gateway' || caller.via === 'service') return;
  const credential = caller.via === 'api_key' ? 'the simulation API key' : 'an access token presented here';
  throw new Problem(
    403,
    `starting a simulation is paid: start it through the gateway at ${gatewayUrl.replace(/\/$/, '')}/api/v1/simulate, which charges it to your credits; ${credential} may read runs, results, events and templates but not start a run`,
    {
      title: 'Starts are paid through the gateway',
    },
  );
}
