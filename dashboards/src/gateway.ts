import { dashboard, red, SEL } from './panels.ts';

/** What the single entry point does with its callers: who signs in, what they pay, who is held back, how upstreams answer. */
export const gateway = dashboard({
  uid: 'tempora-gateway',
  title: 'Tempora / Gateway',
  description: 'Sign-ins, credits, rate limits and upstreams of the gateway.',
  components: ['gateway'],
  jobMetric: 'gateway_upstream_duration_seconds_count',
  rows: [
    { title: 'Requests by route', panels: red('route', 'route template') },
    {
      title: 'Callers',
      panels: [
        {
          title: 'Sign-ins',
          description: 'Sign-in attempts per second, by identity provider and outcome (a rise in failures: a provider or our keys).',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (provider, outcome) (rate(gateway_sign_ins_total{${SEL}}[$__rate_interval]))`, legend: '{{provider}} {{outcome}}' }],
        },
        {
          title: 'Token refreshes',
          description:
            'Refresh-token exchanges per second by outcome: rotated, replayed in the grace window (two tabs at once), reuse detected (a stolen token: its whole sign-in is revoked), refused.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (outcome) (rate(gateway_token_refreshes_total{${SEL}}[$__rate_interval]))`, legend: '{{outcome}}' }],
        },
        {
          title: 'API keys',
          description: 'API keys created and revoked per second.',
          unit: 'ops',
          queries: [{ expr: `sum by (action) (rate(gateway_api_keys_total{${SEL}}[$__rate_interval]))`, legend: '{{action}}' }],
        },
        {
          title: 'Rate-limited requests',
          description:
            'Requests refused with 429 per second, by window: the tier of a signed-in user (tier-free, tier-pro, tier-enterprise), or the anonymous, daily and demo windows.',
          unit: 'reqps',
          stacked: true,
          queries: [{ expr: `sum by (window) (rate(gateway_rate_limit_rejections_total{${SEL}}[$__rate_interval]))`, legend: '{{window}}' }],
        },
      ],
    },
    {
      title: 'Credits',
      panels: [
        {
          title: 'Credits charged',
          description: 'Credits charged per second for proxied operations, by operation.',
          unit: 'short',
          stacked: true,
          queries: [{ expr: `sum by (operation) (rate(gateway_credits_charged_total{${SEL}}[$__rate_interval]))`, legend: '{{operation}}' }],
        },
        {
          title: 'Credits refunded',
          description: 'Credits refunded per second because the upstream did not deliver, by operation. A spike means an upstream is failing paid calls.',
          unit: 'short',
          stacked: true,
          queries: [{ expr: `sum by (operation) (rate(gateway_credits_refunded_total{${SEL}}[$__rate_interval]))`, legend: '{{operation}}' }],
        },
      ],
    },
    {
      title: 'Upstreams',
      panels: [
        {
          title: 'Upstream answers',
          description: 'Proxied calls per second, by destination service and status (`error`: no answer at all).',
          unit: 'reqps',
          queries: [
            { expr: `sum by (upstream, status) (rate(gateway_upstream_duration_seconds_count{${SEL}}[$__rate_interval]))`, legend: '{{upstream}} {{status}}' },
          ],
        },
        {
          title: 'Upstream latency p99',
          description: 'Time until each destination answered with headers, 99th percentile.',
          unit: 's',
          queries: [
            {
              expr: `histogram_quantile(0.99, sum by (upstream, le) (rate(gateway_upstream_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: '{{upstream}}',
            },
          ],
        },
      ],
    },
  ],
});
