import { Metrics } from '@tempora/kit/observability';
import { assertZeroed } from '../../kit/test/metrics-support.ts';
import { GatewayMetrics } from '../src/metrics.ts';

describe('gateway metrics', () => {
  it('exports every series whose labels are known in advance at 0 from the start', async () => {
    const metrics = new Metrics('gateway');
    new GatewayMetrics(metrics);
    const { registry } = metrics;
    await assertZeroed(registry, 'gateway_rate_limit_rejections_total', {
      window: ['tier-free', 'tier-pro', 'tier-enterprise', 'tier-day', 'authenticated-reads', 'authenticated-writes', 'anonymous', 'service', 'demo-signin'],
    });
    const operations = {
      operation: [
        ...['hyper', 'balanced', 'gemini3', 'hd'].flatMap((preset) => [`generation.${preset}`, `generation.${preset}+image`]),
        ...[1, 2, 3, 4, 5].map((fidelity) => `simulation.fidelity-${fidelity}`),
      ],
    };
    await assertZeroed(registry, 'gateway_credits_charged_total', operations);
    await assertZeroed(registry, 'gateway_credits_refunded_total', operations);
    await assertZeroed(
      registry,
      'gateway_sign_ins_total',
      { provider: ['apple', 'google', 'github'], outcome: ['signup', 'signin', 'refused', 'error'] },
      { provider: ['demo'], outcome: ['signup'] },
    );
    await assertZeroed(registry, 'gateway_token_refreshes_total', { outcome: ['rotated', 'replayed_in_grace', 'reuse_detected', 'refused'] });
    await assertZeroed(registry, 'gateway_api_keys_total', { action: ['created', 'revoked'] });
    await assertZeroed(registry, 'gateway_express_lane_requests_total', {});
    // The upstream's status is whatever it answers: its series come with traffic.
    await assertZeroed(registry, 'gateway_upstream_duration_seconds');
  });
});
