import { Metrics } from '@tempora/kit/observability';
import { assertZeroed } from '../../kit/test/metrics-support.ts';
import { GenerationMetrics } from '../src/metrics.ts';

describe('generation metrics', () => {
  it('exports every series whose labels are known in advance at 0 from the start', async () => {
    const metrics = new Metrics('generation');
    new GenerationMetrics(metrics, { depth: async () => 0, stats: async () => undefined }, 'default');
    const { registry } = metrics;
    const mode = ['sync', 'stream', 'async'];
    const outcome = ['completed', 'rejected', 'cancelled', 'failed'];
    await assertZeroed(registry, 'generation_requests_total', { mode, outcome });
    await assertZeroed(registry, 'generation_pipeline_duration_seconds', { mode, preset: ['hyper', 'balanced', 'hd', 'gemini3'], outcome });
    await assertZeroed(registry, 'generation_callbacks_total', { outcome: ['delivered', 'retried', 'failed'] });
    // Which provider serves which agent is the deployment's: those series come with traffic.
    await assertZeroed(registry, 'generation_agent_duration_seconds');
    await assertZeroed(registry, 'generation_agent_errors_total');
    await assertZeroed(registry, 'generation_provider_fallbacks_total');
  });
});
