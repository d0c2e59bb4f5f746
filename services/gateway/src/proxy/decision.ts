import { Problem, unauthorized } from '@tempora/kit/http';
import { API_KEY_CHALLENGE, missingScope, type UserPrincipal } from '../credentials.ts';
import { isChargeable } from '../domain/costs.ts';
import { BEARER_CHALLENGE } from '../domain/tokens.ts';
import { isOpen, routeOf, type UpstreamName } from './routing.ts';

/** A request the proxy forwards: to which upstream, for which user (none: an open path, see `isOpen`), charged first or not. */
export interface Forwarding {
  upstream: UpstreamName;
  user: UserPrincipal | undefined;
  chargeable: boolean;
}

/**
 * What the proxy does with a request, decided here for the Koa app and the express lane alike: undefined
 * when the path is not the proxy's (outside /api/v1/, or the gateway's own routes), the refusal to answer,
 * or where and for whom to forward it. `otherCredential`: a service or admin credential was accepted.
 */
export function decide(method: string, path: string, user: UserPrincipal | undefined, otherCredential: boolean): Forwarding | Problem | undefined {
  const upstream = routeOf(path);
  if (upstream === undefined || upstream === 'native') return undefined;
  // An API key is held to its scope on every request (the Koa lane's requireScope does the same before
  // this), webhooks included, so both lanes answer alike.
  const missing = missingScope(user, method, path);
  if (missing) return new Problem(403, missing);
  // Payment providers' webhooks carry no user credential: they authenticate by a signature over the raw
  // body, which billing verifies. Forwarded uncharged, without identity, and byte for byte (the body streams).
  if (upstream === 'billing' && method === 'POST' && path.startsWith('/api/v1/billing/webhooks/')) return { upstream, user: undefined, chargeable: false };
  if (!user) {
    // The open paths (the graph's public reads and MCP server, scenes' images) pass without identity or service key.
    if (isOpen(upstream, method, path) && !otherCredential) return { upstream, user, chargeable: false };
    // Services call the backends at their direct addresses: the gateway does not lend them its upstream keys.
    if (otherCredential)
      return new Problem(403, 'proxied routes need a user credential (Bearer token or X-API-Key); services call the backends at their direct addresses');
    return unauthorized('this route needs a Bearer access token or an X-API-Key', `${BEARER_CHALLENGE}, ${API_KEY_CHALLENGE}`);
  }
  return { upstream, user, chargeable: isChargeable(method, path) };
}
