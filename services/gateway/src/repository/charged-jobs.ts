import type { Knex } from '@tempora/kit/data';
import { closeCharge } from './open-charges.ts';

export interface ChargedJobRow {
  charge_key: string;
  user_id: string;
  upstream: string;
  /** The job's path (and query) on its upstream. */
  location: string;
  checks: number;
}

/** How a charge stands now: its job still followed, refunded (and why), or standing. */
export interface ChargeStanding {
  state: 'following' | 'refunded' | 'stands';
  charged: number;
  refunded: number;
  reason: string | null;
}

const seconds = (ms: number) => ms / 1000;

/** The jobs charged calls started, followed until they end (`charged_jobs`), and how their charges stand. */
export class ChargedJobRows {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** Follows the job at `location` that the charge `chargeKey` paid for, first checked after `checkMs`. */
  async follow(userId: string, chargeKey: string, upstream: string, location: string, checkMs: number): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await trx('charged_jobs')
        .insert({
          charge_key: chargeKey,
          user_id: userId,
          upstream,
          location,
          check_after: trx.raw('now() + make_interval(secs => ?)', [seconds(checkMs)]),
        })
        .onConflict(['user_id', 'charge_key'])
        .ignore();
      // Followed from now on: the job's end settles the charge, no longer the call's.
      await closeCharge(trx, userId, chargeKey);
    });
  }

  /** The charge booked under `chargeKey` as it stands; undefined when there is none. */
  async standing(userId: string, chargeKey: string): Promise<ChargeStanding | undefined> {
    const row = await this.knex('credit_ledger as c')
      .leftJoin('credit_ledger as r', 'r.refund_of', 'c.id')
      .where({ 'c.user_id': userId, 'c.idempotency_key': chargeKey, 'c.kind': 'charge' })
      .first<{ charged: string; refunded: string | null; reason: string | null; following: boolean } | undefined>(
        'c.amount as charged',
        'r.amount as refunded',
        this.knex.raw(`r.metadata->>'reason' as reason`),
        this.knex.raw('exists (select 1 from charged_jobs j where j.charge_key = c.idempotency_key and j.user_id = c.user_id) as following'),
      );
    if (!row) return undefined;
    const refunded = row.refunded === null ? 0 : Number(row.refunded);
    const state = row.refunded !== null ? 'refunded' : row.following ? 'following' : 'stands';
    return { state, charged: -Number(row.charged), refunded, reason: row.refunded !== null ? row.reason : null };
  }

  /** Up to `limit` jobs due for a check, leased to this replica for `leaseMs` (and counted as checked once more). */
  async claimDue(leaseMs: number, limit: number): Promise<ChargedJobRow[]> {
    const result = await this.knex.raw<{ rows: ChargedJobRow[] }>(
      `update charged_jobs set check_after = now() + make_interval(secs => ?), checks = checks + 1
       where (user_id, charge_key) in (select user_id, charge_key from charged_jobs where check_after <= now() order by check_after limit ? for update skip locked)
       returning charge_key, user_id, upstream, location, checks`,
      [seconds(leaseMs), limit],
    );
    return result.rows;
  }

  /** The job is checked again after `delayMs`. */
  async postpone(job: ChargedJobRow, delayMs: number): Promise<void> {
    await this.knex('charged_jobs')
      .where({ user_id: job.user_id, charge_key: job.charge_key })
      .update({ check_after: this.knex.raw('now() + make_interval(secs => ?)', [seconds(delayMs)]) });
  }

  async forget(job: ChargedJobRow): Promise<void> {
    await this.knex('charged_jobs').where({ user_id: job.user_id, charge_key: job.charge_key }).delete();
  }
}
