/**
 * What a verified provider message means for billing, whichever provider sent it: the Stripe and Apple
 * interpreters produce these, and the book applies them exactly once.
 */
export type Provider = 'stripe' | 'apple';

/** A payment that buys credits: a pack, or a plan's allowance for one period. Granted once per (provider, ref). */
export interface Purchase {
  kind: 'purchase';
  provider: Provider;
  /** The payment's own id: a Stripe PaymentIntent or invoice, an Apple transactionId. */
  ref: string;
  /** Null when the message does not name the user (the book finds them by the subscription). */
  userId: string | null;
  item: { kind: 'pack'; packId: string } | { kind: 'allowance'; planId: string | null; subscriptionRef: string };
  /** Money paid, in minor units (null when the message does not say). */
  amount: number | null;
  currency: string | null;
  /** Stripe: the PaymentIntent a later refund or dispute names. */
  paymentIntent: string | null;
}

/** Provider statuses, as stored (Stripe's own; Apple's mapped onto active, past_due, expired, revoked). */
export type SubscriptionStatus = string;
/** Statuses a subscription never leaves: a message of the same instant cannot bring it back. */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['canceled', 'incomplete_expired']);
/** Statuses of a subscription that no longer runs: another plan may be bought, and there is nothing to cancel or resume. */
export const ENDED_STATUSES: ReadonlySet<string> = new Set(['canceled', 'incomplete_expired', 'expired', 'revoked', 'unpaid', 'incomplete']);

/** A subscription's state as of `version` (the provider's own clock, in ms); older states are ignored. */
export interface SubscriptionChange {
  kind: 'subscription';
  provider: Provider;
  ref: string;
  userId: string | null;
  planId: string | null;
  status: SubscriptionStatus;
  version: number;
  periodEnd: Date | null;
  /** Null: the message does not say (the stored value stays). */
  cancelAtPeriodEnd: boolean | null;
  /** End of the provider's own grace period for a failed renewal (Apple's billing grace period). */
  graceUntil: Date | null;
  /** Only links user and plan to a subscription not seen before (Stripe's checkout completion). */
  onlyIfNew?: boolean;
}

/** A refund, dispute or revocation of a payment: the credits it bought are taken back in proportion. */
export interface Adjustment {
  kind: 'adjustment';
  provider: Provider;
  /** The payment (as in Purchase.ref), when the message names it. */
  ref: string | null;
  paymentIntent: string | null;
  /** Cumulative money refunded, and the payment's amount (Stripe: the charge's). */
  refunded?: { amount: number; of: number };
  /** Disputed (true) or the dispute closed in the merchant's favour (false). */
  disputed?: boolean;
  /** The whole payment was taken back (Apple's REFUND). */
  revoked?: boolean;
  reason: string;
}

export type Intent = Purchase | SubscriptionChange | Adjustment;

/** A message that was verified but means nothing to billing (with why). */
export interface Ignored {
  ignored: string;
}

export type Interpretation = { intents: Intent[]; userId: string | null } | Ignored;

/** A verified message whose content is not what the provider's protocol promises: refused with 400. */
export class MalformedMessage extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Our user ids are UUIDs (the gateway's); anything else in a user field is not ours. */
export const asUserId = (value: unknown): string | null => (typeof value === 'string' && UUID.test(value) ? value.toLowerCase() : null);
