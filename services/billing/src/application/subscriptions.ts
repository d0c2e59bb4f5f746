import { Problem, unprocessable } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Book } from '../book.ts';
import type { Catalogue, Item } from '../domain/catalogue.ts';
import { APPLE_SUBSCRIPTIONS_URL } from '../domain/erasure.ts';
import { ENDED_STATUSES } from '../domain/intents.ts';
import type { BillingMetrics } from '../metrics.ts';
import type { Outbox } from '../outbox.ts';
import type { BillingRepository, SubscriptionRow } from '../repository/index.ts';
import { type StripeChannel, StripeFailure } from '../stripe-channel.ts';
import { historyView, subscriptionView } from '../views.ts';

export interface SubscriptionServiceDeps {
  repository: BillingRepository;
  catalogue: Catalogue;
  book: Book;
  outbox: Outbox;
  stripe: StripeChannel;
  metrics: BillingMetrics;
  logger: Logger;
  /** How long a past-due plan keeps its tier. */
  graceMs: number;
  /** Where Stripe's customer portal sends the user back. */
  portalReturnUrl: string;
}

/** An App Store plan: Apple bills it, and only the user can change it, in Apple's settings. */
const managedByApple = (row: SubscriptionRow) =>
  new Problem(409, `this ${row.plan_id ?? ''} plan was bought through the App Store: manage or cancel it in Apple's subscription management`, {
    extensions: { manage_url: APPLE_SUBSCRIPTIONS_URL },
  });

/**
 * What a user does with their own billing: buying through Stripe Checkout, their state and history, and
 * managing their plan (cancel at period end, undo that, Stripe's customer portal). Koa-free; its
 * refusals are the kit's problems.
 */
export class SubscriptionService {
  private readonly deps: SubscriptionServiceDeps;

  constructor(deps: SubscriptionServiceDeps) {
    this.deps = deps;
  }

  /** A user's billing state as users see it (the operators' view adds to it). */
  async state(userId: string) {
    const { repository, graceMs } = this.deps;
    const [account, subscriptions, outbox] = await Promise.all([
      repository.accounts.get(userId),
      repository.subscriptions.of(userId),
      repository.outbox.of(userId),
    ]);
    return {
      user_id: userId,
      tier: account?.tier ?? ('free' as const),
      subscriptions: subscriptions.map((row) => subscriptionView(row, graceMs)),
      debt: Number(account?.debt ?? 0),
      pending_credits: outbox
        .filter((entry) => entry.status !== 'delivered' && entry.kind === 'grant')
        .reduce((sum, entry) => sum + (entry.sent_amount ?? entry.amount), 0),
    };
  }

  /** A page of the user's history, newest first, in the list envelope. */
  async history(userId: string, page: { limit: number; offset: number }) {
    const { items, total } = await this.deps.repository.history.page(userId, page.limit, page.offset);
    return { items: items.map(historyView), total, limit: page.limit, offset: page.offset };
  }

  /** A Stripe Checkout Session for a pack, or for a plan when none is running. */
  async checkout(userId: string, kind: Item['kind'], id: string, requestId: string) {
    const { catalogue, repository, stripe, metrics, logger } = this.deps;
    const pack = kind === 'pack' ? catalogue.pack(id) : undefined;
    const plan = kind === 'plan' ? catalogue.plan(id) : undefined;
    const item: Item | undefined = pack ? { kind: 'pack', pack } : plan ? { kind: 'plan', plan } : undefined;
    if (!item) throw unprocessable(`no ${kind} ${id}`, [{ path: 'body.id', message: `not a ${kind} of the catalogue` }]);
    if (item.kind === 'plan') {
      const running = (await repository.subscriptions.of(userId)).find((row) => !ENDED_STATUSES.has(row.status));
      if (running)
        throw new Problem(
          409,
          `a ${running.plan_id ?? ''} subscription (${running.provider} ${running.ref}) is ${running.status}: change or cancel it instead of buying another`,
        );
    }
    let session;
    try {
      session = await stripe.createCheckout(userId, item, requestId);
    } catch (error) {
      logger.error({ err: error, user: userId }, 'Stripe checkout failed');
      throw new Problem(502, 'Stripe did not create the checkout session; try again');
    }
    metrics.checkouts.inc({ kind: item.kind });
    return { ...session, kind: item.kind, item_id: id };
  }

  /** Sets cancel_at_period_end at Stripe, and records Stripe's answer at once (its webhook then confirms it). */
  async setCancel(userId: string, cancel: boolean) {
    const { repository, stripe, book, outbox, graceMs } = this.deps;
    const plan = await this.runningStripePlan(userId);
    const now = new Date();
    const change = await stripe.setCancelAtPeriodEnd(plan.ref, cancel, now).catch((error: unknown) => this.stripeProblem(error, userId));
    const recorded = await book.record(
      { provider: 'stripe', eventId: null, type: cancel ? 'cancel' : 'resume' },
      { userId, intents: [{ ...change, userId }] },
      now,
    );
    await outbox.deliver(recorded.users);
    const row = await repository.subscriptions.get('stripe', plan.ref);
    // Gone meanwhile: the account was deleted.
    if (!row) throw new Problem(404, 'no running plan');
    return subscriptionView(row, graceMs);
  }

  /** The URL of a Stripe customer-portal session for the customer of the user's latest Stripe subscription. */
  async portal(userId: string): Promise<string> {
    const { repository, stripe, portalReturnUrl } = this.deps;
    const subscriptions = await repository.subscriptions.of(userId);
    const latest = subscriptions.filter((row) => row.provider === 'stripe').at(-1);
    if (!latest) {
      const atApple = subscriptions.filter((row) => row.provider === 'apple').at(-1);
      if (atApple) throw managedByApple(atApple);
      throw new Problem(404, 'no Stripe subscription: nothing to manage at Stripe');
    }
    return stripe.portalSession(latest.ref, portalReturnUrl).catch((error: unknown) => this.stripeProblem(error, userId));
  }

  /** The user's running plan (the latest, should there be several), or the problem saying why there is none to act on. */
  private async runningStripePlan(userId: string): Promise<SubscriptionRow> {
    const running = (await this.deps.repository.subscriptions.of(userId)).filter((row) => !ENDED_STATUSES.has(row.status)).at(-1);
    if (!running) throw new Problem(404, 'no running plan');
    if (running.provider === 'apple') throw managedByApple(running);
    return running;
  }

  /** Stripe's failure as the caller's problem: 503 when trying again may help, else 502. */
  private stripeProblem(error: unknown, userId: string): never {
    if (!(error instanceof StripeFailure)) throw error;
    this.deps.logger.error({ err: error, user: userId }, 'plan management: Stripe failed');
    throw new Problem(error.unavailable ? 503 : 502, error.unavailable ? 'Stripe could not be reached; try again' : 'Stripe refused the change');
  }
}
