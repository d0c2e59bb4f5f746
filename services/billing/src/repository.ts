// Over 400 lines: the payments, subscriptions, outbox and erasure tables share transactions here; the
// split by area (as graph's repository/) is issue 30's, done with the other services' repositories.
import type { Knex } from '@tempora/kit/data';
import type { Tier } from './domain/catalogue.ts';
import { erasureDigest } from './domain/erasure.ts';
import type { Provider } from './domain/intents.ts';

export interface EventRow {
  provider: string;
  event_id: string;
  type: string;
  outcome: string;
  detail: string | null;
  user_id: string | null;
  received_at: Date;
}

export interface PaymentRow {
  provider: Provider;
  ref: string;
  user_id: string | null;
  item_kind: 'pack' | 'allowance' | null;
  item_id: string | null;
  subscription_ref: string | null;
  credits: number;
  amount: string | number | null;
  currency: string | null;
  payment_intent: string | null;
  granted_at: Date | null;
  refunded_amount: string | number;
  refunded_of: string | number | null;
  disputed: boolean;
  revoked: boolean;
  credits_taken_back: number;
  adjustments: number;
  created_at: Date;
}

export interface SubscriptionRow {
  provider: Provider;
  ref: string;
  user_id: string | null;
  plan_id: string | null;
  status: string;
  version: string | number;
  period_end: Date | null;
  cancel_at_period_end: boolean;
  past_due_since: Date | null;
  grace_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface AccountRow {
  user_id: string;
  tier: Tier;
  pushed_tier: Tier | null;
  push_attempts: number;
  push_next_attempt_at: Date;
  push_error: string | null;
  debt: string | number;
  push_forced: boolean;
}

export interface OutboxRow {
  id: string;
  user_id: string;
  kind: 'grant' | 'debit';
  amount: number;
  sent_amount: number | null;
  idempotency_key: string;
  operation: string;
  provider: Provider;
  payment_ref: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_attempt_at: Date;
  lease_until: Date | null;
  last_error: string | null;
  taken: number | null;
  created_at: Date;
  delivered_at: Date | null;
}

export interface HistoryRow {
  id: string;
  user_id: string;
  kind: string;
  description: string;
  credits: number | null;
  provider: string | null;
  ref: string | null;
  amount: string | number | null;
  currency: string | null;
  created_at: Date;
}

export type NewOutboxEntry = Pick<OutboxRow, 'user_id' | 'kind' | 'amount' | 'idempotency_key' | 'operation' | 'provider' | 'payment_ref'>;
export type NewHistoryEntry = Omit<HistoryRow, 'id' | 'created_at'>;

/** Every SQL statement of billing; the methods that take `db` run inside the caller's transaction. */
export class BillingRepository {
  readonly knex: Knex;
  /**
   * How long a delivery or tier push is leased: longer than one attempt (its gateway call is cut at its
   * time-out), so two replicas do not deliver one entry at once, and no longer, because a lease whose
   * process died (a SIGKILL, a lost node) holds its entry back until it runs out.
   */
  readonly leaseMs: number;
  constructor(knex: Knex, leaseMs: number) {
    this.knex = knex;
    this.leaseMs = leaseMs;
  }

  private leaseEnd() {
    return this.knex.raw('now() + make_interval(secs => ?::double precision)', [this.leaseMs / 1000]);
  }

  // ---------------------------------------------------------------- events

  /** Claims a provider message; false when it was recorded before (a redelivery, or a concurrent duplicate once its first copy commits). */
  async claimEvent(db: Knex, provider: string, eventId: string, type: string): Promise<boolean> {
    const rows = await db('billing_events').insert({ provider, event_id: eventId, type }).onConflict(['provider', 'event_id']).ignore().returning('event_id');
    return rows.length > 0;
  }

  async settleEvent(db: Knex, provider: string, eventId: string, outcome: string, detail: string | null, userId: string | null): Promise<void> {
    await db('billing_events').where({ provider, event_id: eventId }).update({ outcome, detail, user_id: userId });
  }

  async event(provider: string, eventId: string): Promise<EventRow | undefined> {
    return this.knex<EventRow>('billing_events').where({ provider, event_id: eventId }).first();
  }

  // ---------------------------------------------------------------- payments

  /** The payment row, locked for the transaction; created (empty) when it did not exist. */
  async lockPayment(db: Knex, provider: Provider, ref: string, paymentIntent: string | null): Promise<PaymentRow> {
    await db('billing_payments').insert({ provider, ref, payment_intent: paymentIntent }).onConflict(['provider', 'ref']).ignore();
    return (await db<PaymentRow>('billing_payments').where({ provider, ref }).forUpdate().first())!;
  }

  async paymentByIntent(db: Knex, paymentIntent: string, lock = false): Promise<PaymentRow | undefined> {
    const query = db<PaymentRow>('billing_payments').where({ payment_intent: paymentIntent });
    return (lock ? query.forUpdate() : query).first();
  }

  async updatePayment(db: Knex, provider: string, ref: string, fields: Partial<Omit<PaymentRow, 'provider' | 'ref'>>): Promise<void> {
    await db('billing_payments')
      .where({ provider, ref })
      .update({ ...fields, updated_at: db.fn.now() });
  }

  async paymentsOf(userId: string, limit: number): Promise<PaymentRow[]> {
    return this.knex<PaymentRow>('billing_payments').where({ user_id: userId }).orderBy('created_at', 'desc').limit(limit);
  }

  // ---------------------------------------------------------------- subscriptions

  /** The subscription row, locked; `created` when this call inserted it (with the given first state). */
  async lockSubscription(
    db: Knex,
    provider: Provider,
    ref: string,
    initial: Omit<SubscriptionRow, 'provider' | 'ref' | 'created_at' | 'updated_at'>,
  ): Promise<{ row: SubscriptionRow; created: boolean }> {
    const existing = await db<SubscriptionRow>('billing_subscriptions').where({ provider, ref }).forUpdate().first();
    if (existing) return { row: existing, created: false };
    const [inserted] = await db<SubscriptionRow>('billing_subscriptions')
      .insert({ provider, ref, ...initial })
      .onConflict(['provider', 'ref'])
      .ignore()
      .returning('*');
    if (inserted) return { row: inserted, created: true };
    return { row: (await db<SubscriptionRow>('billing_subscriptions').where({ provider, ref }).forUpdate().first())!, created: false };
  }

  async updateSubscription(db: Knex, provider: string, ref: string, fields: Partial<Omit<SubscriptionRow, 'provider' | 'ref'>>): Promise<void> {
    await db('billing_subscriptions')
      .where({ provider, ref })
      .update({ ...fields, updated_at: db.fn.now() });
  }

  async subscription(db: Knex, provider: Provider, ref: string): Promise<SubscriptionRow | undefined> {
    return db<SubscriptionRow>('billing_subscriptions').where({ provider, ref }).first();
  }

  async subscriptionsOf(db: Knex, userId: string): Promise<SubscriptionRow[]> {
    return db<SubscriptionRow>('billing_subscriptions').where({ user_id: userId }).orderBy('created_at');
  }

  /** Users with a past-due subscription: their tier may lapse with time alone. */
  async usersPastDue(): Promise<string[]> {
    const rows = await this.knex('billing_subscriptions').where({ status: 'past_due' }).whereNotNull('user_id').distinct('user_id');
    return rows.map((row: { user_id: string }) => row.user_id);
  }

  // ---------------------------------------------------------------- accounts

  async lockAccount(db: Knex, userId: string): Promise<AccountRow> {
    await db('billing_accounts').insert({ user_id: userId }).onConflict('user_id').ignore();
    return (await db<AccountRow>('billing_accounts').where({ user_id: userId }).forUpdate().first())!;
  }

  /** An operator's re-sync: the tier goes to the gateway again, now. */
  async forceTierPush(userId: string): Promise<void> {
    await this.knex('billing_accounts').insert({ user_id: userId }).onConflict('user_id').ignore();
    await this.knex('billing_accounts')
      .where({ user_id: userId })
      .update({ push_forced: true, push_next_attempt_at: this.knex.fn.now(), push_error: null, push_attempts: 0 });
  }

  async account(userId: string): Promise<AccountRow | undefined> {
    return this.knex<AccountRow>('billing_accounts').where({ user_id: userId }).first();
  }

  async updateAccount(db: Knex, userId: string, fields: Partial<Omit<AccountRow, 'user_id'>>): Promise<void> {
    await db('billing_accounts')
      .where({ user_id: userId })
      .update({ ...fields, updated_at: db.fn.now() });
  }

  /**
   * Leases accounts whose tier the gateway does not have yet (optionally only `userIds`). A user billing
   * never subscribed is never told `free`: an admin's tier for them stays.
   */
  async leaseTierPushes(limit: number, userIds?: string[]): Promise<Pick<AccountRow, 'user_id' | 'tier' | 'push_attempts'>[]> {
    const due = this.knex('billing_accounts')
      .select('user_id')
      .whereRaw(`((tier is distinct from pushed_tier and not (pushed_tier is null and tier = 'free')) or push_forced)`)
      .where('push_next_attempt_at', '<=', this.knex.fn.now())
      .andWhere((q) => q.whereNull('push_lease_until').orWhere('push_lease_until', '<', this.knex.fn.now()))
      .limit(limit)
      .forUpdate()
      .skipLocked();
    if (userIds) due.whereIn('user_id', userIds);
    const rows: Pick<AccountRow, 'user_id' | 'tier' | 'push_attempts'>[] = await this.knex('billing_accounts')
      .whereIn('user_id', due)
      .update({ push_lease_until: this.leaseEnd() }, ['user_id', 'tier', 'push_attempts']);
    return rows;
  }

  async tierPushed(userId: string, tier: Tier): Promise<void> {
    await this.knex('billing_accounts')
      .where({ user_id: userId })
      .update({ pushed_tier: tier, push_forced: false, push_lease_until: null, push_attempts: 0, push_error: null, updated_at: this.knex.fn.now() });
  }

  async tierPushFailed(userId: string, error: string, retryAt: Date | 'never'): Promise<void> {
    await this.knex('billing_accounts')
      .where({ user_id: userId })
      .update({
        push_lease_until: null,
        push_attempts: this.knex.raw('push_attempts + 1'),
        push_error: error.slice(0, 500),
        push_next_attempt_at: retryAt === 'never' ? this.knex.raw(`'infinity'::timestamptz`) : retryAt,
      });
  }

  // ---------------------------------------------------------------- outbox

  async enqueue(db: Knex, entry: NewOutboxEntry): Promise<void> {
    await db('billing_outbox').insert(entry);
  }

  /**
   * Leases due entries, each the oldest pending one of its user, so a user's grants and debits reach the
   * gateway in the order they were decided (a debit's shortfall becomes debt before a later grant pays it).
   */
  async leaseDeliveries(limit: number, userIds?: string[]): Promise<OutboxRow[]> {
    const due = this.knex('billing_outbox as o')
      .select('o.id')
      .where('o.status', 'pending')
      .where('o.next_attempt_at', '<=', this.knex.fn.now())
      .andWhere((q) => q.whereNull('o.lease_until').orWhere('o.lease_until', '<', this.knex.fn.now()))
      .whereNotExists(
        this.knex('billing_outbox as e').select(this.knex.raw('1')).whereRaw('e.user_id = o.user_id').where('e.status', 'pending').whereRaw('e.id < o.id'),
      )
      .orderBy('o.id')
      .limit(limit)
      .forUpdate()
      .skipLocked();
    if (userIds) due.whereIn('o.user_id', userIds);
    return this.knex<OutboxRow>('billing_outbox')
      .whereIn('id', due)
      .update({ lease_until: this.leaseEnd(), attempts: this.knex.raw('attempts + 1') })
      .returning('*');
  }

  /** Fixes what a grant sends, paying the user's debt from it first (once: a retry finds it fixed). */
  async fixSentAmount(entry: OutboxRow): Promise<number> {
    // The common case in one statement: a debit, or a grant for a user without debt, sends its amount.
    const plain = await this.knex('billing_outbox')
      .where({ id: entry.id })
      .whereNull('sent_amount')
      .andWhere((q) =>
        q
          .where('kind', 'debit')
          .orWhereNotExists(this.knex('billing_accounts').select(this.knex.raw('1')).where({ user_id: entry.user_id }).where('debt', '>', 0)),
      )
      .update({ sent_amount: this.knex.raw('amount') }, ['sent_amount']);
    if (plain[0]) return Number(plain[0].sent_amount);
    return this.knex.transaction(async (trx) => {
      const row = await trx<OutboxRow>('billing_outbox').where({ id: entry.id }).forUpdate().first();
      // Gone: its user's account was deleted meanwhile, and nothing reaches the ledger.
      if (!row) return 0;
      if (row.sent_amount !== null) return row.sent_amount;
      let sent = entry.amount;
      if (entry.kind === 'grant') {
        const account = await this.lockAccount(trx, entry.user_id);
        const paid = Math.min(Number(account.debt), entry.amount);
        if (paid > 0) {
          await this.updateAccount(trx, entry.user_id, { debt: Number(account.debt) - paid });
          await this.addHistory(trx, {
            user_id: entry.user_id,
            kind: 'debt',
            description: `${paid} credits of this grant paid off credits a refund could not take back`,
            credits: -paid,
            provider: entry.provider,
            ref: entry.payment_ref,
            amount: null,
            currency: null,
          });
        }
        sent = entry.amount - paid;
      }
      await trx('billing_outbox').where({ id: entry.id }).update({ sent_amount: sent });
      return sent;
    });
  }

  /** Marks a delivery done; a debit's shortfall (what the balance could not cover) becomes the user's debt. */
  async delivered(entry: OutboxRow, taken: number | null): Promise<void> {
    const done = { status: 'delivered', delivered_at: this.knex.fn.now(), lease_until: null, taken, last_error: null };
    if (entry.kind === 'grant') {
      await this.knex('billing_outbox').where({ id: entry.id, status: 'pending' }).update(done);
      return;
    }
    await this.knex.transaction(async (trx) => {
      const updated = await trx('billing_outbox').where({ id: entry.id, status: 'pending' }).update(done);
      if (updated === 0 || taken === null) return;
      const shortfall = (entry.sent_amount ?? entry.amount) - taken;
      if (shortfall <= 0) return;
      const account = await this.lockAccount(trx, entry.user_id);
      await this.updateAccount(trx, entry.user_id, { debt: Number(account.debt) + shortfall });
      await this.addHistory(trx, {
        user_id: entry.user_id,
        kind: 'debt',
        description: `${shortfall} credits could not be taken back (already spent): they are owed from the next grants`,
        credits: null,
        provider: entry.provider,
        ref: entry.payment_ref,
        amount: null,
        currency: null,
      });
    });
  }

  async deliveryFailed(entry: OutboxRow, error: string, retryAt: Date | 'failed'): Promise<void> {
    await this.knex('billing_outbox')
      .where({ id: entry.id })
      .update(
        retryAt === 'failed'
          ? { status: 'failed', lease_until: null, last_error: error.slice(0, 500) }
          : { next_attempt_at: retryAt, lease_until: null, last_error: error.slice(0, 500) },
      );
  }

  async outboxOf(userId: string): Promise<OutboxRow[]> {
    return this.knex<OutboxRow>('billing_outbox').where({ user_id: userId }).orderBy('id');
  }

  /** Failed entries go back to pending (an operator's re-sync once the cause is fixed). */
  async retryFailed(userId: string): Promise<number> {
    return this.knex('billing_outbox')
      .where({ user_id: userId, status: 'failed' })
      .update({ status: 'pending', next_attempt_at: this.knex.fn.now(), lease_until: null });
  }

  async outboxBacklog(): Promise<{ pending: number; failed: number; oldestPendingSeconds: number }> {
    const [row] = await this.knex('billing_outbox')
      .whereIn('status', ['pending', 'failed'])
      .select(
        this.knex.raw(`count(*) filter (where status = 'pending')::int as pending`),
        this.knex.raw(`count(*) filter (where status = 'failed')::int as failed`),
        this.knex.raw(`coalesce(extract(epoch from now() - min(created_at) filter (where status = 'pending')), 0)::float as oldest`),
      );
    return { pending: Number(row?.pending ?? 0), failed: Number(row?.failed ?? 0), oldestPendingSeconds: Number(row?.oldest ?? 0) };
  }

  // ---------------------------------------------------------------- deleted accounts

  /**
   * Serialises what is done for these users with their account's deletion, until the transaction ends.
   * Taken before any row lock (the book takes it for the users a message names, the deletion for its
   * user), so the two wait for each other instead of deadlocking.
   */
  async lockUsers(db: Knex, userIds: string[]): Promise<void> {
    for (const userId of [...new Set(userIds)].sort()) await db.raw('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`billing-user:${userId}`]);
  }

  async anyErased(db: Knex, userIds: string[]): Promise<boolean> {
    if (userIds.length === 0) return false;
    const row = await db('billing_erasures').whereIn('digest', userIds.map(erasureDigest)).first('digest');
    return row !== undefined;
  }

  /** Marks an account deleted: from its commit, a message naming the user is settled without effect. */
  async markErased(userId: string): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await this.lockUsers(trx, [userId]);
      await trx('billing_erasures')
        .insert({ digest: erasureDigest(userId) })
        .onConflict('digest')
        .ignore();
    });
  }

  /**
   * Deletes what billing holds of a user, in one transaction: payments are kept without the link to
   * the user (the law keeps them), everything else keyed by the user goes, and the user's digest is
   * remembered with `notes` (added to those of an earlier call). Rows are locked in the book's order
   * (subscriptions, payments, accounts) so a message being applied meanwhile finishes first, and is
   * deleted with the rest. Counts are this call's: a repeated call answers zeros and the notes.
   */
  async erase(userId: string, notes: string[]): Promise<{ counts: Record<string, number>; anonymised: number; notes: string[] }> {
    return this.knex.transaction(async (trx) => {
      await this.lockUsers(trx, [userId]);
      const digest = erasureDigest(userId);
      const earlier: { notes: string[] } | undefined = await trx('billing_erasures').where({ digest }).forUpdate().first('notes');
      const all = [...new Set([...(earlier?.notes ?? []), ...notes])];
      await trx('billing_erasures')
        .insert({ digest, notes: JSON.stringify(all) })
        .onConflict('digest')
        .merge({ notes: JSON.stringify(all) });
      const subscriptions = await trx('billing_subscriptions').where({ user_id: userId }).delete();
      const anonymised = await trx('billing_payments').where({ user_id: userId }).update({ user_id: null, updated_at: trx.fn.now() });
      const accounts = await trx('billing_accounts').where({ user_id: userId }).delete();
      const outbox = await trx('billing_outbox').where({ user_id: userId }).delete();
      const history = await trx('billing_history').where({ user_id: userId }).delete();
      const events = await trx('billing_events').where({ user_id: userId }).delete();
      return { counts: { subscriptions, accounts, outbox, history, events }, anonymised, notes: all };
    });
  }

  // ---------------------------------------------------------------- export

  /** A user's payments after `after` ((provider, ref) order), `limit` of them. */
  async paymentsAfter(userId: string, after: { provider: string; ref: string } | null, limit: number): Promise<PaymentRow[]> {
    const query = this.knex<PaymentRow>('billing_payments')
      .where({ user_id: userId })
      .orderBy([{ column: 'provider' }, { column: 'ref' }])
      .limit(limit);
    if (after) query.whereRaw('(provider, ref) > (?, ?)', [after.provider, after.ref]);
    return query;
  }

  async subscriptionsAfter(userId: string, after: { provider: string; ref: string } | null, limit: number): Promise<SubscriptionRow[]> {
    const query = this.knex<SubscriptionRow>('billing_subscriptions')
      .where({ user_id: userId })
      .orderBy([{ column: 'provider' }, { column: 'ref' }])
      .limit(limit);
    if (after) query.whereRaw('(provider, ref) > (?, ?)', [after.provider, after.ref]);
    return query;
  }

  async historyAfter(userId: string, afterId: string | null, limit: number): Promise<HistoryRow[]> {
    const query = this.knex<HistoryRow>('billing_history').where({ user_id: userId }).orderBy('id').limit(limit);
    if (afterId !== null) query.where('id', '>', afterId);
    return query;
  }

  // ---------------------------------------------------------------- history

  async addHistory(db: Knex, entry: NewHistoryEntry): Promise<void> {
    await db('billing_history').insert(entry);
  }

  async history(userId: string, limit: number, offset: number): Promise<{ items: HistoryRow[]; total: number }> {
    const base = this.knex<HistoryRow>('billing_history').where({ user_id: userId });
    const [items, [count]] = await Promise.all([
      base.clone().orderBy('id', 'desc').limit(limit).offset(offset),
      base.clone().count<{ count: string }[]>('* as count'),
    ]);
    return { items: items as HistoryRow[], total: Number(count?.count ?? 0) };
  }
}
