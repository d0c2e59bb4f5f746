import { Metrics, zeroed } from '@tempora/kit/observability';
import { Counter, Gauge, Histogram } from 'prom-client';
import { BudgetExhausted, type SpendBudget } from './budget.ts';
import { Verdict } from './verdict.ts';

/** What became of one render job this renderer claimed. */
const RENDER_OUTCOMES = ['rendered', 'retried', 'failed', 'released', 'lost', 'error'] as const;
export type RenderOutcome = (typeof RENDER_OUTCOMES)[number];
/** What one polling run of the judge or expander came to. */
const RUN_OUTCOMES = ['worked', 'idle', 'failed', 'budget_exhausted'] as const;

/**
 * A graph worker process's Prometheus metrics: the kit's registry (Node's defaults) plus the workers' own.
 * Every label is bounded: `role` is one of four, `outcome` and `verdict` are the fixed sets above, and every
 * series of them is exported from the start at 0, whichever roles this process runs (dashboards sum over
 * processes), so a quiet worker reads as "none" rather than no data. Spend and budget gauges are read when
 * scraped, from the budgets registered with `watch`.
 */
export class GraphWorkerMetrics extends Metrics {
  readonly jobs: Counter<'role' | 'outcome'>;
  readonly jobDuration: Histogram<'role'>;
  readonly runs: Counter<'role' | 'outcome'>;
  readonly verdicts: Counter<'verdict'>;
  readonly momentsAdded: Counter<'role'>;
  private readonly budgets: SpendBudget[] = [];

  constructor(service = 'graph-worker') {
    super(service);
    const registers = [this.registry];
    this.jobs = new Counter({
      name: 'graph_worker_jobs_total',
      help: 'Render jobs this process claimed, by what became of them (rendered, retried, failed, released, lost, error)',
      labelNames: ['role', 'outcome'],
      registers,
    });
    this.jobDuration = new Histogram({
      name: 'graph_worker_job_duration_seconds',
      help: 'One render job (renderer) or one run that found work (judge, expander), in seconds',
      labelNames: ['role'],
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      registers,
    });
    this.runs = new Counter({
      name: 'graph_worker_runs_total',
      help: 'Polling runs of the judge and expander, by outcome (worked, idle, failed, budget_exhausted)',
      labelNames: ['role', 'outcome'],
      registers,
    });
    this.verdicts = new Counter({
      name: 'graph_worker_judge_verdicts_total',
      help: 'Moments the judge decided, by verdict',
      labelNames: ['verdict'],
      registers,
    });
    this.momentsAdded = new Counter({
      name: 'graph_worker_moments_added_total',
      help: 'Moments the expander (or daily) added to the graph',
      labelNames: ['role'],
      registers,
    });
    zeroed(this.jobs, { role: ['renderer'], outcome: RENDER_OUTCOMES });
    zeroed(this.jobDuration, { role: ['renderer', 'judge', 'expander'] });
    zeroed(this.runs, { role: ['judge', 'expander'], outcome: RUN_OUTCOMES });
    zeroed(this.verdicts, { verdict: Verdict.shape.verdict.options });
    zeroed(this.momentsAdded, { role: ['expander', 'daily'] });
    const budgets = this.budgets;
    new Gauge({
      name: 'graph_worker_daily_budget_usd',
      help: "The role's budget per UTC day (WORKER_DAILY_BUDGET_USD), shared by its replicas",
      labelNames: ['role'],
      registers,
      collect() {
        for (const budget of budgets) this.set({ role: budget.role }, budget.limitUsd);
      },
    });
    new Gauge({
      name: 'graph_worker_spend_today_usd',
      help: "What the role's replicas together have spent (or reserved) this UTC day",
      labelNames: ['role'],
      registers,
      async collect() {
        // One indexed read per role and scrape; an unreachable database leaves the last value.
        await Promise.all(
          budgets.map(async (budget) => {
            this.set({ role: budget.role }, await budget.spentToday());
          }),
        ).catch(() => {});
      },
    });
    new Gauge({
      name: 'graph_worker_budget_exhausted',
      help: "1 while this process holds off paid calls because the role's daily budget was refused, until the next UTC day",
      labelNames: ['role'],
      registers,
      collect() {
        for (const budget of budgets) this.set({ role: budget.role }, budget.exhausted() ? 1 : 0);
      },
    });
  }

  /** Exports a role's budget and spend. */
  watch(budget: SpendBudget): void {
    if (!this.budgets.includes(budget)) this.budgets.push(budget);
  }

  verdict(verdict: Verdict['verdict']): void {
    this.verdicts.inc({ verdict });
  }

  /**
   * Wraps a polling loop's run to count its outcome and time the runs that found work; what it returns or
   * throws passes through unchanged.
   */
  instrument(role: string, runOnce: (signal: AbortSignal) => Promise<number>): (signal: AbortSignal) => Promise<number> {
    return async (signal) => {
      const stop = this.jobDuration.startTimer({ role });
      try {
        const found = await runOnce(signal);
        this.runs.inc({ role, outcome: found > 0 ? 'worked' : 'idle' });
        if (found > 0) stop();
        return found;
      } catch (error) {
        this.runs.inc({ role, outcome: error instanceof BudgetExhausted ? 'budget_exhausted' : 'failed' });
        throw error;
      }
    };
  }
}
