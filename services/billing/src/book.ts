import { creditsToTakeBack } from './domain/adjustments.ts';
import type { Catalogue, Tier } from './domain/catalogue.ts';
import type { Adjustment, Interpretation, Provider, Purchase, SubscriptionChange } from './domain/intents.ts';
import { effectiveTier, supersedes } from './domain/tiers.ts';
import type { BillingRepository, PaymentRow, SubscriptionRow } from './repository/index.ts';

/** How one message was recorded. */
export interface Recorded {
  /**
   * applied: it changed something; duplicate: this message was recorded before; unchanged: new, but what
   * it says was known (its payment granted, a newer state held); ignored: verified, but nothing billing
   * acts on; unmatched: it names no user billing knows.
   */
  outcome: 'applied' | 'duplicate' | 'unchanged' | 'ignored' | 'unmatched';
  detail: string | null;
  /** Users whose grants, debits or tier changed: the outbox delivers theirs at once. */
  users: string[];
}

/** The message a set of intents came from: a provider event (recorded once) or a posted transaction (none). */
export interface Source {
  provider: Provider;
  eventId: string | null;
  type: string;
}

interface Effects {
  /** Something was written besides the event record. */
  changed: boolean;
  users: Set<string>;
  /** Users whose subscriptions changed: their tier is worked out again. */
  tierUsers: Set<string>;
  notes: string[];
}

const OPERATIONS = { pack: 'billing.pack', allowance: 'billing.allowance' } as const;

/**
 * Applies what provider messages mean, each message in one transaction with its event record, its
 * payment and subscription rows and the outbox entries of its ledger effects: a redelivered or
 * concurrent copy finds the event recorded, and a second message about one payment finds it granted.
 */
export class Book {
  private readonly repository: BillingRepository;
  private readonly catalogue: Catalogue;
  private readonly graceMs: number;

  constructor(repository: BillingRepository, catalogue: Catalogue, graceMs: number) {
    this.repository = repository;
    this.catalogue = catalogue;
    this.graceMs = graceMs;
  }

  async record(source: Source, interpretation: Interpretation, now = new Date()): Promise<Recorded> {
    return this.repository.transaction(async (tx) => {
      if (source.eventId !== null && !(await tx.events.claim(source.provider, source.eventId, source.type))) {
        return { outcome: 'duplicate', detail: null, users: [] };
      }
      const settle = async (outcome: Recorded['outcome'], detail: string | null, userId: string | null, users: string[]): Promise<Recorded> => {
        if (source.eventId !== null) await tx.events.settle(source.provider, source.eventId, outcome, detail, userId);
        return { outcome, detail, users };
      };
      if ('ignored' in interpretation) return settle('ignored', interpretation.ignored, null, []);
      // A message about a deleted account (a cancelled subscription's last events, a redelivery) is
      // settled without effect: nothing is granted, parked or linked to the user again.
      const named = [interpretation.userId, ...interpretation.intents.map((intent) => ('userId' in intent ? intent.userId : null))].filter(
        (userId) => userId !== null,
      );
      await tx.erasures.lockUsers(named);
      if (await tx.erasures.anyErased(named)) return settle('ignored', 'it names an account that was deleted: nothing is applied', null, []);

      const effects: Effects = { changed: false, users: new Set(), tierUsers: new Set(), notes: [] };
      // The interpreters put subscriptions before payments, and accounts are locked last (refreshTier):
      // concurrent messages lock shared rows in one order, so they wait for each other instead of deadlocking.
      for (const intent of interpretation.intents) {
        if (intent.kind === 'subscription') await this.applySubscription(tx, intent, effects);
        else if (intent.kind === 'purchase') await this.applyPurchase(tx, intent, effects);
        else await this.applyAdjustment(tx, intent, effects);
      }
      for (const userId of effects.tierUsers) await this.refreshTier(tx, userId, now);
      const users = [...new Set([...effects.users, ...effects.tierUsers])];
      const detail = effects.notes.join('; ') || null;
      const userId = interpretation.userId ?? users[0] ?? null;
      // Rows about a user not known yet are kept (a later message naming the user links them), but the message is unmatched.
      if (users.length === 0 && effects.notes.some((note) => note.startsWith('unmatched'))) return settle('unmatched', detail, null, []);
      return settle(effects.changed ? 'applied' : 'unchanged', detail, userId, users);
    });
  }

  private async applySubscription(tx: BillingRepository, change: SubscriptionChange, effects: Effects): Promise<void> {
    const { row, created } = await tx.subscriptions.lock(change.provider, change.ref, {
      user_id: change.userId,
      plan_id: change.planId,
      status: change.status,
      version: change.version,
      period_end: change.periodEnd,
      cancel_at_period_end: change.cancelAtPeriodEnd ?? false,
      past_due_since: change.status === 'past_due' ? new Date(change.version) : null,
      grace_until: change.status === 'past_due' ? change.graceUntil : null,
    });
    const userId = row.user_id ?? change.userId;
    effects.changed ||= created;
    if (!created) {
      // A message too old to change the state (or a checkout completion after the subscription's own
      // events) still names who and what the subscription is for, when that was not known yet.
      const links = {
        ...(row.user_id ? {} : change.userId ? { user_id: change.userId } : {}),
        ...(row.plan_id || !change.planId ? {} : { plan_id: change.planId }),
      };
      if (change.onlyIfNew || !supersedes({ status: row.status, version: Number(row.version) }, change)) {
        if (Object.keys(links).length > 0) {
          await tx.subscriptions.update(change.provider, change.ref, links);
          effects.changed = true;
        }
        effects.notes.push(
          change.onlyIfNew ? 'subscription known already' : `stale: subscription state of ${new Date(Number(row.version)).toISOString()} is newer`,
        );
        if (userId && (links.plan_id || links.user_id)) effects.tierUsers.add(userId);
        return;
      }
      const next = {
        plan_id: change.planId ?? row.plan_id,
        status: change.status,
        period_end: change.periodEnd ?? row.period_end,
        cancel_at_period_end: change.cancelAtPeriodEnd ?? row.cancel_at_period_end,
        past_due_since: change.status !== 'past_due' ? null : row.status === 'past_due' ? row.past_due_since : new Date(change.version),
        grace_until: change.status === 'past_due' ? change.graceUntil : null,
      };
      // A newer message saying what is known already moves the version on, and changes nothing else.
      const time = (date: Date | null) => date?.getTime() ?? null;
      const same =
        next.plan_id === row.plan_id &&
        next.status === row.status &&
        time(next.period_end) === time(row.period_end) &&
        next.cancel_at_period_end === row.cancel_at_period_end &&
        time(next.past_due_since) === time(row.past_due_since) &&
        time(next.grace_until) === time(row.grace_until);
      effects.changed ||= !same || Object.keys(links).length > 0;
      await tx.subscriptions.update(change.provider, change.ref, { ...links, ...next, version: change.version });
    }
    if (!userId) {
      effects.notes.push(`unmatched: subscription ${change.ref} names no user`);
      return;
    }
    const planId = change.planId ?? row.plan_id;
    if (created || row.status !== change.status || row.plan_id !== planId) {
      const plan = planId ? (this.catalogue.plan(planId)?.name ?? planId) : 'an unknown plan';
      await tx.history.add({
        user_id: userId,
        kind: 'subscription',
        description: `${plan} subscription ${change.status}`,
        credits: null,
        provider: change.provider,
        ref: change.ref,
        amount: null,
        currency: null,
      });
    }
    effects.tierUsers.add(userId);
  }

  private async applyPurchase(tx: BillingRepository, purchase: Purchase, effects: Effects): Promise<void> {
    let subscription: SubscriptionRow | undefined;
    if (purchase.item.kind === 'allowance') subscription = await tx.subscriptions.get(purchase.provider, purchase.item.subscriptionRef);
    const payment = await tx.payments.lock(purchase.provider, purchase.ref, purchase.paymentIntent);
    if (payment.granted_at) {
      effects.notes.push(`payment ${purchase.ref} was granted before`);
      return;
    }
    const userId = payment.user_id ?? purchase.userId ?? subscription?.user_id ?? null;
    if (!userId) {
      effects.notes.push(`unmatched: payment ${purchase.ref} names no user`);
      return;
    }
    let credits: number;
    let itemId: string;
    let description: string;
    if (purchase.item.kind === 'pack') {
      const pack = this.catalogue.pack(purchase.item.packId)!;
      [credits, itemId, description] = [pack.credits, pack.id, `${pack.name}: ${pack.credits} credits`];
    } else {
      const plan = this.catalogue.plan(subscription?.plan_id ?? purchase.item.planId ?? '');
      if (!plan) {
        effects.notes.push(`payment ${purchase.ref} is for a plan not in the catalogue`);
        return;
      }
      [credits, itemId, description] = [plan.monthly_credits, plan.id, `${plan.name} plan, one period: ${plan.monthly_credits} credits`];
    }
    const granted: PaymentRow = { ...payment, user_id: userId, credits, granted_at: new Date() };
    effects.changed = true;
    await tx.payments.update(purchase.provider, purchase.ref, {
      user_id: userId,
      item_kind: purchase.item.kind,
      item_id: itemId,
      subscription_ref: purchase.item.kind === 'allowance' ? purchase.item.subscriptionRef : null,
      credits,
      amount: purchase.amount,
      currency: purchase.currency,
      payment_intent: payment.payment_intent ?? purchase.paymentIntent,
      granted_at: granted.granted_at,
    });
    await tx.history.add({
      user_id: userId,
      kind: purchase.item.kind === 'pack' ? 'purchase' : 'renewal',
      description,
      credits,
      provider: purchase.provider,
      ref: purchase.ref,
      amount: purchase.amount,
      currency: purchase.currency,
    });
    if (credits > 0) {
      await tx.outbox.enqueue({
        user_id: userId,
        kind: 'grant',
        amount: credits,
        idempotency_key: `${purchase.provider}:purchase:${purchase.ref}`,
        operation: OPERATIONS[purchase.item.kind],
        provider: purchase.provider,
        payment_ref: purchase.ref,
      });
    }
    effects.users.add(userId);
    // A refund or dispute that arrived before the payment itself is settled now.
    await this.settle(tx, granted, 'refund', effects);
  }

  private async applyAdjustment(tx: BillingRepository, adjustment: Adjustment, effects: Effects): Promise<void> {
    const known = adjustment.ref === null && adjustment.paymentIntent ? await tx.payments.byIntent(adjustment.paymentIntent) : undefined;
    const ref = adjustment.ref ?? known?.ref ?? adjustment.paymentIntent!;
    const payment = await tx.payments.lock(adjustment.provider, ref, known ? null : adjustment.paymentIntent);
    const fields = {
      refunded_amount: Math.max(Number(payment.refunded_amount), adjustment.refunded?.amount ?? 0),
      refunded_of: adjustment.refunded?.of ?? (payment.refunded_of === null ? null : Number(payment.refunded_of)),
      disputed: adjustment.disputed ?? payment.disputed,
      revoked: payment.revoked || adjustment.revoked === true,
    };
    await tx.payments.update(adjustment.provider, ref, { ...fields, payment_intent: payment.payment_intent ?? adjustment.paymentIntent });
    effects.changed = true;
    if (!payment.granted_at) {
      effects.notes.push(`${adjustment.reason} recorded before its payment: settled when the payment arrives`);
      return;
    }
    await this.settle(tx, { ...payment, ...fields }, adjustment.reason, effects);
  }

  /** Brings the credits taken back from a granted payment to what its refunds and disputes call for. */
  private async settle(tx: BillingRepository, payment: PaymentRow, reason: string, effects: Effects): Promise<void> {
    const target = creditsToTakeBack({
      credits: payment.credits,
      refunded_amount: Number(payment.refunded_amount),
      refunded_of: payment.refunded_of === null ? null : Number(payment.refunded_of),
      disputed: payment.disputed,
      revoked: payment.revoked,
    });
    const delta = target - payment.credits_taken_back;
    if (delta === 0 || !payment.user_id) return;
    const sequence = payment.adjustments + 1;
    await tx.payments.update(payment.provider, payment.ref, { credits_taken_back: target, adjustments: sequence });
    const operation = delta > 0 ? `billing.${reason === 'dispute' ? 'dispute' : 'refund'}` : 'billing.dispute-won';
    await tx.outbox.enqueue({
      user_id: payment.user_id,
      kind: delta > 0 ? 'debit' : 'grant',
      amount: Math.abs(delta),
      idempotency_key: `${payment.provider}:adjust:${payment.ref}:${sequence}`,
      operation,
      provider: payment.provider,
      payment_ref: payment.ref,
    });
    const description = delta > 0 ? `${reason}: ${delta} credits taken back` : `${reason}: ${-delta} credits given back`;
    await tx.history.add({
      user_id: payment.user_id,
      kind: delta > 0 ? 'refund' : 'reinstated',
      description,
      credits: -delta,
      provider: payment.provider,
      ref: payment.ref,
      amount: null,
      currency: null,
    });
    effects.users.add(payment.user_id);
  }

  /** Works a user's tier out again from their subscriptions; a change is then pushed to the gateway. */
  private async refreshTier(tx: BillingRepository, userId: string, now: Date): Promise<Tier> {
    const account = await tx.accounts.lock(userId);
    const subscriptions = await tx.subscriptions.of(userId);
    const tier = effectiveTier(
      subscriptions.map((row) => ({ ...row, version: Number(row.version) })),
      this.catalogue,
      now,
      this.graceMs,
    );
    if (tier !== account.tier) {
      await tx.accounts.setTier(userId, tier);
      await tx.history.add({
        user_id: userId,
        kind: 'tier',
        description: `tier ${account.tier} → ${tier}`,
        credits: null,
        provider: null,
        ref: null,
        amount: null,
        currency: null,
      });
    }
    return tier;
  }

  /** Past-due subscribers whose grace has run out lose the plan's tier, without any message saying so. */
  async lapsePastDue(now = new Date()): Promise<string[]> {
    const changed: string[] = [];
    for (const userId of await this.repository.subscriptions.usersPastDue()) {
      const before = (await this.repository.accounts.get(userId))?.tier;
      const after = await this.repository.transaction((tx) => this.refreshTier(tx, userId, now));
      if (after !== before) changed.push(userId);
    }
    return changed;
  }
}
