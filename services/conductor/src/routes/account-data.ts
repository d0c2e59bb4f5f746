import {
  ACCOUNT_DATA_ROUTE,
  AccountDeletionSchema,
  AccountExportPageSchema,
  AccountExportQuery,
  AccountUserParams,
  badRequest,
  decodeExportCursor,
  defineRoute,
  forbidden,
  isServiceItself,
  type RouteDefinition,
} from '@tempora/kit/http';
import type { Context } from 'koa';
import { SERVICE } from '../auth.ts';
import { InvalidExportCursor } from '../conductor-service.ts';
import type { ConductorRouteDeps } from './context.ts';


/** Account deletion and export are the gateway's own calls, for the user the path names, never a user's request. */
function requireService(ctx: Context): void {
  if (!isServiceItself(ctx)) throw forbidden("account deletion and export are the gateway's own calls, not a user's (send X-Service-Key without X-User-ID)");
}

/** The account-data contract (services/kit/src/http/account-data.ts) for the conductor. */
export function accountDataRoutes({ service }: ConductorRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'delete',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'deleteUserData',
      summary: 'Delete everything of a user (account deletion)',
      description:
        'Called by the gateway with X-Service-Key alone when an account is deleted: the settings, conversations, messages, pauses and the journal of tool calls of the user go, a message at work included. Refunds the gateway had not booked yet are dropped (`pending_refunds`): the account\'s ledger goes with it. Idempotent: a second call answers zero counts.',
      tags: ['account'],
      security: [SERVICE],
      params: AccountUserParams,
      responses: {
        200: { description: 'What was deleted', schema: AccountDeletionSchema },
        401: { description: 'No or wrong X-Service-Key' },
        403: { description: "A user's request (a user's token, or the service key with X-User-ID)" },
      },
      handler: (ctx, { params }) => {
        requireService(ctx);
        return service.deleteAccount(params.user_id);
      },
    }),
    defineRoute({
      method: 'get',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'exportUserData',
      summary: "One page of a user's data (account export)",
      description:
        'Called by the gateway with X-Service-Key alone. Kinds in this order: `settings` (as set; no item when never set), `conversations`, then `messages` (the request, its status and reply, and its `tool_calls` as the journal holds them: arguments, status, credits net of refunds, note, output); each by id. `next_cursor` is null after the last page; a cursor this service did not issue is 400.',
      tags: ['account'],
      security: [SERVICE],
      params: AccountUserParams,
      query: AccountExportQuery,
      responses: {
        200: { description: 'One page of one kind', schema: AccountExportPageSchema },
        400: { description: 'A cursor this service did not issue' },
        401: { description: 'No or wrong X-Service-Key' },
        403: { description: "A user's request (a user's token, or the service key with X-User-ID)" },
      },
      handler: async (ctx, { params, query }) => {
        requireService(ctx);
        const position = decodeExportCursor(query.cursor);
        if (!position) throw badRequest('cursor: not a next_cursor this service issued; start without one');
        try {
          return await service.exportAccount(params.user_id, position, query.limit);
        } catch (error) {
          if (error instanceof InvalidExportCursor) throw badRequest(error.message);
          throw error;
        }
      },
    }),
  ];
}
