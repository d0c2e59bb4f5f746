import { ACCOUNT_DATA_ROUTE, AccountDeletionSchema, AccountExportPageSchema, AccountExportQuery, AccountUserParams, badRequest, defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { InvalidExportCursor, type AccountData } from '../account-data.ts';
import { callerOf, requireServiceLevel, SERVICE } from '../auth.ts';

const who = 'Only the service key without X-User-ID (the gateway, for the account it deletes or exports): 401 without it, 403 with X-User-ID or another credential.';

/** The account-data contract (services/kit/src/http/account-data.ts): the gateway deletes and exports an account here. */
export function accountDataRoutes(accounts: AccountData): RouteDefinition[] {
  return [
    defineRoute({
      method: 'delete',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'deleteUserData',
      summary: 'Delete everything held of a user: runs (prompts, plans, results), steps, metered calls, idempotency keys, the ledger of budgets scoped to the account',
      description: `${who} Runs in flight are ended first (their budgets settled at what they spent) and stopped wherever they execute; nothing of them is written back. Idempotent: a second call answers zero counts.`,
      tags: ['accounts'],
      security: [SERVICE],
      params: AccountUserParams,
      responses: { 200: { description: 'What was deleted, by kind', schema: AccountDeletionSchema }, 401: { description: 'No service key' }, 403: { description: 'Not the service key alone' } },
      handler: async (ctx, { params }) => {
        requireServiceLevel(callerOf(ctx));
        return accounts.delete(params.user_id);
      },
    }),
    defineRoute({
      method: 'get',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'exportUserData',
      summary: "One page of a user's data: `runs`, then `steps`, `calls`, `idempotency_keys`, each in key order",
      description: `${who} Follow \`next_cursor\` until it is null: every item comes exactly once, none is left out.`,
      tags: ['accounts'],
      security: [SERVICE],
      params: AccountUserParams,
      query: AccountExportQuery,
      responses: { 200: { description: 'One page, one kind', schema: AccountExportPageSchema }, 400: { description: 'A cursor this service did not give out' }, 401: { description: 'No service key' }, 403: { description: 'Not the service key alone' } },
      handler: async (ctx, { params, query }) => {
        requireServiceLevel(callerOf(ctx));
        try {
          return await accounts.export(params.user_id, query.cursor, query.limit);
        } catch (error) {
          if (error instanceof InvalidExportCursor) throw badRequest(error.message);
          throw error;
        }
      },
    }),
  ];
}
