import { Metrics } from '@tempora/kit/observability';
import { assertZeroed } from '../../kit/test/metrics-support.ts';
import { BillingMetrics } from '../src/metrics.ts';

describe('billing metrics', () => {
  it('exports every series whose labels are known in advance at 0 from the start', async () => {
    const metrics = new Metrics('billing');
    // The outbox gauges read the repository on scrape; nothing else does.
    new BillingMetrics(metrics, { backlog: async () => ({ pending: 0, failed: 0, oldestPendingSeconds: 0 }) });
    const { registry } = metrics;
    // A webhook's type is the provider's event type: only a posted App Store transaction's is known.
    await assertZeroed(registry, 'billing_provider_messages_total', {
      provider: ['apple'],
      type: ['transaction'],
      outcome: ['applied', 'duplicate', 'unchanged', 'ignored', 'unmatched'],
    });
    const apple = [
      'malformed-body',
      'malformed-event',
      'wrong-app',
      'wrong-environment',
      'bad-chain',
      'expired-certificate',
      'bad-signature',
      'untrusted-chain',
    ];
    await assertZeroed(
      registry,
      'billing_refusals_total',
      {
        channel: ['stripe-webhook'],
        reason: ['missing-signature', 'malformed-signature', 'stale-signature', 'bad-signature', 'malformed-body', 'malformed-event'],
      },
      { channel: ['apple-webhook'], reason: apple },
      { channel: ['apple-transaction'], reason: [...apple, 'foreign-account'] },
    );
    await assertZeroed(registry, 'billing_outbox_deliveries_total', { kind: ['grant', 'debit'], outcome: ['delivered', 'retry', 'failed'] });
    await assertZeroed(
      registry,
      'billing_credits_total',
      { direction: ['granted'], operation: ['billing.pack', 'billing.allowance', 'billing.dispute-won'] },
      { direction: ['debited'], operation: ['billing.refund', 'billing.dispute'] },
    );
    await assertZeroed(registry, 'billing_tier_pushes_total', { tier: ['free', 'pro', 'enterprise'], outcome: ['pushed', 'retry', 'failed'] });
    await assertZeroed(registry, 'billing_checkout_sessions_total', { kind: ['pack', 'plan'] });
  });
});
