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
  type RouteDefinition,
} from '@tempora/kit/http';
import type { Context } from 'koa';
import { isService, type RouteDeps } from './context.ts';
import { jobView } from './generate.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Account deletion and export are the gateway's own calls: its service key without X-User-ID. */
function requireService(ctx: Context): void {
  if (!isService(ctx)) throw forbidden("account deletion and export are the gateway's own calls, not a user's (send X-Service-Key without X-User-ID)");
}

/** One keyset page: `limit + 1` rows were read, so a further row means the kind goes on after the last kept. */
function keyset<T>(rows: T[], limit: number, id: (row: T) => string): { items: T[]; next?: string } {
  if (rows.length <= limit) return { items: rows };
  const items = rows.slice(0, limit);
  return { items, next: id(items[items.length - 1]!) };
}

/** The account-data contract (services/kit/src/http/account-data.ts) for the generation service. */
export function accountDataRoutes(deps: RouteDeps): RouteDefinition[] {
  const { generator, repository } = deps;
  return [
    defineRoute({
      method: 'delete',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'deleteUserData',
      summary: "Delete everything of a user (account deletion)",
      description:
        "Called by the gateway with X-Service-Key alone when an account is deleted: every scene (with its image), job and Idempotency-Key record of the user go, and the user's generations still running are stopped and cannot store a scene afterwards (docs/generation.md, \"Account data\"). Idempotent: a second call answers zero counts.",
      tags: ['account'],
      security: ['ServiceKey'],
      params: AccountUserParams,
      responses: {
        200: { description: 'What was deleted', schema: AccountDeletionSchema },
        401: { description: 'No or wrong X-Service-Key' },
        403: { description: "A user's request (the service key with X-User-ID)" },
      },
      handler: async (ctx, { params }) => {
        requireService(ctx);
        const deleted = await generator.eraseOwner(params.user_id);
        return { service: 'generation', deleted: { ...deleted }, kept: {}, notes: [] };
      },
    }),
    defineRoute({
      method: 'get',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'exportUserData',
      summary: "One page of a user's data (account export)",
      description:
        "Called by the gateway with X-Service-Key alone. Kinds in this order: `timepoints` (the full scene records, public and private, as `GET /api/v1/timepoints/{id}` answers them), then `jobs` (asynchronous generations with their request and Idempotency-Key); each by id. `next_cursor` is null after the last page; a cursor this service did not issue is 400.",
      tags: ['account'],
      security: ['ServiceKey'],
      params: AccountUserParams,
      query: AccountExportQuery,
      responses: {
        200: { description: 'One page of one kind', schema: AccountExportPageSchema },
        400: { description: 'A cursor this service did not issue' },
        401: { description: 'No or wrong X-Service-Key' },
        403: { description: "A user's request (the service key with X-User-ID)" },
      },
      handler: async (ctx, { params, query }) => {
        requireService(ctx);
        const owner = params.user_id;
        const readers = [
          {
            kind: 'timepoints',
            read: async (after: string, limit: number) => keyset(await repository.exportTimepoints(owner, after, limit + 1), limit, (scene) => scene.id),
          },
          {
            kind: 'jobs',
            read: async (after: string, limit: number) => {
              const page = keyset(await repository.exportJobs(owner, after, limit + 1), limit, (job) => job.id);
              return { items: page.items.map((job) => ({ ...jobView(job), request: job.request, idempotency_key: job.idempotency_key })), next: page.next };
            },
          },
        ];
        const position = decodeExportCursor(query.cursor);
        if (!position || position.kind >= readers.length || (position.after !== '' && !UUID.test(position.after))) throw badRequest('cursor: not a next_cursor this service issued; start without one');
        return exportPage('generation', readers, position, query.limit);
      },
    }),
  ];
}
