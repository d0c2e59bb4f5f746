import { defineAccountDataRoutes, Problem, type RouteDefinition } from '@tempora/kit/http';
import { StripeFailure } from '../stripe-channel.ts';
import type { BillingRouteDeps } from './context.ts';

/** The account-data contract (services/kit/src/http/account-data.ts): the gateway deletes and exports a user's data through these. */
export function accountDataRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  const { accountData, logger } = deps;
  return defineAccountDataRoutes({
    service: 'billing',
    erase: async (userId) => {
      try {
        return await accountData.erase(userId);
      } catch (error) {
        if (!(error instanceof StripeFailure)) throw error;
        logger.error({ err: error, user: userId }, 'account deletion waits for Stripe');
        // Stripe's own words stay in the log: they may quote a key's prefix.
        throw new Problem(
          error.unavailable ? 503 : 502,
          `Stripe ${error.unavailable ? 'could not be reached' : 'refused to cancel a subscription'}: nothing was deleted; call again later`,
        );
      }
    },
    exportPage: (userId, position, limit) => accountData.exportPage(userId, position, limit),
    describe: {
      deletion: {
        summary: "Delete a user's billing data (the gateway, when the account is deleted)",
        description:
          "Cancels each of the user's Stripe subscriptions at Stripe at once (no final invoice), keeps the payments anonymised (no link to the user) as the law requires, deletes everything else billing holds of the user, and remembers a digest of the id so later provider messages about the user change nothing. `notes` tell the user what to do elsewhere (an App Store plan is cancelled with Apple). Idempotent: a second call answers zero counts and the same notes. If Stripe cannot be reached nothing is deleted and the answer is 503: call again later.",
      },
      export: {
        summary: "One page of a user's billing data (the gateway, for the user's export)",
        description:
          'Kinds in this order: `payments`, `subscriptions`, `history`, each oldest first (`created_at`, to the microsecond), then by provider and ref (history: by id). Pass `next_cursor` as `cursor` until it is null; a cursor this service did not issue is 400.',
      },
    },
    extraResponses: {
      deletion: {
        502: { description: 'Stripe refused to cancel a subscription: nothing was deleted' },
        503: { description: 'Stripe could not be reached: nothing was deleted; call again later' },
      },
    },
  });
}
