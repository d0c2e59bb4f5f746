import { type Catalogue, TIERS, type Tier, tierRank } from './catalogue.ts';
import { type SubscriptionChange, TERMINAL_STATUSES } from './intents.ts';

/** What the book keeps of one subscription. */
export interface SubscriptionState {
  plan_id: string | null;
  status: string;
  version: number;
  past_due_since: Date | null;
  grace_until: Date | null;
}

/** Whether `incoming` replaces `stored`: newer wins; at the same instant, anything but a terminal state is replaced. */
export function supersedes(stored: Pick<SubscriptionState, 'status' | 'version'> | undefined, incoming: Pick<SubscriptionChange, 'version'>): boolean {
  if (!stored) return true;
  if (incoming.version !== stored.version) return incoming.version > stored.version;
  return !TERMINAL_STATUSES.has(stored.status);
}

const ACTIVE = new Set(['active', 'trialing']);

/** Until when a past-due subscription keeps its tier: the provider's grace period, else ours. */
export function accessUntil(subscription: SubscriptionState, graceMs: number): Date | null {
  if (subscription.status !== 'past_due') return null;
  if (subscription.grace_until) return subscription.grace_until;
  return new Date((subscription.past_due_since ?? new Date()).getTime() + graceMs);
}

/** The tier one subscription gives now. */
export function subscriptionTier(subscription: SubscriptionState, catalogue: Catalogue, now: Date, graceMs: number): Tier {
  const plan = subscription.plan_id ? catalogue.plan(subscription.plan_id) : undefined;
  if (!plan) return 'free';
  if (ACTIVE.has(subscription.status)) return plan.tier;
  if (subscription.status === 'past_due' && now < accessUntil(subscription, graceMs)!) return plan.tier;
  return 'free';
}

/** A user's tier: the best any of their subscriptions gives (free without one). */
export function effectiveTier(subscriptions: SubscriptionState[], catalogue: Catalogue, now: Date, graceMs: number): Tier {
  let best = 0;
  for (const subscription of subscriptions) best = Math.max(best, tierRank(subscriptionTier(subscription, catalogue, now, graceMs)));
  return TIERS[best]!;
}
