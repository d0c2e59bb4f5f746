import { dashboard, red, SEL } from './panels.ts';

/** Billing: payments verified or refused, credits granted and taken back, and the outbox to the gateway. */
export const billing = dashboard({
  uid: 'tempora-billing',
  title: 'Tempora / Billing',
  description:
    'Payment messages (Stripe, App Store) verified and refused, credits granted and debited, tier changes and the outbox that carries them to the gateway.',
  components: ['billing'],
  jobMetric: 'billing_outbox_entries',
  rows: [
    {
      title: 'Payments',
      panels: [
        {
          title: 'Provider messages',
          description:
            'Verified webhook events, notifications and posted transactions per second, by provider, type and outcome (applied, duplicate, ignored, ...).',
          unit: 'ops',
          stacked: true,
          queries: [
            {
              expr: `sum by (provider, type, outcome) (rate(billing_provider_messages_total{${SEL}}[$__rate_interval]))`,
              legend: '{{provider}} {{type}} {{outcome}}',
            },
          ],
        },
        {
          title: 'Refused',
          description:
            'Messages refused per second by channel and reason (bad or stale signature, wrong chain, bundle or environment, malformed body): nothing granted for them.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (channel, reason) (rate(billing_refusals_total{${SEL}}[$__rate_interval]))`, legend: '{{channel}} {{reason}}' }],
        },
        {
          title: 'Checkout sessions',
          description: 'Stripe Checkout Sessions created per second, by kind (pack, plan).',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (kind) (rate(billing_checkout_sessions_total{${SEL}}[$__rate_interval]))`, legend: '{{kind}}' }],
        },
        {
          title: 'Credits granted and debited',
          description: 'Credits per second granted (purchases, allowances) and debited (refunds, disputes), by direction and operation.',
          unit: 'short',
          stacked: true,
          queries: [{ expr: `sum by (direction, operation) (rate(billing_credits_total{${SEL}}[$__rate_interval]))`, legend: '{{direction}} {{operation}}' }],
        },
      ],
    },
    {
      title: 'Outbox to the gateway',
      panels: [
        {
          title: 'Outbox entries',
          description: 'Effects waiting for the gateway, by status (pending, failed): failed ones need a re-sync.',
          unit: 'short',
          queries: [{ expr: `sum by (status) (billing_outbox_entries{${SEL}})`, legend: '{{status}}' }],
        },
        {
          title: 'Oldest pending entry',
          description: 'Age of the oldest effect not yet delivered to the gateway: grows while the gateway is unreachable.',
          unit: 's',
          queries: [{ expr: `max(billing_outbox_oldest_pending_seconds{${SEL}})`, legend: 'oldest' }],
        },
        {
          title: 'Deliveries',
          description: 'Outbox deliveries per second by kind (grant, debit, tier) and outcome.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (kind, outcome) (rate(billing_outbox_deliveries_total{${SEL}}[$__rate_interval]))`, legend: '{{kind}} {{outcome}}' }],
        },
      ],
    },
    { title: 'Requests by route', panels: red('route', 'route template') },
  ],
});
