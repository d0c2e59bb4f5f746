import type { Knex } from '@tempora/kit/data';
import type { Tier } from '../domain/catalogue.ts';
import { leaseEnd } from './lease.ts';
import type { AccountRow } from './rows.ts';

/** Accounts (`billing_accounts`): each user's tier, whether the gateway has it yet, and their debt. */
export class Accounts {
  private readonly knex: Knex;
  private readonly leaseMs: number;

  constructor(knex: Knex, leaseMs: number) {
    this.knex = knex;
    this.leaseMs = leaseMs;
  }

  /** The account row, locked for the transaction; created (free, no debt) when it did not exist. */
  async lock(userId: string): Promise<AccountRow> {
    await this.knex('billing_accounts').insert({ user_id: userId }).onConflict('user_id').ignore();
    return (await this.knex<AccountRow>('billing_accounts').where({ user_id: userId }).forUpdate().first())!;
  }

  async get(userId: string): Promise<AccountRow | undefined> {
    return this.knex<AccountRow>('billing_accounts').where({ user_id: userId }).first();
  }

  async setDebt(userId: string, debt: number): Promise<void> {
    await this.update(userId, { debt });
  }

  /** A new tier, to be pushed to the gateway now. */
  async setTier(userId: string, tier: Tier): Promise<void> {
    await this.update(userId, { tier, push_next_attempt_at: this.knex.fn.now(), push_attempts: 0, push_error: null });
  }

  private async update(userId: string, fields: { [K in keyof Omit<AccountRow, 'user_id'>]?: AccountRow[K] | Knex.Raw }): Promise<void> {
    await this.knex('billing_accounts')
      .where({ user_id: userId })
      .update({ ...fields, updated_at: this.knex.fn.now() });
  }

  /** An operator's re-sync: the tier goes to the gateway again, now. */
  async forceTierPush(userId: string): Promise<void> {
    await this.knex('billing_accounts').insert({ user_id: userId }).onConflict('user_id').ignore();
    await this.knex('billing_accounts')
      .where({ user_id: userId })
      .update({ push_forced: true, push_next_attempt_at: this.knex.fn.now(), push_error: null, push_attempts: 0 });
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
      .update({ push_lease_until: leaseEnd(this.knex, this.leaseMs) }, ['user_id', 'tier', 'push_attempts']);
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
}
