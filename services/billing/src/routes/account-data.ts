import { ACCOUNT_DATA_ROUTE, AccountDeletionSchema, AccountExportPageSchema, AccountExportQuery, AccountUserParams, decodeExportCursor, defineRoute, Problem, type RouteDefinition } from '@tempora/kit/http';
import { BadCursor } from '../account-data.ts';
import { StripeFailure } from '../stripe-channel.ts';
import { refuseUsers, SERVICE, type BillingRouteDeps } from './context.ts';

/** The account-data contract (services/kit/src/http/account-data.ts): the gateway deletes and exports a user's data through these. */
export function accountDataRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  const { accountData, logger } = deps;
  return [
    defineRoute({
      method: 'delete',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'deleteUserData',
      summary: 'Delete a user\'s billing data (the gateway, when the account is deleted)',
      description:
        'Cancels each of the user\'s Stripe subscriptions at Stripe at once (no final invoice), keeps the payments anonymised (no link to the user) as the law requires, deletes everything else billing holds of the user, and remembers a digest of the id so later provider messages about the user change nothing. `notes` tell the user what to do elsewhere (an App Store plan is cancelled with Apple). Idempotent: a second call answers zero counts and the same notes. If Stripe cannot be reached nothing is deleted and the answer is 503: call again later.',
      tags: ['accounts'],
      security: [SERVICE],
      params: AccountUserParams,
      responses: {
        200: { description: 'Deleted (or deleted before)', schema: AccountDeletionSchema },
        403: { description: 'A user\'s request forwarded by the gateway' },
        502: { description: 'Stripe refused to cancel a subscription: nothing was deleted' },
        503: { description: 'Stripe could not be reached: nothing was deleted; call again later' },
      },
      handler: async (ctx, { params }) => {
        refuseUsers(ctx);
        try {
          return await accountData.erase(params.user_id);
        } catch (error) {
          if (!(error instanceof StripeFailure)) throw error;
          logger.error({ err: error, user: params.user_id }, 'account deletion waits for Stripe');
          // Stripe's own words stay in the log: they may quote a key's prefix.
          throw new Problem(error.unavailable ? 503 : 502, `Stripe ${error.unavailable ? 'could not be reached' : 'refused to cancel a subscription'}: nothing was deleted; call again later`);
        }
      },
    }),
    defineRoute({
      method: 'get',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'exportUserData',
      summary: 'One page of a user\'s billing data (the gateway, for the user\'s export)',
      description: 'Kinds in this order: `payments` (provider and ref order), `subscriptions`, `history` (oldest first). Pass `next_cursor` as `cursor` until it is null.',
      tags: ['accounts'],
      security: [SERVICE],
      params: AccountUserParams,
      query: AccountExportQuery,
      responses: {
        200: { description: 'A page', schema: AccountExportPageSchema },
        400: { description: 'A cursor that is not one of this export\'s' },
        403: { description: 'A user\'s request forwarded by the gateway' },
      },
      handler: async (ctx, { params, query }) => {
        refuseUsers(ctx);
        const position = decodeExportCursor(query.cursor);
        if (!position) throw new Problem(400, 'cursor is not a next_cursor of this export');
        try {
          return await accountData.exportPage(params.user_id, position, query.limit);
        } catch (error) {
          if (error instanceof BadCursor) throw new Problem(400, 'cursor is not a next_cursor of this export');
          throw error;
        }
      },
    }),
  ];
}
