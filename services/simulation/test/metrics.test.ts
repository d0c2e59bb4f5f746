import { Metrics } from '@tempora/kit/observability';
import { assertZeroed } from '../../kit/test/metrics-support.ts';
import { SimulationMetrics } from '../src/metrics.ts';

describe('simulation metrics', () => {
  it('exports every series whose labels are known in advance at 0 from the start', async () => {
    const metrics = new Metrics('simulation');
    new SimulationMetrics(metrics, { activeRuns: () => 0, budgets: async () => [] });
    const { registry } = metrics;
    const mode = ['FORWARD', 'PORTAL', 'BRANCHING', 'CYCLICAL', 'DIRECTORIAL'];
    const status = ['completed', 'stopped', 'cancelled', 'failed'];
    await assertZeroed(registry, 'simulation_runs_started_total', { mode });
    await assertZeroed(registry, 'simulation_runs_finished_total', { mode, status });
    await assertZeroed(registry, 'simulation_run_duration_seconds', { mode, status });
    await assertZeroed(registry, 'simulation_exposure_refusals_total', {});
    // Models and budgets are open-ended: their series come with traffic.
    await assertZeroed(registry, 'simulation_model_calls_total');
    await assertZeroed(registry, 'simulation_budget_refusals_total');
  });
});
