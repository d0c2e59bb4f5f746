import { dashboard, red, SEL } from './panels.ts';

/** Simulations: what runs, how they end, what they cost, and how much room each budget has left. */
export const simulation = dashboard({
  uid: 'tempora-simulation',
  title: 'Tempora / Simulation',
  description: 'Simulation runs by mode and status, their steps and model calls, and spend against each SimulationBudget.',
  components: ['simulation'],
  jobMetric: 'simulation_runs_active',
  rows: [
    {
      title: 'Runs',
      panels: [
        {
          title: 'Runs started',
          description: 'Runs accepted per second (their budgets reserved), by temporal mode.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (mode) (rate(simulation_runs_started_total{${SEL}}[$__rate_interval]))`, legend: '{{mode}}' }],
        },
        {
          title: 'Runs ended',
          description: 'Runs ended per second by mode and status: completed, stopped (at their maximum cost, partial result kept), cancelled, failed.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (mode, status) (rate(simulation_runs_finished_total{${SEL}}[$__rate_interval]))`, legend: '{{mode}} {{status}}' }],
        },
        {
          title: 'Runs in progress',
          description: 'Runs executing now, per process.',
          unit: 'short',
          queries: [{ expr: `sum by (instance) (simulation_runs_active{${SEL}})`, legend: '{{instance}}' }],
        },
        {
          title: 'Step duration p95',
          description: 'Time per run step (its model calls included), 95th percentile, by kind of step.',
          unit: 's',
          queries: [
            {
              expr: `histogram_quantile(0.95, sum by (kind, le) (rate(simulation_step_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: '{{kind}}',
            },
          ],
        },
      ],
    },
    {
      title: 'Money',
      panels: [
        {
          title: 'Spend against budget',
          description: "Each SimulationBudget's limit for its current period beside what settled runs spent and what runs in flight hold (USD).",
          unit: 'currencyUSD',
          queries: [
            { expr: `max by (budget) (simulation_budget_limit_usd{${SEL}})`, legend: 'limit {{budget}}' },
            { expr: `max by (budget) (simulation_budget_spent_usd{${SEL}})`, legend: 'spent {{budget}}' },
            { expr: `max by (budget) (simulation_budget_reserved_usd{${SEL}})`, legend: 'reserved {{budget}}' },
          ],
        },
        {
          title: 'Model cost',
          description: 'Dollars per second of metered model calls at the price table, by priced model.',
          unit: 'currencyUSD',
          stacked: true,
          queries: [{ expr: `sum by (model) (rate(simulation_model_cost_usd_total{${SEL}}[$__rate_interval]))`, legend: '{{model}}' }],
        },
        {
          title: 'Model calls',
          description: 'Metered model calls per second by action and provider (offline marks the deterministic provider).',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (action, provider) (rate(simulation_model_calls_total{${SEL}}[$__rate_interval]))`, legend: '{{action}} {{provider}}' }],
        },
      ],
    },
    { title: 'Requests by route', panels: red('route', 'route template') },
  ],
});
