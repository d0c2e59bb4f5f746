import { type Metrics, zeroed } from '@tempora/kit/observability';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { MODES } from './domain/vocabulary.ts';
import { TERMINAL } from './repository/index.ts';

export interface BudgetFigures {
  budget: string;
  period: string;
  limitUsd: number;
  spentUsd: number;
  reservedUsd: number;
  remainingUsd: number;
}

/** Where the gauges read their figures when scraped. */
interface LiveFigures {
  activeRuns: () => number;
  budgets: () => Promise<BudgetFigures[]>;
}

/** Runs by outcome, model calls, tokens and dollars by model, and every budget's figures for its current period. */
export class SimulationMetrics {
  readonly runsStarted: Counter<'mode'>;
  readonly runsFinished: Counter<'mode' | 'status'>;
  readonly runDuration: Histogram<'mode' | 'status'>;
  readonly stepDuration: Histogram<'mode' | 'kind'>;
  readonly calls: Counter<'action' | 'provider' | 'model'>;
  readonly tokens: Counter<'model' | 'direction'>;
  readonly costUsd: Counter<'model'>;
  readonly budgetRefusals: Counter<'budget'>;
  readonly exposureRefusals: Counter;

  constructor(metrics: Metrics, live: LiveFigures) {
    const registers = [metrics.registry];
    this.runsStarted = new Counter({
      name: 'simulation_runs_started_total',
      help: 'Runs accepted (their budgets reserved), by mode',
      labelNames: ['mode'],
      registers,
    });
    this.runsFinished = new Counter({
      name: 'simulation_runs_finished_total',
      help: 'Runs ended, by mode and status (completed, stopped, cancelled, failed)',
      labelNames: ['mode', 'status'],
      registers,
    });
    this.runDuration = new Histogram({
      name: 'simulation_run_duration_seconds',
      help: "From a run's first claim to its end, by mode and status",
      labelNames: ['mode', 'status'],
      buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900],
      registers,
    });
    this.stepDuration = new Histogram({
      name: 'simulation_step_duration_seconds',
      help: 'Duration of a run step (its model calls included), by mode and step kind',
      labelNames: ['mode', 'kind'],
      buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
      registers,
    });
    this.calls = new Counter({
      name: 'simulation_model_calls_total',
      help: 'Metered model calls, by action, provider and model',
      labelNames: ['action', 'provider', 'model'],
      registers,
    });
    this.tokens = new Counter({
      name: 'simulation_model_tokens_total',
      help: 'Tokens of metered calls, by priced model and direction (input, output)',
      labelNames: ['model', 'direction'],
      registers,
    });
    this.costUsd = new Counter({
      name: 'simulation_model_cost_usd_total',
      help: 'Dollars of metered calls at the price table, by priced model',
      labelNames: ['model'],
      registers,
    });
    this.budgetRefusals = new Counter({
      name: 'simulation_budget_refusals_total',
      help: 'Runs refused because a budget had no room for their estimate, by budget',
      labelNames: ['budget'],
      registers,
    });
    this.exposureRefusals = new Counter({ name: 'simulation_exposure_refusals_total', help: 'Model answers refused by the exposure validator', registers });
    // Runs by mode and ending are exported from the start at 0, so a rare ending reads as "none" rather than
    // no data. Models, budgets and the step kinds of each mode stay for traffic to create.
    zeroed(this.runsStarted, { mode: MODES });
    zeroed(this.runsFinished, { mode: MODES, status: TERMINAL });
    zeroed(this.runDuration, { mode: MODES, status: TERMINAL });
    liveGauges(registers, live);
  }
}

/** The gauges read at each scrape: runs in this process and every budget's figures for its current period. */
function liveGauges(registers: Registry[], live: LiveFigures): void {
  new Gauge({
    name: 'simulation_runs_active',
    help: 'Runs executing in this process',
    registers,
    collect() {
      this.set(live.activeRuns());
    },
  });
  const budgetGauge = (name: string, help: string, field: keyof Omit<BudgetFigures, 'budget' | 'period'>) =>
    new Gauge({
      name,
      help,
      labelNames: ['budget', 'period'],
      registers,
      async collect() {
        this.reset();
        for (const figures of await live.budgets()) this.set({ budget: figures.budget, period: figures.period }, figures[field]);
      },
    });
  budgetGauge('simulation_budget_limit_usd', "Each budget's limit for its current period", 'limitUsd');
  budgetGauge('simulation_budget_spent_usd', 'What settled runs spent against each budget in its current period', 'spentUsd');
  budgetGauge('simulation_budget_reserved_usd', 'What runs in flight hold against each budget', 'reservedUsd');
  budgetGauge('simulation_budget_remaining_usd', 'Limit less spent less reserved, per budget', 'remainingUsd');
}
