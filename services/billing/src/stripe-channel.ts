import Stripe from 'stripe';
import type { BillingConfig } from './config.ts';
import type { Catalogue, Item } from './domain/catalogue.ts';
import { MalformedMessage, type SubscriptionChange, TERMINAL_STATUSES } from './domain/intents.ts';
import { interpretStripeEvent, type StripeEvent, StripeEventSchema } from './domain/stripe-events.ts';
import { Refusal } from './refusal.ts';

/** Stripe's own words for why a signature was refused, mapped onto the refusal reasons counted in metrics. */
function signatureReason(error: Error): string {
  if (/tolerance/i.test(error.message)) return 'stale-signature';
  if (/no stripe-signature header|unable to extract|no signatures found with expected scheme/i.test(error.message)) return 'malformed-signature';
  if (/no webhook payload/i.test(error.message)) return 'malformed-body';
  return 'bad-signature';
}

export interface CheckoutSession {
  id: string;
  url: string;
  expires_at: number | null;
}

/**
 * Card payments through Stripe: Checkout Sessions through the official client (its API base
 * configurable), and webhook events verified by the client's own verifier on the raw body before
 * anything is parsed.
 */
export class StripeChannel {
  private readonly client: Stripe | undefined;
  private readonly config: BillingConfig;
  private readonly catalogue: Catalogue;

  constructor(config: BillingConfig, catalogue: Catalogue) {
    this.config = config;
    this.catalogue = catalogue;
    if (config.STRIPE_SECRET_KEY) {
      const api = config.STRIPE_API_URL ? new URL(config.STRIPE_API_URL) : undefined;
      this.client = new Stripe(config.STRIPE_SECRET_KEY, {
        timeout: config.STRIPE_TIMEOUT_MS,
        maxNetworkRetries: 2,
        appInfo: { name: 'tempora-billing' },
        ...(api
          ? { host: api.hostname, port: api.port || (api.protocol === 'https:' ? 443 : 80), protocol: api.protocol === 'https:' ? 'https' : 'http' }
          : {}),
      });
    }
  }

  get canCheckout(): boolean {
    return this.client !== undefined;
  }

  get canVerify(): boolean {
    return this.config.STRIPE_WEBHOOK_SECRET.length > 0;
  }

  /**
   * The event, once one of the configured secrets verifies `raw` under `signature` within the tolerance
   * (Stripe sends one v1 per active secret while one is rolled; several configured secrets cover our side
   * of a rotation). Throws a Refusal otherwise.
   */
  verify(raw: Buffer, signature: string | undefined): StripeEvent {
    if (!signature) throw new Refusal('missing-signature', 'the Stripe-Signature header is missing');
    let refusal: Error | undefined;
    for (const secret of this.config.STRIPE_WEBHOOK_SECRET) {
      let event: unknown;
      try {
        event = Stripe.webhooks.constructEvent(raw, signature, secret, this.config.STRIPE_WEBHOOK_TOLERANCE_SECONDS);
      } catch (error) {
        if (error instanceof Stripe.errors.StripeSignatureVerificationError) {
          // A stale signature under a matching secret says more than a mismatch under another one.
          if (!refusal || signatureReason(error) === 'stale-signature') refusal = error;
          continue;
        }
        throw new Refusal('malformed-body', 'the body is not a JSON Stripe event');
      }
      const parsed = StripeEventSchema.safeParse(event);
      if (!parsed.success)
        throw new Refusal('malformed-body', `the body is not a Stripe event: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
      return parsed.data;
    }
    const error = refusal ?? new Error('no signatures found');
    const reason = signatureReason(error);
    throw new Refusal(
      reason,
      reason === 'stale-signature'
        ? `the signature's timestamp is outside the ${this.config.STRIPE_WEBHOOK_TOLERANCE_SECONDS} s tolerance`
        : 'the Stripe-Signature does not verify with any configured secret',
    );
  }

  interpret(event: StripeEvent) {
    try {
      return interpretStripeEvent(event, this.catalogue);
    } catch (error) {
      if (error instanceof MalformedMessage) throw new Refusal('malformed-event', error.message);
      throw error;
    }
  }

  private get api(): Stripe {
    if (!this.client) throw new Error('Stripe is not configured (STRIPE_SECRET_KEY)');
    return this.client;
  }

  /** A Checkout Session for `item`, tagged with the user and item so its events name both. */
  async createCheckout(userId: string, item: Item, requestId: string): Promise<CheckoutSession> {
    const tags: Record<string, string> = item.kind === 'pack' ? { user_id: userId, pack_id: item.pack.id } : { user_id: userId, plan_id: item.plan.id };
    const { price, name, stripe_price: stripePrice } = item.kind === 'pack' ? item.pack : item.plan;
    const lineItem: Stripe.Checkout.SessionCreateParams.LineItem = stripePrice
      ? { price: stripePrice, quantity: 1 }
      : {
          quantity: 1,
          price_data: {
            currency: price.currency,
            unit_amount: price.amount,
            product_data: { name, metadata: tags },
            ...(item.kind === 'plan' ? { recurring: { interval: 'month' as const } } : {}),
          },
        };
    const session = await this.api.checkout.sessions.create(
      {
        mode: item.kind === 'pack' ? 'payment' : 'subscription',
        line_items: [lineItem],
        client_reference_id: userId,
        metadata: tags,
        success_url: this.config.CHECKOUT_SUCCESS_URL!,
        cancel_url: this.config.CHECKOUT_CANCEL_URL!,
        ...(item.kind === 'pack' ? { payment_intent_data: { metadata: tags } } : { subscription_data: { metadata: tags } }),
      },
      { idempotencyKey: `checkout:${requestId}` },
    );
    if (!session.url) throw new Error(`Stripe created checkout session ${session.id} without a URL`);
    return { id: session.id, url: session.url, expires_at: session.expires_at ?? null };
  }

  /** The invoice a PaymentIntent paid, if any (a refund names the PaymentIntent only). */
  async invoiceOfPaymentIntent(paymentIntent: string): Promise<string | null> {
    const payments = await this.api.invoicePayments.list({ payment: { type: 'payment_intent', payment_intent: paymentIntent }, limit: 1 });
    const invoice = payments.data[0]?.invoice;
    return invoice === undefined ? null : typeof invoice === 'string' ? invoice : (invoice.id ?? null);
  }

  /** A subscription's current state read from Stripe (a re-sync), as of now. */
  async currentSubscription(ref: string, now: Date): Promise<SubscriptionChange> {
    return { ...this.stateOf(await this.api.subscriptions.retrieve(ref), now), version: now.getTime() };
  }

  /**
   * Sets whether a subscription ends at its period's end (a cancel, or its undoing), and answers its state
   * as Stripe answered it, as of the current second: the customer.subscription.updated event Stripe sends
   * for it carries that second too, and so replaces this state rather than being taken for an older one.
   */
  async setCancelAtPeriodEnd(ref: string, cancel: boolean, now: Date): Promise<SubscriptionChange> {
    const subscription = await this.attempt(`update subscription ${ref}`, () => this.api.subscriptions.update(ref, { cancel_at_period_end: cancel }));
    return this.stateOf(subscription, now);
  }

  /**
   * Ends a subscription now, without a final invoice or proration (an account's deletion): false when
   * Stripe says it had ended already, so a repeated deletion finishes what an earlier one began.
   */
  async cancelNow(ref: string): Promise<boolean> {
    return this.attempt(`cancel subscription ${ref}`, async () => {
      const subscription = await this.api.subscriptions.retrieve(ref);
      if (TERMINAL_STATUSES.has(subscription.status)) return false;
      await this.api.subscriptions.cancel(ref, { invoice_now: false, prorate: false });
      return true;
    });
  }

  /** A customer-portal session for the customer a subscription bills; its URL. */
  async portalSession(subscriptionRef: string, returnUrl: string): Promise<string> {
    return this.attempt(`open the customer portal for subscription ${subscriptionRef}`, async () => {
      const subscription = await this.api.subscriptions.retrieve(subscriptionRef);
      const customer = typeof subscription.customer === 'string' ? subscription.customer : subscription.customer.id;
      const session = await this.api.billingPortal.sessions.create({ customer, return_url: returnUrl });
      return session.url;
    });
  }

  /** A call to Stripe whose failure becomes a StripeFailure saying whether trying again later may succeed. */
  private async attempt<T>(what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      // Without a secret key nothing can be asked of Stripe until an operator configures one: a retry can then succeed.
      const unavailable = !this.client || stripeUnavailable(error);
      throw new StripeFailure(`Stripe could not ${what}: ${(error as Error).message}`, unavailable, { cause: error });
    }
  }

  private stateOf(subscription: Stripe.Subscription, now: Date): SubscriptionChange {
    const event: StripeEvent = {
      id: `read:${subscription.id}`,
      type: 'customer.subscription.updated',
      created: Math.floor(now.getTime() / 1000),
      data: { object: subscription as unknown as Record<string, unknown> },
    };
    const interpretation = this.interpret(event);
    if ('ignored' in interpretation) throw new Error(interpretation.ignored);
    return interpretation.intents[0] as SubscriptionChange;
  }
}

/** A call to Stripe that failed: `unavailable` when the same call may succeed later (a 503 for our caller), else Stripe refused it (502). */
export class StripeFailure extends Error {
  readonly unavailable: boolean;
  constructor(message: string, unavailable: boolean, options: ErrorOptions) {
    super(message, options);
    this.unavailable = unavailable;
  }
}

/** Whether a failed Stripe call may succeed later unchanged (Stripe unreachable, overloaded, failing). */
const stripeUnavailable = (error: unknown): boolean =>
  error instanceof Stripe.errors.StripeConnectionError ||
  error instanceof Stripe.errors.StripeRateLimitError ||
  error instanceof Stripe.errors.StripeAPIError ||
  (error instanceof Stripe.errors.StripeError && (error.statusCode ?? 0) >= 500);
