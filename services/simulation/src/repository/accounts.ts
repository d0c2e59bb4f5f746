import type { Knex } from '@tempora/kit/data';
import type { CallRecord } from '../domain/model.ts';
import { settle } from './budgets.ts';
import { numbers, type RunRow, type StepRow } from './rows.ts';

/** Everything held of one owner (an account): deleted at once, exported in keyset pages. */
export class Accounts {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Deletes everything held of `owner`, in one transaction: runs (prompts, plans, results), their steps
   * and metered calls, their idempotency keys, and the ledger of `accountBudgets` (the budgets scoped to
   * this account). Runs in flight are locked first and settled as a cancellation would settle them, so no
   * budget keeps a reservation; a runner still executing one then finds its row gone, and as every write
   * of a run is fenced by that row (an update of the run, a call referencing it), nothing is written back.
   */
  async deleteOwner(
    owner: string,
    accountBudgets: readonly string[],
  ): Promise<{ deleted: { runs: number; steps: number; calls: number; idempotency_keys: number; budget_ledger: number }; inFlight: string[] }> {
    return this.knex.transaction(async (trx) => {
      const inFlight = (
        (await trx('simulation_runs').select('id').where({ owner }).whereIn('status', ['queued', 'running']).orderBy('id').forUpdate()) as Array<{ id: string }>
      ).map((row) => row.id);
      if (inFlight.length) await settle(trx, inFlight);
      const runs = () => trx('simulation_runs').select('id').where({ owner });
      const deleted = {
        steps: await trx('simulation_steps').whereIn('run_id', runs()).delete(),
        calls: await trx('simulation_calls').whereIn('run_id', runs()).delete(),
        idempotency_keys: await trx('simulation_idempotency_keys').where({ owner }).delete(),
        runs: await trx('simulation_runs').where({ owner }).delete(),
        budget_ledger: accountBudgets.length ? await trx('simulation_budget_ledger').whereIn('budget', accountBudgets).delete() : 0,
      };
      return { deleted, inFlight };
    });
  }

  /** Up to `limit` of the owner's runs after the id `after`, by id (an export's keyset pages). */
  async ownerRuns(owner: string, after: string | undefined, limit: number): Promise<RunRow[]> {
    const query = this.knex('simulation_runs').where({ owner }).orderBy('id').limit(limit);
    if (after) query.andWhere('id', '>', after);
    return ((await query) as RunRow[]).map(numbers);
  }

  /** Up to `limit` steps of the owner's runs after the step `after`, by run and sequence. */
  async ownerSteps(owner: string, after: { runId: string; seq: number } | undefined, limit: number): Promise<StepRow[]> {
    const query = this.knex('simulation_steps as s')
      .join('simulation_runs as r', 'r.id', 's.run_id')
      .where('r.owner', owner)
      .select('s.*')
      .orderBy([{ column: 's.run_id' }, { column: 's.seq' }])
      .limit(limit);
    if (after) query.andWhereRaw('(s.run_id, s.seq) > (?::uuid, ?)', [after.runId, after.seq]);
    return ((await query) as StepRow[]).map(numbers);
  }

  /** Up to `limit` metered calls of the owner's runs after the call id `after`, by id. */
  async ownerCalls(owner: string, after: string | undefined, limit: number): Promise<Array<CallRecord & { id: string; run_id: string; created_at: Date }>> {
    const query = this.knex('simulation_calls as c')
      .join('simulation_runs as r', 'r.id', 'c.run_id')
      .where('r.owner', owner)
      .select('c.*')
      .orderBy('c.id')
      .limit(limit);
    if (after) query.andWhere('c.id', '>', after);
    return ((await query) as Array<CallRecord & { id: string; run_id: string; created_at: Date }>).map(numbers);
  }

  /** Up to `limit` of the owner's idempotency keys after the key `after`, by key. */
  async ownerIdempotencyKeys(owner: string, after: string | undefined, limit: number): Promise<Array<{ key: string; run_id: string; created_at: Date }>> {
    const query = this.knex('simulation_idempotency_keys').where({ owner }).select('key', 'run_id', 'created_at').orderBy('key').limit(limit);
    if (after !== undefined) query.andWhere('key', '>', after);
    return (await query) as Array<{ key: string; run_id: string; created_at: Date }>;
  }
}
