import { ofComponents } from '../components.ts';
import type { AlertRule } from './types.ts';

export const graphWorkerBudgetExhausted: AlertRule = {
  alert: 'TemporaGraphWorkerBudgetExhausted',
  expr: `max by (role) (graph_worker_budget_exhausted{${ofComponents('graph', 'graph-worker')}}) == 1`,
  for: '5m',
  severity: 'info',
  summary: 'A graph worker has spent its daily model budget.',
  description: 'The {{ $labels.role }} worker reached its daily budget and pauses until midnight UTC.',
  runbook: {
    meaning: 'The expander, judge or daily worker spent the USD budget its GraphWorker allows per day and stops calling models until the day ends.',
    impact: 'The graph grows or is moderated more slowly until midnight UTC; nothing fails.',
    diagnosis: ['Tempora / Graph, Spend against budget.'],
    mitigation: ["Raise the GraphWorker's `spec.dailyBudgetUsd` if the spend is expected; otherwise nothing to do."],
  },
  tests: [
    {
      name: 'the expander exhausted',
      input: [{ series: 'graph_worker_budget_exhausted{tempora_component="graph-worker", role="expander"}', values: '1x10' }],
      at: '8m',
      fires: [{ role: 'expander' }],
    },
    {
      name: 'within budget',
      input: [{ series: 'graph_worker_budget_exhausted{tempora_component="graph-worker", role="expander"}', values: '0x10' }],
      at: '8m',
      fires: [],
    },
  ],
};
