import type { Knex } from '@tempora/kit/data';

/** Ends a charge's open state (its call delivered, or a job follows it now); whether it was open. */
export async function closeCharge(trx: Knex, userId: string, chargeKey: string): Promise<boolean> {
  return (await trx('open_charges').where({ user_id: userId, charge_key: chargeKey }).delete()) > 0;
}

/** The charges whose calls have not settled yet (`open_charges`), each with the time by which it must. */
export class OpenCharges {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

  async isChargeOpen(userId: string, chargeKey: string): Promise<boolean> {
    return (await this.knex('open_charges').where({ user_id: userId, charge_key: chargeKey }).first('charge_key')) !== undefined;
  }

  closeCharge(userId: string, chargeKey: string): Promise<boolean> {
    return closeCharge(this.knex, userId, chargeKey);
  }

  /**
   * Charges left open past their settle_by, leased to this replica for `leaseMs` (another takes them up
   * after that if this one stops too).
   */
  async leaseUnsettledCharges(leaseMs: number, limit: number): Promise<{ user_id: string; charge_key: string }[]> {
    const result = await this.knex.raw<{ rows: { user_id: string; charge_key: string }[] }>(
      `update open_charges set settle_by = now() + make_interval(secs => ?)
       where (user_id, charge_key) in (select user_id, charge_key from open_charges where settle_by <= now() order by settle_by limit ? for update skip locked)
       returning user_id, charge_key`,
      [leaseMs / 1000, limit],
    );
    return result.rows;
  }
}
