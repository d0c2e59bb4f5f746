import { assertZeroed } from '../../kit/test/metrics-support.ts';
import { GraphWorkerMetrics } from '../src/workers/metrics.ts';

describe('graph worker metrics', () => {
  it('exports every series whose labels are known in advance at 0 from the start', async () => {
    const { registry } = new GraphWorkerMetrics();
    await assertZeroed(registry, 'graph_worker_jobs_total', { role: ['renderer'], outcome: ['rendered', 'retried', 'failed', 'released', 'lost', 'error'] });
    await assertZeroed(registry, 'graph_worker_job_duration_seconds', { role: ['renderer', 'judge', 'expander'] });
    await assertZeroed(registry, 'graph_worker_runs_total', { role: ['judge', 'expander'], outcome: ['worked', 'idle', 'failed', 'budget_exhausted'] });
    await assertZeroed(registry, 'graph_worker_judge_verdicts_total', { verdict: ['publish', 'reject'] });
    await assertZeroed(registry, 'graph_worker_moments_added_total', { role: ['expander', 'daily'] });
  });
});
