import type { Knex } from '@tempora/kit/data';
import { leaseEnd } from './lease.ts';
import type { NewOutboxEntry, OutboxRow } from './rows.ts';

/** The ledger effects the gateway is to be told (`billing_outbox`): grants and debits, each user's in order. */
export class OutboxEntries {
  private readonly knex: Knex;
  private readonly leaseMs: number;

  constructor(knex: Knex, leaseMs: number) {
    this.knex = knex;
    this.leaseMs = leaseMs;
  }

  async enqueue(entry: NewOutboxEntry): Promise<void> {
    await this.knex('billing_outbox').insert(entry);
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
      .update({ lease_until: leaseEnd(this.knex, this.leaseMs), attempts: this.knex.raw('attempts + 1') })
      .returning('*');
  }

  /**
   * The common case of fixing what an entry sends, in one statement: a debit, or a grant for a user
   * without debt, sends its amount. Undefined when the entry is not that case (or was fixed before).
   */
  async sendWholeAmount(entry: OutboxRow): Promise<number | undefined> {
    const plain = await this.knex('billing_outbox')
      .where({ id: entry.id })
      .whereNull('sent_amount')
      .andWhere((q) =>
        q
          .where('kind', 'debit')
          .orWhereNotExists(this.knex('billing_accounts').select(this.knex.raw('1')).where({ user_id: entry.user_id }).where('debt', '>', 0)),
      )
      .update({ sent_amount: this.knex.raw('amount') }, ['sent_amount']);
    return plain[0] ? Number(plain[0].sent_amount) : undefined;
  }

  /** The entry, locked for the transaction; undefined when it is gone (its user's account was deleted). */
  async lock(id: string): Promise<OutboxRow | undefined> {
    return this.knex<OutboxRow>('billing_outbox').where({ id }).forUpdate().first();
  }

  async setSentAmount(id: string, sent: number): Promise<void> {
    await this.knex('billing_outbox').where({ id }).update({ sent_amount: sent });
  }

  /** Marks a pending entry delivered; false when it was not pending (delivered by another meanwhile, or gone). */
  async markDelivered(id: string, taken: number | null): Promise<boolean> {
    const updated = await this.knex('billing_outbox')
      .where({ id, status: 'pending' })
      .update({ status: 'delivered', delivered_at: this.knex.fn.now(), lease_until: null, taken, last_error: null });
    return updated > 0;
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

  /** A user's entries, oldest first. */
  async of(userId: string): Promise<OutboxRow[]> {
    return this.knex<OutboxRow>('billing_outbox').where({ user_id: userId }).orderBy('id');
  }

  /** Failed entries go back to pending (an operator's re-sync once the cause is fixed). */
  async retryFailed(userId: string): Promise<number> {
    return this.knex('billing_outbox')
      .where({ user_id: userId, status: 'failed' })
      .update({ status: 'pending', next_attempt_at: this.knex.fn.now(), lease_until: null });
  }

  async backlog(): Promise<{ pending: number; failed: number; oldestPendingSeconds: number }> {
    const [row] = await this.knex('billing_outbox')
      .whereIn('status', ['pending', 'failed'])
      .select(
        this.knex.raw(`count(*) filter (where status = 'pending')::int as pending`),
        this.knex.raw(`count(*) filter (where status = 'failed')::int as failed`),
        this.knex.raw(`coalesce(extract(epoch from now() - min(created_at) filter (where status = 'pending')), 0)::float as oldest`),
      );
    return { pending: Number(row?.pending ?? 0), failed: Number(row?.failed ?? 0), oldestPendingSeconds: Number(row?.oldest ?? 0) };
  }
}
