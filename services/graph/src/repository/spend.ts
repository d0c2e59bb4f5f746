import type { Knex } from '@tempora/kit/data';

/** What each worker role spent per UTC day (`worker_spend`), shared by its replicas: the ledger behind SpendBudget. */
export class WorkerSpend {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Adds `usd` to what `role` spent on `day` unless the total would pass `limitUsd`, in one statement, so
   * replicas sharing a budget cannot overshoot it together. False when refused.
   */
  async charge(role: string, day: string, usd: number, limitUsd: number): Promise<boolean> {
    if (usd > limitUsd) return false;
    const { rows } = (await this.knex.raw(
      `insert into worker_spend (day, role, spent_usd) values (?, ?, ?)
       on conflict (day, role) do update set spent_usd = worker_spend.spent_usd + excluded.spent_usd
        where worker_spend.spent_usd + excluded.spent_usd <= ?
       returning spent_usd`,
      [day, role, usd, limitUsd],
    )) as { rows: unknown[] };
    return rows.length > 0;
  }

  /** Corrects a charge made on an estimate once the real cost is known. */
  async adjust(role: string, day: string, deltaUsd: number): Promise<void> {
    await this.knex('worker_spend')
      .where({ role, day })
      .update({ spent_usd: this.knex.raw('greatest(0, spent_usd + ?)', [deltaUsd]) });
  }

  async spent(role: string, day: string): Promise<number> {
    const row = (await this.knex('worker_spend').where({ role, day }).first('spent_usd')) as { spent_usd: string } | undefined;
    return Number(row?.spent_usd ?? 0);
  }
}
