import {
  ACCOUNT_DATA_ROUTE,
  AccountDeletionSchema,
  AccountExportPageSchema,
  AccountExportQuery,
  AccountUserParams,
  badRequest,
  decodeExportCursor,
  defineRoute,
  exportPage,
  forbidden,
  unprocessable,
  type RouteDefinition,
} from '@tempora/kit/http';
import type { Context } from 'koa';
import { WORKER_ROLES } from '../config.ts';
import type { GraphRouteDeps } from './context.ts';
import { jobView } from './writes.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Account deletion and export are the gateway's own calls: its service key without X-User-ID. */
function requireService(ctx: Context): void {
  if (!ctx.state.principals?.has('ServiceKey') || ctx.get('X-User-ID')) {
    throw forbidden("account deletion and export are the gateway's own calls, not a user's (send X-Service-Key without X-User-ID)");
  }
}

/**
 * The user whose render jobs are meant. The other requesters a job records (a writer's or the service
 * key's principal, a worker role: routes/context.ts) are not users, and an account call never touches theirs.
 */
function userOf(userId: string): string {
  if (/^(writer|service):/.test(userId) || (WORKER_ROLES as readonly string[]).includes(userId)) {
    throw unprocessable('user_id names a writer, a service or a worker, not a user', [{ path: 'params.user_id', message: 'not a user id' }]);
  }
  return userId;
}

/** The account-data contract (services/kit/src/http/account-data.ts) for the graph service. */
export function accountDataRoutes(deps: GraphRouteDeps): RouteDefinition[] {
  const jobs = deps.graph.repository.renderJobs;
  return [
    defineRoute({
      method: 'delete',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'deleteUserData',
      summary: "Delete everything of a user (account deletion)",
      description:
        'Called by the gateway with X-Service-Key alone when an account is deleted: every render job the user asked for goes, whatever its state. The moments of the graph are public history, not anyone\'s personal data, and stay (docs/graph.md, "Account data"). Idempotent: a second call answers zero counts.',
      tags: ['account'],
      security: ['ServiceKey'],
      params: AccountUserParams,
      responses: {
        200: { description: 'What was deleted', schema: AccountDeletionSchema },
        401: { description: 'No or wrong X-Service-Key' },
        403: { description: "A user's request (the service key with X-User-ID)" },
        422: { description: 'user_id names a writer, a service or a worker role' },
      },
      handler: async (ctx, { params }) => {
        requireService(ctx);
        const deleted = await jobs.deleteRequestedBy(userOf(params.user_id));
        return { service: 'graph', deleted: { render_jobs: deleted }, kept: {}, notes: [] };
      },
    }),
    defineRoute({
      method: 'get',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'exportUserData',
      summary: "One page of a user's data (account export)",
      description:
        'Called by the gateway with X-Service-Key alone. One kind, `render_jobs`: the jobs the user asked for, as `GET /api/v1/graph/jobs/{id}` answers them, by id. `next_cursor` is null after the last page; a cursor this service did not issue is 400.',
      tags: ['account'],
      security: ['ServiceKey'],
      params: AccountUserParams,
      query: AccountExportQuery,
      responses: {
        200: { description: 'One page of one kind', schema: AccountExportPageSchema },
        400: { description: 'A cursor this service did not issue' },
        401: { description: 'No or wrong X-Service-Key' },
        403: { description: "A user's request (the service key with X-User-ID)" },
        422: { description: 'user_id names a writer, a service or a worker role' },
      },
      handler: async (ctx, { params, query }) => {
        requireService(ctx);
        const user = userOf(params.user_id);
        const readers = [
          {
            kind: 'render_jobs',
            read: async (after: string, limit: number) => {
              // One row more than the page says whether the kind goes on after it.
              const rows = await jobs.requestedBy(user, after, limit + 1);
              const page = rows.slice(0, limit);
              return { items: page.map(jobView), next: rows.length > limit ? page[page.length - 1]!.id : undefined };
            },
          },
        ];
        const position = decodeExportCursor(query.cursor);
        if (!position || position.kind >= readers.length || (position.after !== '' && !UUID.test(position.after))) throw badRequest('cursor: not a next_cursor this service issued; start without one');
        return exportPage('graph', readers, position, query.limit);
      },
    }),
  ];
}
