import type { BudgetSource } from './budget-source.ts';
import { type Budget, microsToUsd, periodKey, usdToMicros } from './domain/budgets.ts';
import type { BudgetFigures } from './metrics.ts';
import type { BudgetLedger, UsageFilter } from './repository/index.ts';

interface BudgetStatus {
  name: string;
  scope: string;
  period: Budget['period'];
  current_period: string;
  limit_usd: number;
  per_run_max_usd: number | null;
  spent_usd: number;
  reserved_usd: number;
  remaining_usd: number;
  runs: number;
  alert_thresholds: number[];
  alerts_crossed: number[];
  exhausted: boolean;
}

/** The budgets' standing (spent, reserved, remaining) and the usage runs add up to: everything the budget routes do, without Koa. */
export class BudgetStanding {
  private readonly ledger: BudgetLedger;
  private readonly source: BudgetSource;

  constructor(options: { ledger: BudgetLedger; source: BudgetSource }) {
    this.ledger = options.ledger;
    this.source = options.source;
  }

  /** One page of the budgets in force, by name, with the files that did not parse (each keeps its last good version). */
  async page(page: { limit: number; offset: number }) {
    const all = this.source.all;
    return {
      items: await Promise.all(all.slice(page.offset, page.offset + page.limit).map((budget) => this.status(budget))),
      total: all.length,
      errors: this.source.errors,
      loaded_at: this.source.loadedAt?.toISOString() ?? null,
    };
  }

  named(name: string): Budget | undefined {
    return this.source.get(name);
  }

  async status(budget: Budget, period = periodKey(budget.period, new Date())): Promise<BudgetStatus> {
    const ledger = await this.ledger.ledger(budget.name, period);
    const limit = usdToMicros(budget.limitUsd);
    const spentFraction = limit > 0 ? ledger.spent_micros / limit : ledger.spent_micros > 0 ? 1 : 0;
    return {
      name: budget.name,
      scope: budget.scope,
      period: budget.period,
      current_period: period,
      limit_usd: budget.limitUsd,
      per_run_max_usd: budget.perRunMaxUsd ?? null,
      spent_usd: microsToUsd(ledger.spent_micros),
      reserved_usd: microsToUsd(ledger.reserved_micros),
      remaining_usd: microsToUsd(Math.max(0, limit - ledger.spent_micros - ledger.reserved_micros)),
      runs: ledger.runs,
      alert_thresholds: budget.alertThresholds,
      alerts_crossed: budget.alertThresholds.filter((threshold) => spentFraction >= threshold),
      exhausted: ledger.spent_micros >= limit,
    };
  }

  /** Every budget's standing in its current period, as the metrics show it. */
  async figures(): Promise<BudgetFigures[]> {
    return Promise.all(
      this.source.all.map(async (budget) => {
        const status = await this.status(budget);
        return {
          budget: status.name,
          period: status.current_period,
          limitUsd: status.limit_usd,
          spentUsd: status.spent_usd,
          reservedUsd: status.reserved_usd,
          remainingUsd: status.remaining_usd,
        };
      }),
    );
  }

  /** Usage between two instants (of an owner, of a budget's runs, or of every run): runs, dollars, tokens, calls by model. */
  async usage(filter: UsageFilter) {
    const usage = await this.ledger.usage(filter);
    return {
      user: filter.owner ?? null,
      budget: filter.budget ?? null,
      from: filter.from.toISOString(),
      to: filter.to.toISOString(),
      runs: usage.runs,
      by_status: usage.by_status,
      cost_usd: microsToUsd(usage.cost_micros),
      tokens: { input: usage.input_tokens, output: usage.output_tokens },
      calls: usage.calls,
      by_model: usage.by_model.map(({ cost_micros, ...row }) => ({ ...row, cost_usd: microsToUsd(cost_micros) })),
    };
  }
}
