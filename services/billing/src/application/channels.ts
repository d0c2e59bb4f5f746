import { Problem } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { AppleChannel } from '../apple-channel.ts';
import type { Book, Recorded, Source } from '../book.ts';
import type { Interpretation } from '../domain/intents.ts';
import type { BillingMetrics } from '../metrics.ts';
import type { Outbox } from '../outbox.ts';
import { Refusal } from '../refusal.ts';
import type { BillingRepository } from '../repository/index.ts';
import type { StripeChannel } from '../stripe-channel.ts';

export interface ChannelServiceDeps {
  repository: BillingRepository;
  book: Book;
  outbox: Outbox;
  stripe: StripeChannel;
  apple: AppleChannel;
  metrics: BillingMetrics;
  logger: Logger;
}

/** What a verified provider message did (the webhooks' and posted transactions' answer). */
export interface Received {
  received: true;
  outcome: Recorded['outcome'];
  detail: string | null;
}

/**
 * The payment channels' messages: Stripe's webhooks, Apple's notifications and the App Store
 * transactions the app posts. Each is verified (a Refusal when it cannot be), interpreted, recorded by
 * the book and its effects handed to the gateway at once. Koa-free.
 */
export class ChannelService {
  private readonly deps: ChannelServiceDeps;

  constructor(deps: ChannelServiceDeps) {
    this.deps = deps;
  }

  async stripeWebhook(rawBody: Buffer, signature: string | undefined): Promise<Received> {
    const { stripe, logger } = this.deps;
    const event = stripe.verify(rawBody, signature);
    let interpretation = stripe.interpret(event);
    try {
      interpretation = await this.resolvePaymentIntents(interpretation);
    } catch (error) {
      logger.error({ err: error, event: event.id }, 'Stripe could not say which invoice a PaymentIntent paid');
      throw new Problem(503, 'Stripe could not be asked about this payment; deliver the event again later');
    }
    return this.record({ provider: 'stripe', eventId: event.id, type: event.type }, interpretation);
  }

  async appleWebhook(rawBody: Buffer): Promise<Received> {
    const { apple } = this.deps;
    const notification = await apple.verifyNotification(rawBody);
    const interpretation = apple.interpretNotification(notification);
    return this.record({ provider: 'apple', eventId: notification.notificationUUID, type: notification.notificationType }, interpretation);
  }

  /** A StoreKit 2 transaction the user's app posts (consumables produce no server notification). */
  async appleTransaction(userId: string, signed: string): Promise<Received> {
    const { apple } = this.deps;
    const transaction = await apple.verifyTransaction(signed);
    if (transaction.appAccountToken && transaction.appAccountToken.toLowerCase() !== userId) {
      throw new Refusal('foreign-account', "the transaction's appAccountToken names another account");
    }
    return this.record({ provider: 'apple', eventId: null, type: 'transaction' }, await apple.interpretPosted(transaction, userId));
  }

  /** Records what a verified message means, then hands its effects to the gateway (a failure there only delays them). */
  private async record(source: Source, interpretation: Interpretation): Promise<Received> {
    const { book, outbox, metrics } = this.deps;
    const recorded = await book.record(source, interpretation);
    metrics.messages.inc({ provider: source.provider, type: source.type, outcome: recorded.outcome });
    if (recorded.users.length > 0) await outbox.deliver(recorded.users);
    return { received: true, outcome: recorded.outcome, detail: recorded.detail };
  }

  /**
   * A refund or dispute names a PaymentIntent only; one the book does not know may have paid an
   * invoice (a subscription period), which Stripe says.
   */
  private async resolvePaymentIntents(interpretation: Interpretation): Promise<Interpretation> {
    const { repository, stripe } = this.deps;
    if ('ignored' in interpretation || !stripe.canCheckout) return interpretation;
    const intents = await Promise.all(
      interpretation.intents.map(async (intent) => {
        if (intent.kind !== 'adjustment' || intent.ref !== null || !intent.paymentIntent) return intent;
        if (await repository.payments.byIntent(intent.paymentIntent)) return intent;
        const invoice = await stripe.invoiceOfPaymentIntent(intent.paymentIntent);
        return invoice ? { ...intent, ref: invoice } : intent;
      }),
    );
    return { ...interpretation, intents };
  }
}
