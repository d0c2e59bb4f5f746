import { ofComponents } from '../components.ts';
import type { AlertRule } from './types.ts';

export const simulationBudgetExhausted: AlertRule = {
  alert: 'TemporaSimulationBudgetExhausted',
  expr: `max by (budget) (simulation_budget_remaining_usd{${ofComponents('simulation')}}) <= 0 and max by (budget) (simulation_budget_limit_usd{${ofComponents('simulation')}}) > 0`,
  for: '5m',
  severity: 'warning',
  summary: 'A simulation budget has no room left.',
  description: 'The SimulationBudget {{ $labels.budget }} has nothing left in its current period: new runs against it are refused (402).',
  runbook: {
    meaning: "Settled and reserved runs together reached the budget's limit for its period; the SimulationBudget also reports the `Exhausted` condition.",
    impact:
      'Every new run that this budget applies to is refused until the period ends or the limit is raised; runs in flight finish within their reservation.',
    diagnosis: [
      'Tempora / Simulation, Spend against budget; `kubectl describe simulationbudget <name>` for its status and Events (one per alert threshold crossed).',
      '`GET /api/v1/simulations/usage` (service key) for who spent it.',
    ],
    mitigation: ['Raise `spec.limitUsd` if the spend is expected; the service reads the change without a restart.', 'Otherwise wait for the next period.'],
  },
  tests: [
    {
      name: 'exhausted for ten minutes',
      input: [
        { series: 'simulation_budget_remaining_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '0x15' },
        { series: 'simulation_budget_limit_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '10x15' },
      ],
      at: '10m',
      fires: [{ budget: 'research' }],
    },
    {
      name: 'room left',
      input: [
        { series: 'simulation_budget_remaining_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '4x15' },
        { series: 'simulation_budget_limit_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '10x15' },
      ],
      at: '10m',
      fires: [],
    },
  ],
};
