import { Problem } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Book } from '../book.ts';
import type { Outbox } from '../outbox.ts';
import type { BillingRepository } from '../repository/index.ts';
import type { StripeChannel } from '../stripe-channel.ts';
import { outboxView, paymentView } from '../views.ts';
import type { SubscriptionService } from './subscriptions.ts';

export interface OperatorServiceDeps {
  repository: BillingRepository;
  subscriptions: SubscriptionService;
  book: Book;
  outbox: Outbox;
  stripe: StripeChannel;
  logger: Logger;
}

/** What an operator (a service or admin key) sees of a user's billing and does to repair it. Koa-free. */
export class OperatorService {
  private readonly deps: OperatorServiceDeps;

  constructor(deps: OperatorServiceDeps) {
    this.deps = deps;
  }

  /** The user's state with the tier the gateway has, their latest payments and their ledger deliveries. */
  async state(userId: string) {
    const { repository, subscriptions } = this.deps;
    const [state, account, payments, entries] = await Promise.all([
      subscriptions.state(userId),
      repository.accounts.get(userId),
      repository.payments.latestOf(userId, 50),
      repository.outbox.of(userId),
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
  }

  /**
   * Reads each of the user's Stripe subscriptions from Stripe (making good events that never arrived),
   * queues again what the gateway refused for good, sends the tier again and delivers what is due.
   */
  async resync(userId: string) {
    const { repository, book, outbox, stripe, logger } = this.deps;
    const subscriptions = await repository.subscriptions.of(userId);
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
    await repository.outbox.retryFailed(userId);
    // Only a subscriber's tier is billing's to set: a user who never subscribed keeps an admin's tier.
    if (subscriptions.length > 0) await repository.accounts.forceTierPush(userId);
    await outbox.deliver([userId]);
    return this.state(userId);
  }
}
