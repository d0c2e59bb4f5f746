import type { Context } from 'koa';
import type { GraphService } from '../graph-service.ts';
import type { RenderJobRow } from '../repository/index.ts';

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

/**
 * Who may read a render job: an admin, the service acting as itself, and the writer who queued it. A job
 * is recorded under its requester: a writer's principal (`writer:<name>`), the service key's
 * (`service:<key fingerprint>`, the MCP tool gen_render) or a worker role (`expander`, `daily`). Users never
 * queue one, so a user forwarded by the gateway (its service key with X-User-ID) reads none. Everyone else
 * is told there is no such job.
 */
export function mayReadRenderJob(ctx: Context, job: Pick<RenderJobRow, 'requested_by'>): boolean {
  const principals = ctx.state.principals;
  if (principals?.has('AdminKey')) return true;
  if (principals?.has('ServiceKey') && !ctx.get('X-User-ID')) return true;
  return principals?.get('WriterToken')?.id === job.requested_by;
}
