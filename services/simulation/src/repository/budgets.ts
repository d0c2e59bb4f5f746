import type { Knex } from '@tempora/kit/data';
import { type LedgerRow, numbers } from './rows.ts';

export interface Reservation {
  budget: string;
  period: string;
  limitMicros: number;
  amountMicros: number;
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

/**
 * Reserves each amount against its budget, in the caller's transaction. Each budget's ledger row is locked
 * (in name order, so concurrent runs never deadlock) before its remainder is read: of any number of
 * concurrent runs, exactly as many start as the budgets have room for. Answers the reservations in that order.
 */
export async function reserve(trx: Knex.Transaction, reservations: readonly Reservation[]): Promise<Reservation[]> {
  const sorted = [...reservations].sort((a, b) => a.budget.localeCompare(b.budget));
  for (const reservation of sorted) {
    await trx.raw('insert into simulation_budget_ledger (budget, period) values (?, ?) on conflict do nothing', [reservation.budget, reservation.period]);
    const ledger = numbers(
      (await trx('simulation_budget_ledger').where({ budget: reservation.budget, period: reservation.period }).forUpdate().first()) as LedgerRow,
    );
    const remaining = reservation.limitMicros - ledger.spent_micros - ledger.reserved_micros;
    if (remaining < reservation.amountMicros) throw new BudgetRefused(reservation.budget, reservation.period, Math.max(0, remaining), reservation.amountMicros);
    await trx('simulation_budget_ledger')
      .where({ budget: reservation.budget, period: reservation.period })
      .increment('reserved_micros', reservation.amountMicros);
  }
  return sorted;
}

/**
 * Settles the budgets of runs that end (their rows locked by the caller): each reservation is released
 * and the run's cost, the sum of its recorded calls, added to that budget's spend in the reservation's
 * period. Ledger rows are updated in name order, as `reserve` locks them, so settlements never deadlock.
 */
export async function settle(trx: Knex.Transaction, runIds: readonly string[]): Promise<void> {
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

/** Usage between two instants, of one owner, of the runs charged to one budget, or of every run. */
export interface UsageFilter {
  owner?: string;
  budget?: string;
  from: Date;
  to: Date;
}

/** The budgets' ledger and the usage the runs and their calls add up to. */
export class BudgetLedger {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  async ledger(budget: string, period: string): Promise<LedgerRow> {
    const row = (await this.knex('simulation_budget_ledger').where({ budget, period }).first()) as LedgerRow | undefined;
    return numbers(row) ?? { budget, period, spent_micros: 0, reserved_micros: 0, runs: 0 };
  }

  /** Runs, money, tokens, by status and by model. */
  async usage(filter: UsageFilter) {
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
