import { claimIdempotencyKey, type IdempotencyKey, type Knex } from '@tempora/kit/data';
import type { CallRecord } from '../domain/model.ts';
import { type Reservation, reserve } from './budgets.ts';
import { type NewRun, numbers, type RunRow, type RunStatus, type StepRow } from './rows.ts';

const RUN_KEYS = { table: 'simulation_idempotency_keys', column: 'run_id', target: 'simulation_runs' };

/** What creating a run did: created it, or found the run its idempotency key had already created. */
type Creation = { created: true; run: RunRow } | { created: false; run: RunRow; fingerprint: string };

/** The columns of a run in a list: without its plan, state, result and lease. */
const LISTED = [
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
];

/** Runs as their requests see them: created, read, listed, asked to cancel. */
export class Runs {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Reserves the run's budgets and inserts the run, all in one transaction (budgets.ts, `reserve`).
   *
   * With `idempotency`, the key is claimed first, before any budget is touched. A concurrent request with
   * the same key waits on the key's primary key until this transaction ends: once it commits, that request
   * finds this run (and reserves nothing); if it rolls back (a budget refused the run), the key is free again.
   */
  async create(run: NewRun, reservations: Reservation[], idempotency?: IdempotencyKey): Promise<Creation> {
    return this.knex.transaction(async (trx): Promise<Creation> => {
      const earlier = idempotency && (await claimIdempotencyKey<RunRow>(trx, RUN_KEYS, idempotency, run.id));
      if (earlier) return { created: false, run: numbers(earlier.row), fingerprint: earlier.fingerprint };
      const reserved = await reserve(trx, reservations);
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
      if (reserved.length)
        await trx('simulation_budget_reservations').insert(
          reserved.map((reservation) => ({ run_id: run.id, budget: reservation.budget, period: reservation.period, amount_micros: reservation.amountMicros })),
        );
      return { created: true, run: numbers(row as RunRow) };
    });
  }

  async get(id: string): Promise<RunRow | undefined> {
    return numbers((await this.knex('simulation_runs').where({ id }).first()) as RunRow | undefined);
  }

  async list(owner: string, options: { limit: number; offset: number; status?: RunStatus }): Promise<{ items: RunRow[]; total: number }> {
    const base = this.knex('simulation_runs').where({ owner });
    if (options.status) base.andWhere({ status: options.status });
    const [items, counted] = await Promise.all([
      base
        .clone()
        .select(...LISTED)
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

  /** The run's completed steps after the step `after`, in order. */
  async steps(runId: string, after = -1): Promise<StepRow[]> {
    return ((await this.knex('simulation_steps').where({ run_id: runId }).andWhere('seq', '>', after).orderBy('seq')) as StepRow[]).map(numbers);
  }

  async calls(runId: string): Promise<Array<CallRecord & { id: number }>> {
    return (await this.knex('simulation_calls').where({ run_id: runId }).orderBy('id')) as Array<CallRecord & { id: number }>;
  }

  /** Marks a run that has not ended as asked to cancel; undefined when it has ended (or does not exist). */
  async requestCancel(runId: string): Promise<RunRow | undefined> {
    const [row] = (await this.knex('simulation_runs')
      .where({ id: runId })
      .whereIn('status', ['queued', 'running'])
      .update({ cancel_requested: true, updated_at: this.knex.fn.now() })
      .returning('*')) as RunRow[];
    return row ? numbers(row) : undefined;
  }
}
