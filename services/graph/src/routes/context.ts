import type { Context } from 'koa';
import type { Principal } from '@tempora/kit/auth';
import type { GraphService } from '../graph-service.ts';

export interface GraphRouteDeps {
  graph: GraphService;
  version: string;
}

/** Service-key and writer callers are trusted internal callers: they may read private moments. */
export const isTrusted = (ctx: Context): boolean => {
  const principal = ctx.state.principal as Principal | undefined;
  return principal?.kind === 'service' || principal?.kind === 'writer';
};
