import { type Metrics, zeroed } from '@tempora/kit/observability';
import { Counter, Gauge } from 'prom-client';
import type { Recorded } from './book.ts';
import { TIERS } from './domain/catalogue.ts';
import type { OutboxEntries } from './repository/outbox.ts';

const RECORDED_OUTCOMES: ReadonlyArray<Recorded['outcome']> = ['applied', 'duplicate', 'unchanged', 'ignored', 'unmatched'];
/** The refusals each channel can give (stripe-channel.ts, apple-channel.ts, application/channels.ts). */
const APPLE_REFUSALS = [
  'malformed-body',
  'malformed-event',
  'wrong-app',
  'wrong-environment',
  'bad-chain',
  'expired-certificate',
  'bad-signature',
  'untrusted-chain',
];
const STRIPE_REFUSALS = ['missing-signature', 'malformed-signature', 'stale-signature', 'bad-signature', 'malformed-body', 'malformed-event'];

/** Billing's own series beside the kit's request histogram. */
export class BillingMetrics {
  readonly messages: Counter<'provider' | 'type' | 'outcome'>;
  readonly refusals: Counter<'channel' | 'reason'>;
  readonly deliveries: Counter<'kind' | 'outcome'>;
  readonly credits: Counter<'direction' | 'operation'>;
  readonly tierPushes: Counter<'tier' | 'outcome'>;
  readonly checkouts: Counter<'kind'>;

  constructor(metrics: Metrics, outbox: Pick<OutboxEntries, 'backlog'>) {
    const registers = [metrics.registry];
    this.messages = new Counter({
      name: 'billing_provider_messages_total',
      help: 'Verified provider messages (webhook events, notifications, posted transactions) by provider, type and outcome (applied, duplicate, ignored, unmatched)',
      labelNames: ['provider', 'type', 'outcome'],
      registers,
    });
    this.refusals = new Counter({
      name: 'billing_refusals_total',
      help: 'Unverifiable input refused with 400, by channel (stripe-webhook, apple-webhook, apple-transaction) and reason',
      labelNames: ['channel', 'reason'],
      registers,
    });
    this.deliveries = new Counter({
      name: 'billing_outbox_deliveries_total',
      help: 'Attempts to deliver a ledger effect to the gateway, by kind (grant, debit) and outcome (delivered, retry, failed)',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    this.credits = new Counter({
      name: 'billing_credits_total',
      help: 'Credits the gateway booked for billing, by direction (granted, debited) and operation',
      labelNames: ['direction', 'operation'],
      registers,
    });
    this.tierPushes = new Counter({
      name: 'billing_tier_pushes_total',
      help: 'Tier changes sent to the gateway, by tier and outcome',
      labelNames: ['tier', 'outcome'],
      registers,
    });
    this.checkouts = new Counter({
      name: 'billing_checkout_sessions_total',
      help: 'Stripe Checkout Sessions created, by kind (pack, plan)',
      labelNames: ['kind'],
      registers,
    });
    // Exported from the start at 0: a refusal or a failed delivery is rare, and rate() of a series not yet
    // exported is no data, not "none". A webhook's event type is the provider's, so only a posted
    // transaction's messages are known in advance.
    zeroed(this.messages, { provider: ['apple'], type: ['transaction'], outcome: RECORDED_OUTCOMES });
    zeroed(
      this.refusals,
      { channel: ['stripe-webhook'], reason: STRIPE_REFUSALS },
      { channel: ['apple-webhook'], reason: APPLE_REFUSALS },
      { channel: ['apple-transaction'], reason: [...APPLE_REFUSALS, 'foreign-account'] },
    );
    zeroed(this.deliveries, { kind: ['grant', 'debit'], outcome: ['delivered', 'retry', 'failed'] });
    // The operations book.ts books: purchases and a dispute won give credits, a refund or a dispute takes them back.
    zeroed(
      this.credits,
      { direction: ['granted'], operation: ['billing.pack', 'billing.allowance', 'billing.dispute-won'] },
      { direction: ['debited'], operation: ['billing.refund', 'billing.dispute'] },
    );
    zeroed(this.tierPushes, { tier: TIERS, outcome: ['pushed', 'retry', 'failed'] });
    zeroed(this.checkouts, { kind: ['pack', 'plan'] });
    // One query per scrape serves both backlog gauges.
    let backlog: Promise<{ pending: number; failed: number; oldestPendingSeconds: number }> | undefined;
    const read = () => (backlog ??= outbox.backlog().finally(() => setTimeout(() => (backlog = undefined), 0)));
    new Gauge({
      name: 'billing_outbox_entries',
      help: 'Ledger effects not delivered to the gateway, by status (pending: will be retried; failed: refused for good, an operator re-syncs)',
      labelNames: ['status'],
      registers,
      async collect() {
        const { pending, failed } = await read();
        this.set({ status: 'pending' }, pending);
        this.set({ status: 'failed' }, failed);
      },
    });
    new Gauge({
      name: 'billing_outbox_oldest_pending_seconds',
      help: 'Age of the oldest ledger effect still waiting for the gateway',
      registers,
      async collect() {
        this.set((await read()).oldestPendingSeconds);
      },
    });
  }
}
