import { type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { CallRecord } from '../domain/model.ts';
import { settle } from './budgets.ts';
import { numbers, type RunRow, type StepRow } from './rows.ts';

/** Where an export's page starts: past the row created at `at` (the kit's positionTime) with this id. */
type Position = { at: string; id: string };
/** A row with its creation time as the kit's positionTime selects it, for the row's export position. */
type Positioned<T> = T & { position_at: string };
type CallRow = CallRecord & { id: string; run_id: string; created_at: Date };
type KeyRow = { key: string; run_id: string; created_at: Date };

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

  /** Up to `limit` of the owner's runs after the position `after`, oldest first (an export's keyset pages). */
  async ownerRuns(owner: string, after: Position | undefined, limit: number): Promise<Positioned<RunRow>[]> {
    const query = this.knex('simulation_runs').select('*', positionTime(this.knex, 'created_at')).where({ owner }).limit(limit);
    return ((await oldestFirst(query, ['created_at', 'id'], after && [after.at, after.id])) as Positioned<RunRow>[]).map(numbers);
  }

  /** Up to `limit` steps of the owner's runs after the step `after`, oldest first, then by run and sequence. */
  async ownerSteps(owner: string, after: { at: string; runId: string; seq: number } | undefined, limit: number): Promise<Positioned<StepRow>[]> {
    const query = this.knex('simulation_steps as s')
      .join('simulation_runs as r', 'r.id', 's.run_id')
      .where('r.owner', owner)
      .select('s.*', positionTime(this.knex, 's.created_at'))
      .limit(limit);
    const steps = await oldestFirst(query, ['s.created_at', 's.run_id', 's.seq'], after && [after.at, after.runId, after.seq]);
    return (steps as Positioned<StepRow>[]).map(numbers);
  }

  /** Up to `limit` metered calls of the owner's runs after the position `after`, oldest first, then by id. */
  async ownerCalls(owner: string, after: Position | undefined, limit: number): Promise<Positioned<CallRow>[]> {
    const query = this.knex('simulation_calls as c')
      .join('simulation_runs as r', 'r.id', 'c.run_id')
      .where('r.owner', owner)
      .select('c.*', positionTime(this.knex, 'c.created_at'))
      .limit(limit);
    const calls = await oldestFirst(query, ['c.created_at', 'c.id'], after && [after.at, after.id]);
    return (calls as Positioned<CallRow>[]).map(numbers);
  }

  /** Up to `limit` of the owner's idempotency keys after the position `after`, oldest first, then by key byte by byte. */
  async ownerIdempotencyKeys(owner: string, after: Position | undefined, limit: number): Promise<Positioned<KeyRow>[]> {
    const query = this.knex('simulation_idempotency_keys')
      .where({ owner })
      .select('key', 'run_id', 'created_at', positionTime(this.knex, 'created_at'))
      .limit(limit);
    // Collation "C": the order of the bytes, whatever the database's locale would make of case and punctuation.
    return (await oldestFirst(query, ['created_at', 'key collate "C"'], after && [after.at, after.id])) as Positioned<KeyRow>[];
  }
}
