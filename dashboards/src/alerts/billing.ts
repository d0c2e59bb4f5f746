import { ofComponents } from '../components.ts';
import type { AlertRule } from './types.ts';

const BILLING = ofComponents('billing');

export const billingRefusals: AlertRule = {
  alert: 'TemporaBillingRefusals',
  expr: `sum by (channel, reason) (increase(billing_refusals_total{${BILLING}}[15m])) > 10`,
  for: '5m',
  severity: 'warning',
  summary: 'Billing refuses many payment messages.',
  description: 'More than 10 {{ $labels.channel }} messages refused for {{ $labels.reason }} in 15 minutes.',
  runbook: {
    meaning:
      'Webhook events, App Store notifications or posted transactions fail verification (signature, certificate chain, bundle id, environment, body). Nothing is granted for them.',
    impact:
      'If they are genuine (a rotated webhook secret, a new Apple root, the wrong environment), paid purchases are not credited until the provider retries after the fix. If not, someone is probing the webhooks.',
    diagnosis: [
      "Tempora / Billing, Refused by channel and reason; billing's logs (the refusal is logged without the payload's secrets).",
      'A bad signature after a secret rotation: is the new secret in STRIPE_WEBHOOK_SECRET beside the old one?',
    ],
    mitigation: [
      'Fix the configuration (secrets, APPLE_ROOT_CERTIFICATES, APPLE_BUNDLE_ID, APPLE_ENVIRONMENT); Stripe and Apple retry deliveries, and a re-sync catches up Stripe subscriptions.',
    ],
  },
  tests: [
    {
      name: 'a burst of bad signatures',
      input: [{ series: 'billing_refusals_total{tempora_component="billing", channel="stripe", reason="signature"}', values: '0+2x30' }],
      at: '20m',
      fires: [{ channel: 'stripe', reason: 'signature' }],
    },
    {
      name: 'an odd refusal',
      input: [{ series: 'billing_refusals_total{tempora_component="billing", channel="stripe", reason="signature"}', values: '0x10 1x20' }],
      at: '20m',
      fires: [],
    },
  ],
};

export const billingOutboxStuck: AlertRule = {
  alert: 'TemporaBillingOutboxStuck',
  expr: `max(billing_outbox_oldest_pending_seconds{${BILLING}}) > 900`,
  for: '5m',
  severity: 'critical',
  summary: 'Paid credits are not reaching the gateway.',
  description: 'An effect of a verified payment has waited over 15 minutes for the gateway.',
  runbook: {
    meaning: "Billing recorded a payment durably but cannot deliver its grant, debit or tier change to the gateway's ledger.",
    impact: 'Buyers paid and do not see their credits or tier yet. Nothing is lost: the outbox keeps retrying.',
    diagnosis: [
      'Tempora / Billing, Outbox: pending and failed entries, deliveries by outcome.',
      "Is the gateway up, and does billing's service key match one of the gateway's SERVICE_KEY values?",
    ],
    mitigation: [
      'Restore the gateway or the key; the outbox delivers by itself. Failed entries (a permanent 4xx) need the re-sync endpoint once the cause is fixed.',
    ],
  },
  tests: [
    {
      name: 'an entry pending for half an hour',
      input: [{ series: 'billing_outbox_oldest_pending_seconds{tempora_component="billing"}', values: '1800x15' }],
      at: '10m',
      fires: [{}],
    },
    {
      name: 'the outbox drains',
      input: [{ series: 'billing_outbox_oldest_pending_seconds{tempora_component="billing"}', values: '3x15' }],
      at: '10m',
      fires: [],
    },
  ],
};
