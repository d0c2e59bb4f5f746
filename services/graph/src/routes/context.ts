import type { Context } from 'koa';
import type { GraphService } from '../graph-service.ts';

export interface GraphRouteDeps {
  graph: GraphService;
  version: string;
}

/**
 * Service-key and writer callers are trusted internal callers: they may read private moments. A service
 * call on behalf of a user (the gateway forwarding with X-User-ID) is that user's request, not the service's.
 */
export const isTrusted = (ctx: Context): boolean => {
  const principal = ctx.state.principal;
  if (principal?.kind === 'writer') return true;
  return principal?.kind === 'service' && !ctx.get('X-User-ID');
};
