import type { Knex } from '@tempora/kit/data';
import type { CallRecord } from '../domain/model.ts';
import type { StepReport } from '../domain/modes/types.ts';
import { settle } from './budgets.ts';
import { numbers, type RunRow, type RunStatus } from './rows.ts';

/** The run's money and token totals as the sums of its recorded calls (for an update of simulation_runs). */
function totals(trx: Knex) {
  const sum = (column: string) => trx.raw(`(select coalesce(sum(${column}), 0) from simulation_calls c where c.run_id = simulation_runs.id)`);
  return {
    cost_micros: sum('cost_micros'),
    input_tokens: sum('input_tokens'),
    output_tokens: sum('output_tokens'),
    thinking_tokens: sum('thinking_tokens'),
    calls: trx.raw('(select count(*) from simulation_calls c where c.run_id = simulation_runs.id)'),
  };
}

/**
 * The runner's writes: claims and leases, metered calls, steps, a run's end. Every write of a run is
 * fenced by its row (the lease owner in an update of the run, the run a call references), so a process
 * that lost the run, or a run deleted meanwhile, writes nothing back.
 */
export class Execution {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Takes up to `limit` runs that are queued, or running under a lease that lapsed (their process died):
   * `for update skip locked`, so two replicas never take the same run.
   */
  async claim(owner: string, limit: number, leaseMs: number): Promise<RunRow[]> {
    if (limit <= 0) return [];
    const rows = await this.knex.transaction(async (trx) => {
      const ids = (await trx('simulation_runs')
        .select('id')
        .whereIn('status', ['queued', 'running'])
        .andWhere((where) => where.whereNull('lease_until').orWhere('lease_until', '<', trx.fn.now()))
        .orderBy('created_at')
        .limit(limit)
        .forUpdate()
        .skipLocked()) as Array<{ id: string }>;
      if (!ids.length) return [];
      return trx('simulation_runs')
        .whereIn(
          'id',
          ids.map((row) => row.id),
        )
        .update({
          status: 'running',
          lease_owner: owner,
          lease_until: trx.raw(`now() + (? * interval '1 millisecond')`, [leaseMs]),
          attempts: trx.raw('attempts + 1'),
          started_at: trx.raw('coalesce(started_at, now())'),
          updated_at: trx.fn.now(),
          // A resumed run is charged for every call recorded before its process died, its unsaved step's too.
          ...totals(trx),
        })
        .returning('*');
    });
    return (rows as RunRow[]).map(numbers);
  }

  /** Extends the leases this process holds; answers which of them were asked to cancel, and which it lost. */
  async renew(owner: string, ids: string[], leaseMs: number): Promise<{ held: Map<string, boolean> }> {
    const held = new Map<string, boolean>();
    if (!ids.length) return { held };
    const rows = (await this.knex('simulation_runs')
      .whereIn('id', ids)
      .andWhere({ lease_owner: owner, status: 'running' })
      .update({ lease_until: this.knex.raw(`now() + (? * interval '1 millisecond')`, [leaseMs]) })
      .returning(['id', 'cancel_requested'])) as Array<{ id: string; cancel_requested: boolean }>;
    for (const row of rows) held.set(row.id, row.cancel_requested);
    return { held };
  }

  /** Hands back the runs this process holds (at shutdown): any replica may resume them at once. */
  async release(owner: string): Promise<void> {
    await this.knex('simulation_runs').where({ lease_owner: owner, status: 'running' }).update({ lease_owner: null, lease_until: null });
  }

  /** A metered call, written as soon as it answers (its run's totals are summed from these rows). */
  async recordCall(runId: string, call: CallRecord): Promise<void> {
    await this.knex('simulation_calls').insert({ run_id: runId, ...call });
  }

  /** A step's report and the state after it, together; refused (false) when this process no longer holds the run. */
  async saveStep(runId: string, owner: string, seq: number, report: StepReport, state: unknown, costMicros: number): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const updated = await trx('simulation_runs')
        .where({ id: runId, lease_owner: owner, status: 'running' })
        .update({ state: JSON.stringify(state), steps_done: seq + 1, updated_at: trx.fn.now(), ...totals(trx) });
      if (!updated) return false;
      await trx('simulation_steps').insert({
        run_id: runId,
        seq,
        kind: report.kind,
        label: report.label,
        detail: JSON.stringify(report.detail),
        cost_micros: costMicros,
      });
      return true;
    });
  }

  /**
   * Ends a run and settles its budgets in one transaction: each reservation is released and the run's
   * actual cost is added to that budget's spend in the reservation's period. `owner` fences the write to
   * the process that holds the run (null: a run nobody runs, e.g. cancelled while queued).
   */
  async finish(
    runId: string,
    owner: string | null,
    outcome: { status: RunStatus; result?: Record<string, unknown> | null; partial?: RunRow['partial']; error?: RunRow['error'] },
  ): Promise<RunRow | undefined> {
    return this.knex.transaction(async (trx) => {
      const query = trx('simulation_runs').where({ id: runId }).whereIn('status', ['queued', 'running']);
      if (owner) query.andWhere({ lease_owner: owner });
      const [row] = (await query
        .update({
          status: outcome.status,
          result: outcome.result === undefined ? null : JSON.stringify(outcome.result),
          partial: outcome.partial ? JSON.stringify(outcome.partial) : null,
          error: outcome.error ? JSON.stringify(outcome.error) : null,
          lease_owner: null,
          lease_until: null,
          finished_at: trx.fn.now(),
          updated_at: trx.fn.now(),
          ...totals(trx),
        })
        .returning('*')) as RunRow[];
      if (!row) return undefined;
      await settle(trx, [runId]);
      return numbers(row);
    });
  }
}
