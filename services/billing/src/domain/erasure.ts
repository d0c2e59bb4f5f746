import { createHash } from 'node:crypto';
import { TERMINAL_STATUSES } from './intents.ts';

/** Where an App Store subscriber cancels: billing cannot end a subscription Apple bills. */
export const APPLE_SUBSCRIPTIONS_URL = 'https://apps.apple.com/account/subscriptions';

/** Why payment records outlive the account (docs/billing.md, "Deleting an account"). */
export const PAYMENT_RETENTION =
  'payment records are kept for accounting and tax law: provider, payment and subscription ids, item, credits, amount, currency, dates and refund state, with no link to the user';

/**
 * What billing remembers of a deleted account: a one-way digest of its id. Provider messages name users
 * by id (Stripe metadata, Apple's appAccountToken), so a message arriving after the deletion is recognised
 * by digesting the id it names; the id itself is not kept.
 */
export const erasureDigest = (userId: string): string => createHash('sha256').update(`tempora-billing-erasure:${userId.toLowerCase()}`).digest('hex');

interface PlanRow {
  provider: 'stripe' | 'apple';
  status: string;
  cancel_at_period_end: boolean;
}

/** A Stripe subscription Stripe could still charge: cancelled at Stripe when its account is deleted. */
export const chargeableAtStripe = (row: PlanRow): boolean => row.provider === 'stripe' && !TERMINAL_STATUSES.has(row.status);

/** An App Store subscription Apple will renew: only the user can cancel it, with Apple. */
export const renewsAtApple = (row: PlanRow): boolean =>
  row.provider === 'apple' && (row.status === 'active' || row.status === 'past_due') && !row.cancel_at_period_end;

export const stripeCancelledNote = (plan: string): string =>
  `The ${plan} plan paid through Stripe was cancelled with the account: it will not be charged again.`;

export const appleRenewsNote = (plan: string): string =>
  `The ${plan} plan bought through the App Store renews through Apple, which cannot be cancelled from here: cancel it in Apple's subscription management (${APPLE_SUBSCRIPTIONS_URL}).`;
