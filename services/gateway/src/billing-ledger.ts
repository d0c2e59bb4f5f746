import type { Knex } from '@tempora/kit/data';
import { type LedgerOutcome, type LedgerRow, UnknownUser } from './repository.ts';

const isUniqueViolation = (error: unknown) => (error as { code?: string }).code === '23505';

/**
 * The ledger entries the billing service books on a user's behalf beside the repository's own: a
 * compensating debit for a refunded or disputed payment takes what the balance holds, up to the amount,
 * and never more (the balance stays at or above zero, as every charge relies on; docs/billing.md says
 * where the shortfall goes). One idempotency key books it once, whatever the balance later becomes.
 */
export class BillingLedger {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** Debits up to `amount`; `taken` is what the balance could cover (0 books a zero entry as the record). */
  async debitUpTo(userId: string, amount: number, key: string, operation: string, metadata: object): Promise<LedgerOutcome & { taken: number }> {
    const replayed = await this.replay(userId, key);
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
      return (await this.replay(userId, key))!;
    }
  }

  private async replay(userId: string, key: string): Promise<(LedgerOutcome & { taken: number }) | undefined> {
    const entry = await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId, idempotency_key: key, kind: 'charge' }).first();
    if (!entry) return undefined;
    const row = await this.knex('users').where({ id: userId }).first('balance');
    return { entry, balance: Number(row?.balance ?? 0), replayed: true, taken: -Number(entry.amount) };
  }
}
