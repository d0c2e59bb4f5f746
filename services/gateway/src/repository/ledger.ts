import type { Knex } from '@tempora/kit/data';
import { closeCharge } from './open-charges.ts';

export interface LedgerRow {
  id: string;
  user_id: string;
  amount: string | number;
  balance_after: string | number;
  kind: 'signup_grant' | 'grant' | 'charge' | 'refund';
  operation: string | null;
  idempotency_key: string;
  refund_of: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

export class InsufficientCredits extends Error {
  readonly required: number;
  readonly available: number;
  constructor(required: number, available: number) {
    super(`insufficient credits: ${required} required, ${available} available`);
    this.required = required;
    this.available = available;
  }
}
export class UnknownUser extends Error {}
export class IdempotencyConflict extends Error {}

const isUniqueViolation = (error: unknown) => (error as { code?: string }).code === '23505';

export interface LedgerOutcome {
  entry: LedgerRow;
  balance: number;
  /** True when the idempotency key had been used: nothing new was written. */
  replayed: boolean;
}

/** Adds a grant inside the caller's transaction (a new user's signup grant is booked with the user). */
export async function applyGrant(
  trx: Knex,
  userId: string,
  amount: number,
  kind: 'grant' | 'signup_grant',
  key: string,
  operation: string | null,
  metadata: object,
): Promise<LedgerOutcome> {
  const [updated] = await trx('users').where({ id: userId }).increment('balance', amount).returning('balance');
  if (!updated) throw new UnknownUser(userId);
  const balance = Number((updated as { balance: string }).balance);
  const [entry] = await trx<LedgerRow>('credit_ledger')
    .insert({ user_id: userId, amount, balance_after: balance, kind, operation, idempotency_key: key, metadata: JSON.stringify(metadata) as never })
    .returning('*');
  return { entry: entry as LedgerRow, balance, replayed: false };
}

/**
 * The credit ledger (`credit_ledger`) and the balance it keeps on `users`: grants, charges, refunds and the
 * compensating debits the billing service books, each idempotent on its key.
 */
export class Ledger {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

  async balance(userId: string): Promise<number | undefined> {
    const row = await this.knex('users').where({ id: userId }).first('balance');
    return row ? Number(row.balance) : undefined;
  }

  private async replay(userId: string, key: string, expect: { amount: number; kind: string }): Promise<LedgerOutcome | undefined> {
    const entry = await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId, idempotency_key: key }).first();
    if (!entry) return undefined;
    if (Number(entry.amount) !== expect.amount || entry.kind !== expect.kind) {
      throw new IdempotencyConflict(`idempotency key ${key} was used for a different ${entry.kind} of ${entry.amount}`);
    }
    return { entry, balance: (await this.balance(userId)) ?? 0, replayed: true };
  }

  /** Adds credits; the same idempotency key never grants twice. */
  async grant(userId: string, amount: number, key: string, operation: string | null, metadata: object = {}): Promise<LedgerOutcome> {
    const replayed = await this.replay(userId, key, { amount, kind: 'grant' });
    if (replayed) return replayed;
    try {
      return await this.knex.transaction((trx) => applyGrant(trx, userId, amount, 'grant', key, operation, metadata));
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      return (await this.replay(userId, key, { amount, kind: 'grant' }))!;
    }
  }

  /**
   * Takes `amount` credits if the balance covers them. The debit and its ledger entry are one statement
   * (a data-modifying CTE): the conditional update is the only check, so concurrent charges can never
   * overdraw, and the row lock is held for that one statement. A read without a lock answers replays and
   * obvious shortfalls first. The same idempotency key never charges twice.
   */
  async charge(userId: string, amount: number, key: string, operation: string, metadata: object = {}, settleWithinMs?: number): Promise<LedgerOutcome> {
    const pre = await this.knex('users')
      .leftJoin('credit_ledger', (join) => join.on('credit_ledger.user_id', 'users.id').andOnVal('credit_ledger.idempotency_key', key))
      .where('users.id', userId)
      .first('users.balance as current_balance', 'credit_ledger.id as entry_id');
    if (!pre) throw new UnknownUser(userId);
    if (pre.entry_id) return (await this.replay(userId, key, { amount: -amount, kind: 'charge' }))!;
    if (Number(pre.current_balance) < amount) throw new InsufficientCredits(amount, Number(pre.current_balance));
    try {
      const result = await this.knex.raw<{ rows: LedgerRow[] }>(
        `with debit as (
           update users set balance = balance - ?, updated_at = now() where id = ? and balance >= ? returning balance
         )
         , entry as (
           insert into credit_ledger (user_id, amount, balance_after, kind, operation, idempotency_key, metadata)
           select ?, ?, debit.balance, 'charge', ?, ?, ?::jsonb from debit
           returning *
         )
         , opened as (
           insert into open_charges (user_id, charge_key, settle_by)
           select user_id, idempotency_key, now() + make_interval(secs => ?::double precision) from entry where ?::double precision is not null
         )
         select * from entry`,
        [
          amount,
          userId,
          amount,
          userId,
          -amount,
          operation,
          key,
          JSON.stringify(metadata),
          ...Array(2).fill(settleWithinMs === undefined ? null : settleWithinMs / 1000),
        ],
      );
      const entry = result.rows[0];
      if (!entry) {
        const available = await this.balance(userId);
        if (available === undefined) throw new UnknownUser(userId);
        throw new InsufficientCredits(amount, available);
      }
      return { entry, balance: Number(entry.balance_after), replayed: false };
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      return (await this.replay(userId, key, { amount: -amount, kind: 'charge' }))!;
    }
  }

  /**
   * The compensating entry for a charge; a charge is refunded at most once, and is no longer open after.
   * `onlyIfOpen`: only a charge still open is refunded (the sweep of charges a stopped replica left must
   * not refund one that its call settled as delivered meanwhile).
   */
  async refund(userId: string, chargeKey: string, reason: string, onlyIfOpen = false): Promise<LedgerOutcome | undefined> {
    const charge = await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId, idempotency_key: chargeKey, kind: 'charge' }).first();
    if (!charge) return undefined;
    const amount = -Number(charge.amount);
    const key = `refund:${chargeKey}`;
    try {
      return await this.knex.transaction(async (trx) => {
        const closed = await closeCharge(trx, userId, chargeKey);
        if (onlyIfOpen && !closed) return undefined;
        const [updated] = await trx('users').where({ id: userId }).increment('balance', amount).returning('balance');
        if (!updated) throw new UnknownUser(userId);
        const balance = Number((updated as { balance: string }).balance);
        const [entry] = await trx<LedgerRow>('credit_ledger')
          .insert({
            user_id: userId,
            amount,
            balance_after: balance,
            kind: 'refund',
            operation: charge.operation,
            idempotency_key: key,
            refund_of: charge.id,
            metadata: JSON.stringify({ reason }) as never,
          })
          .returning('*');
        return { entry: entry as LedgerRow, balance, replayed: false };
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      await closeCharge(this.knex, userId, chargeKey);
      const entry = await this.knex<LedgerRow>('credit_ledger').where({ refund_of: charge.id }).first();
      return entry ? { entry, balance: (await this.balance(userId)) ?? 0, replayed: true } : undefined;
    }
  }

  /**
   * The key to charge a call under that a client keyed `base` (its Idempotency-Key): `base` at first, the
   * same key again while that charge stands (a retry rides on it, replayed), and a new one (`base#2`, …)
   * once it was refunded, since the call it paid for failed and a retry is a new attempt to be paid.
   */
  async chargeKeyFor(userId: string, base: string): Promise<string> {
    const latest = await this.knex('credit_ledger as c')
      .where({ 'c.user_id': userId, 'c.kind': 'charge' })
      .andWhere((where) => where.where('c.idempotency_key', base).orWhereLike('c.idempotency_key', `${base}#%`))
      .orderBy('c.id', 'desc')
      .first('c.idempotency_key', this.knex.raw('exists (select 1 from credit_ledger r where r.refund_of = c.id) as refunded'));
    if (!latest) return base;
    if (!latest.refunded) return latest.idempotency_key as string;
    const attempt = Number(/#(\d+)$/.exec(latest.idempotency_key as string)?.[1] ?? 1);
    return `${base}#${attempt + 1}`;
  }

  async history(userId: string, limit: number, offset: number): Promise<{ items: LedgerRow[]; total: number }> {
    const base = this.knex<LedgerRow>('credit_ledger').where({ user_id: userId });
    const [items, [count]] = await Promise.all([
      base.clone().orderBy('id', 'desc').limit(limit).offset(offset),
      base.clone().count<{ count: string }[]>('* as count'),
    ]);
    return { items: items as LedgerRow[], total: Number(count?.count ?? 0) };
  }

  /** The user's ledger in order, a page after `afterId` at a time (the export streams it whole). */
  async ledgerAfter(userId: string, afterId: number, limit: number): Promise<LedgerRow[]> {
    return (await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId }).andWhere('id', '>', afterId).orderBy('id').limit(limit)) as LedgerRow[];
  }

  async ledgerSum(userId: string): Promise<number> {
    const [row] = await this.knex('credit_ledger').where({ user_id: userId }).sum<{ sum: string | null }[]>('amount as sum');
    return Number(row?.sum ?? 0);
  }

  /**
   * A compensating debit for a refunded or disputed payment (the billing service's): it takes what the
   * balance holds, up to the amount, and never more (the balance stays at or above zero, as every charge
   * relies on; docs/billing.md says where the shortfall goes). One idempotency key books it once, whatever
   * the balance later becomes. `taken` is what the balance could cover (0 books a zero entry as the record).
   */
  async debitUpTo(userId: string, amount: number, key: string, operation: string, metadata: object): Promise<LedgerOutcome & { taken: number }> {
    const replayed = await this.replayDebit(userId, key);
    if (replayed) return replayed;
    try {
      // One statement: the row lock of the update orders it after concurrent charges, and the ledger entry
      // records exactly what the update took.
      const result = await this.knex.raw<{ rows: LedgerRow[] }>(
        `with current_balance as (
           select id, balance from users where id = ? for update
         ), debit as (
           update users set balance = users.balance - least(current_balance.balance, ?), updated_at = now()
           from current_balance where users.id = current_balance.id
           returning users.balance as balance_after, current_balance.balance - users.balance as taken
         )
         insert into credit_ledger (user_id, amount, balance_after, kind, operation, idempotency_key, metadata)
         select ?, -debit.taken, debit.balance_after, 'charge', ?, ?, ?::jsonb from debit
         returning *`,
        [userId, amount, userId, operation, key, JSON.stringify({ ...metadata, requested: amount })],
      );
      const entry = result.rows[0];
      if (!entry) throw new UnknownUser(userId);
      return { entry, balance: Number(entry.balance_after), replayed: false, taken: -Number(entry.amount) };
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      return (await this.replayDebit(userId, key))!;
    }
  }

  private async replayDebit(userId: string, key: string): Promise<(LedgerOutcome & { taken: number }) | undefined> {
    const entry = await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId, idempotency_key: key, kind: 'charge' }).first();
    if (!entry) return undefined;
    const row = await this.knex('users').where({ id: userId }).first('balance');
    return { entry, balance: Number(row?.balance ?? 0), replayed: true, taken: -Number(entry.amount) };
  }
}
