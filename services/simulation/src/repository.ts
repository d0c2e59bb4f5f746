// Over 400 lines: runs, steps, calls and budgets settle in shared transactions; the split by area is
// issue 30's, with the other services' repositories.
import { claimIdempotencyKey, type IdempotencyKey, type Knex } from '@tempora/kit/data';
import type { CallRecord } from './domain/model.ts';
import type { StepReport } from './domain/modes/types.ts';
import type { RUN_STATUSES } from './migrations.ts';

export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL: readonly RunStatus[] = ['completed', 'stopped', 'cancelled', 'failed'];

export interface RunRow {
  id: string;
  owner: string;
  caller: string;
  status: RunStatus;
  mode: string;
  fidelity: number;
  template: string | null;
  prompt: string | null;
  mechanisms: string[];
  plan: unknown;
  state: unknown;
  result: Record<string, unknown> | null;
  steps_done: number;
  steps_total: number;
  estimate_micros: number;
  cap_micros: number;
  cost_micros: number;
  input_tokens: number;
  output_tokens: number;
  thinking_tokens: number;
  calls: number;
  budgets: Array<{ budget: string; period: string; amount_micros: number }>;
  partial: { reason: string; detail: string } | null;
  error: { status: number; detail: string; [field: string]: unknown } | null;
  cancel_requested: boolean;
  lease_owner: string | null;
  lease_until: Date | null;
  attempts: number;
  /** The creating request's W3C trace context (traceparent, tracestate); never shown in the run's views. */
  trace: Record<string, string> | null;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

export interface StepRow {
  run_id: string;
  seq: number;
  kind: string;
  label: string;
  detail: Record<string, unknown>;
  cost_micros: number;
  created_at: Date;
}

export interface LedgerRow {
  budget: string;
  period: string;
  spent_micros: number;
  reserved_micros: number;
  runs: number;
}

/** A run the budgets cannot take: which budget, and what it still has. */
export class BudgetRefused extends Error {
  override name = 'BudgetRefused';
  readonly budget: string;
  readonly period: string;
  readonly remainingMicros: number;
  readonly neededMicros: number;
  constructor(budget: string, period: string, remainingMicros: number, neededMicros: number) {
    super(`budget ${budget} has $${(remainingMicros / 1e6).toFixed(6)} left in period ${period}; this run needs $${(neededMicros / 1e6).toFixed(6)}`);
    this.budget = budget;
    this.period = period;
    this.remainingMicros = remainingMicros;
    this.neededMicros = neededMicros;
  }
}

/** pg returns bigint columns as strings: every money and token column becomes a number here. */
const NUMERIC = [
  'estimate_micros',
  'cap_micros',
  'cost_micros',
  'input_tokens',
  'output_tokens',
  'thinking_tokens',
  'spent_micros',
  'reserved_micros',
  'amount_micros',
] as const;
function numbers<T>(row: T): T {
  if (!row) return row;
  const record = row as Record<string, unknown>;
  for (const column of NUMERIC) if (record[column] !== undefined && record[column] !== null) record[column] = Number(record[column]);
  return row;
}

export type NewRun = Pick<
  RunRow,
  'id' | 'owner' | 'caller' | 'mode' | 'fidelity' | 'template' | 'prompt' | 'mechanisms' | 'plan' | 'state' | 'steps_total' | 'estimate_micros' | 'cap_micros'
> &
  Partial<Pick<RunRow, 'trace'>>;

export interface Reservation {
  budget: string;
  period: string;
  limitMicros: number;
  amountMicros: number;
}

const RUN_KEYS = { table: 'simulation_idempotency_keys', column: 'run_id', target: 'simulation_runs' };

/** What creating a run did: created it, or found the run its idempotency key had already created. */
export type Creation = { created: true; run: RunRow } | { created: false; run: RunRow; fingerprint: string };

export class SimulationRepository {
  readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Reserves `amount` against every budget and inserts the run, all in one transaction. Each budget's
   * ledger row is locked (in name order, so concurrent runs never deadlock) before its remainder is read:
   * of any number of concurrent runs, exactly as many start as the budgets have room for.
   *
   * With `idempotency`, the key is claimed first, before any budget is touched. A concurrent request with
   * the same key waits on the key's primary key until this transaction ends: once it commits, that request
   * finds this run (and reserves nothing); if it rolls back (a budget refused the run), the key is free again.
   */
  async createRun(run: NewRun, reservations: Reservation[], idempotency?: IdempotencyKey): Promise<Creation> {
    return this.knex.transaction(async (trx): Promise<Creation> => {
      const earlier = idempotency && (await claimIdempotencyKey<RunRow>(trx, RUN_KEYS, idempotency, run.id));
      if (earlier) return { created: false, run: numbers(earlier.row), fingerprint: earlier.fingerprint };
      const sorted = [...reservations].sort((a, b) => a.budget.localeCompare(b.budget));
      for (const reservation of sorted) {
        await trx.raw('insert into simulation_budget_ledger (budget, period) values (?, ?) on conflict do nothing', [reservation.budget, reservation.period]);
        const ledger = numbers(
          (await trx('simulation_budget_ledger').where({ budget: reservation.budget, period: reservation.period }).forUpdate().first()) as LedgerRow,
        );
        const remaining = reservation.limitMicros - ledger.spent_micros - ledger.reserved_micros;
        if (remaining < reservation.amountMicros)
          throw new BudgetRefused(reservation.budget, reservation.period, Math.max(0, remaining), reservation.amountMicros);
        await trx('simulation_budget_ledger')
          .where({ budget: reservation.budget, period: reservation.period })
          .increment('reserved_micros', reservation.amountMicros);
      }
      const [row] = await trx('simulation_runs')
        .insert({
          ...run,
          mechanisms: JSON.stringify(run.mechanisms),
          plan: JSON.stringify(run.plan),
          state: JSON.stringify(run.state),
          trace: run.trace ? JSON.stringify(run.trace) : null,
          budgets: JSON.stringify(
            reservations.map((reservation) => ({ budget: reservation.budget, period: reservation.period, amount_micros: reservation.amountMicros })),
          ),
        })
        .returning('*');
      if (sorted.length)
        await trx('simulation_budget_reservations').insert(
          sorted.map((reservation) => ({ run_id: run.id, budget: reservation.budget, period: reservation.period, amount_micros: reservation.amountMicros })),
        );
      return { created: true, run: numbers(row as RunRow) };
    });
  }

  async run(id: string): Promise<RunRow | undefined> {
    return numbers((await this.knex('simulation_runs').where({ id }).first()) as RunRow | undefined);
  }

  async listRuns(owner: string, options: { limit: number; offset: number; status?: RunStatus }): Promise<{ items: RunRow[]; total: number }> {
    const base = this.knex('simulation_runs').where({ owner });
    if (options.status) base.andWhere({ status: options.status });
    const [items, counted] = await Promise.all([
      base
        .clone()
        .select(
          'id',
          'owner',
          'status',
          'mode',
          'fidelity',
          'template',
          'prompt',
          'mechanisms',
          'steps_done',
          'steps_total',
          'estimate_micros',
          'cap_micros',
          'cost_micros',
          'input_tokens',
          'output_tokens',
          'thinking_tokens',
          'calls',
          'budgets',
          'partial',
          'error',
          'cancel_requested',
          'created_at',
          'updated_at',
          'started_at',
          'finished_at',
        )
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .limit(options.limit)
        .offset(options.offset),
      base.clone().count<{ count: string }[]>('* as count'),
    ]);
    return { items: (items as RunRow[]).map(numbers), total: Number(counted[0]?.count ?? 0) };
  }

  async steps(runId: string, after = -1): Promise<StepRow[]> {
    return ((await this.knex('simulation_steps').where({ run_id: runId }).andWhere('seq', '>', after).orderBy('seq')) as StepRow[]).map(numbers);
  }

  async calls(runId: string): Promise<Array<CallRecord & { id: number }>> {
    return (await this.knex('simulation_calls').where({ run_id: runId }).orderBy('id')) as Array<CallRecord & { id: number }>;
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
          ...this.totals(trx),
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

  /** A metered call, written as soon as it answers (its run's totals are summed from these rows). */
  async recordCall(runId: string, call: CallRecord): Promise<void> {
    await this.knex('simulation_calls').insert({ run_id: runId, ...call });
  }

  /** The run's money and token totals as the sums of its recorded calls (for an update of simulation_runs). */
  private totals(trx: Knex) {
    const sum = (column: string) => trx.raw(`(select coalesce(sum(${column}), 0) from simulation_calls c where c.run_id = simulation_runs.id)`);
    return {
      cost_micros: sum('cost_micros'),
      input_tokens: sum('input_tokens'),
      output_tokens: sum('output_tokens'),
      thinking_tokens: sum('thinking_tokens'),
      calls: trx.raw('(select count(*) from simulation_calls c where c.run_id = simulation_runs.id)'),
    };
  }

  /** A step's report and the state after it, together; refused (false) when this process no longer holds the run. */
  async saveStep(runId: string, owner: string, seq: number, report: StepReport, state: unknown, costMicros: number): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const updated = await trx('simulation_runs')
        .where({ id: runId, lease_owner: owner, status: 'running' })
        .update({ state: JSON.stringify(state), steps_done: seq + 1, updated_at: trx.fn.now(), ...this.totals(trx) });
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
          ...this.totals(trx),
        })
        .returning('*')) as RunRow[];
      if (!row) return undefined;
      await this.settle(trx, [runId]);
      return numbers(row);
    });
  }

  /**
   * Settles the budgets of runs that end (their rows locked by the caller): each reservation is released
   * and the run's cost, the sum of its recorded calls, added to that budget's spend in the reservation's
   * period. Ledger rows are updated in name order, as createRun locks them, so settlements never deadlock.
   */
  private async settle(trx: Knex.Transaction, runIds: readonly string[]): Promise<void> {
    const rows = (await trx('simulation_budget_reservations as r')
      .whereIn('r.run_id', runIds)
      .select('r.budget', 'r.period')
      .sum({ reserved: 'r.amount_micros' })
      .select(trx.raw('sum((select coalesce(sum(c.cost_micros), 0) from simulation_calls c where c.run_id = r.run_id))::bigint as spent'))
      .count('* as runs')
      .groupBy('r.budget', 'r.period')
      .orderBy([{ column: 'r.budget' }, { column: 'r.period' }])) as Array<{ budget: string; period: string; reserved: string; spent: string; runs: string }>;
    for (const row of rows) {
      await trx('simulation_budget_ledger')
        .where({ budget: row.budget, period: row.period })
        .update({
          reserved_micros: trx.raw('reserved_micros - ?', [Number(row.reserved)]),
          spent_micros: trx.raw('spent_micros + ?', [Number(row.spent)]),
          runs: trx.raw('runs + ?', [Number(row.runs)]),
        });
    }
    await trx('simulation_budget_reservations').whereIn('run_id', runIds).delete();
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
      if (inFlight.length) await this.settle(trx, inFlight);
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

  async requestCancel(runId: string): Promise<RunRow | undefined> {
    const [row] = (await this.knex('simulation_runs')
      .where({ id: runId })
      .whereIn('status', ['queued', 'running'])
      .update({ cancel_requested: true, updated_at: this.knex.fn.now() })
      .returning('*')) as RunRow[];
    return row ? numbers(row) : undefined;
  }

  async ledger(budget: string, period: string): Promise<LedgerRow> {
    const row = (await this.knex('simulation_budget_ledger').where({ budget, period }).first()) as LedgerRow | undefined;
    return numbers(row) ?? { budget, period, spent_micros: 0, reserved_micros: 0, runs: 0 };
  }

  /** Usage of one owner (or of every owner) between two instants: runs, money, tokens, by model. */
  async usage(filter: { owner?: string; budget?: string; from: Date; to: Date }) {
    const runs = this.knex('simulation_runs').where('created_at', '>=', filter.from).andWhere('created_at', '<', filter.to);
    if (filter.owner) runs.andWhere({ owner: filter.owner });
    if (filter.budget) runs.andWhereRaw('budgets @> ?::jsonb', [JSON.stringify([{ budget: filter.budget }])]);
    const [totals, byStatus, byModel] = await Promise.all([
      runs
        .clone()
        .select(
          this.knex.raw('count(*)::int as runs'),
          this.knex.raw('coalesce(sum(cost_micros), 0)::bigint as cost_micros'),
          this.knex.raw('coalesce(sum(input_tokens), 0)::bigint as input_tokens'),
          this.knex.raw('coalesce(sum(output_tokens), 0)::bigint as output_tokens'),
          this.knex.raw('coalesce(sum(calls), 0)::bigint as calls'),
        )
        .first(),
      runs.clone().select('status').count<Array<{ status: string; count: string }>>('* as count').groupBy('status'),
      this.knex('simulation_calls')
        .whereIn('run_id', runs.clone().select('id'))
        .select('priced_as', 'provider')
        .count('* as calls')
        .sum({ cost_micros: 'cost_micros', input_tokens: 'input_tokens', output_tokens: 'output_tokens' })
        .groupBy('priced_as', 'provider')
        .orderBy('priced_as'),
    ]);
    return {
      runs: Number((totals as { runs: number }).runs),
      cost_micros: Number((totals as { cost_micros: string }).cost_micros),
      input_tokens: Number((totals as { input_tokens: string }).input_tokens),
      output_tokens: Number((totals as { output_tokens: string }).output_tokens),
      calls: Number((totals as { calls: string }).calls),
      by_status: Object.fromEntries(byStatus.map((row) => [row.status, Number(row.count)])),
      by_model: (byModel as Array<Record<string, string>>).map((row) => ({
        model: row.priced_as!,
        provider: row.provider!,
        calls: Number(row.calls),
        cost_micros: Number(row.cost_micros),
        input_tokens: Number(row.input_tokens),
        output_tokens: Number(row.output_tokens),
      })),
    };
  }
}
