import { defineRoute, Problem, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { OperatorStateSchema } from '../schemas.ts';
import { outboxView, paymentView } from '../views.ts';
import { billingState } from './account.ts';
import { ADMIN, type BillingRouteDeps, refuseUsers, SERVICE } from './context.ts';

const UserParams = z.object({ user_id: z.uuid() });

export function operatorRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  const { repository, book, outbox, stripe, logger } = deps;

  const operatorState = async (userId: string) => {
    const [state, account, payments, entries] = await Promise.all([
      billingState(deps, userId),
      repository.account(userId),
      repository.paymentsOf(userId, 50),
      repository.outboxOf(userId),
    ]);
    return {
      ...state,
      pushed_tier: account?.pushed_tier ?? null,
      push_error: account?.push_error ?? null,
      payments: payments.map(paymentView),
      // Everything still on its way, and the latest deliveries.
      outbox: [...entries.filter((entry) => entry.status !== 'delivered'), ...entries.filter((entry) => entry.status === 'delivered').slice(-20)].map(
        outboxView,
      ),
    };
  };

  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/users/{user_id}',
      operationId: 'getUserBilling',
      summary: "A user's billing state, with payments and ledger deliveries (service key, admin)",
      tags: ['operators'],
      security: [SERVICE, ADMIN],
      params: UserParams,
      responses: { 200: { description: 'The state', schema: OperatorStateSchema } },
      handler: async (ctx, { params }) => {
        refuseUsers(ctx);
        return operatorState(params.user_id);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/billing/users/{user_id}/resync',
      operationId: 'resyncUserBilling',
      summary: 'Re-sync a user with Stripe and the gateway (service key, admin)',
      description:
        "Reads each of the user's Stripe subscriptions from Stripe (events that never arrived are made good), puts deliveries the gateway refused for good back in the queue, sends the tier again and delivers what is due. Answers the state afterwards.",
      tags: ['operators'],
      security: [SERVICE, ADMIN],
      params: UserParams,
      responses: { 200: { description: 'The state after the re-sync', schema: OperatorStateSchema }, 502: { description: 'Stripe could not be read' } },
      handler: async (ctx, { params }) => {
        refuseUsers(ctx);
        const userId = params.user_id;
        const subscriptions = await repository.subscriptionsOf(repository.knex, userId);
        if (stripe.canCheckout) {
          const now = new Date();
          for (const subscription of subscriptions.filter((row) => row.provider === 'stripe')) {
            let change;
            try {
              change = await stripe.currentSubscription(subscription.ref, now);
            } catch (error) {
              logger.error({ err: error, subscription: subscription.ref }, 're-sync could not read a subscription from Stripe');
              throw new Problem(502, `Stripe could not be read for subscription ${subscription.ref}`);
            }
            await book.record({ provider: 'stripe', eventId: null, type: 'resync' }, { userId, intents: [{ ...change, userId }] }, now);
          }
        }
        await repository.retryFailed(userId);
        // Only a subscriber's tier is billing's to set: a user who never subscribed keeps an admin's tier.
        if (subscriptions.length > 0) await repository.forceTierPush(userId);
        await outbox.deliver([userId]);
        return operatorState(userId);
      },
    }),
  ];
}
