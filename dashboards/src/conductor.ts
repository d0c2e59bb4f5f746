import { dashboard, red, SEL } from './panels.ts';

/** The conductor: what people ask, which tools it calls, what they cost and how long they take. */
export const conductor = dashboard({
  uid: 'tempora-conductor',
  title: 'Tempora / Conductor',
  description: 'Messages, tool calls, credits charged and refunded, and model turns of the conductor.',
  components: ['conductor'],
  jobMetric: 'conductor_messages_total',
  rows: [
    {
      title: 'Messages and tools',
      panels: [
        {
          title: 'Messages',
          description:
            'Messages answered per second by outcome: completed, paused (waiting for a confirmation or at the spend ceiling), stopped (a cap), failed.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (status) (rate(conductor_messages_total{${SEL}}[$__rate_interval]))`, legend: '{{status}}' }],
        },
        {
          title: 'Tool calls',
          description: 'Tool calls per second by tool and outcome (ok, failed, invalid).',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (tool, status) (rate(conductor_tool_calls_total{${SEL}}[$__rate_interval]))`, legend: '{{tool}} {{status}}' }],
        },
        {
          title: 'Tool call latency p95',
          description: 'Time per tool call, 95th percentile, by tool.',
          unit: 's',
          queries: [
            {
              expr: `histogram_quantile(0.95, sum by (tool, le) (rate(conductor_tool_call_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: '{{tool}}',
            },
          ],
        },
        {
          title: 'Model turn latency p95',
          description: 'Time per model turn (one tool-choosing call), 95th percentile.',
          unit: 's',
          queries: [
            { expr: `histogram_quantile(0.95, sum by (le) (rate(conductor_model_turn_duration_seconds_bucket{${SEL}}[$__rate_interval])))`, legend: 'p95' },
          ],
        },
      ],
    },
    {
      title: 'Credits',
      panels: [
        {
          title: 'Credits charged and refunded',
          description: 'Credits per second charged for paid tool calls, and refunded when a call failed, by ledger operation (refunds drawn at 0 when none).',
          unit: 'short',
          queries: [
            { expr: `sum by (operation) (rate(conductor_credits_charged_total{${SEL}}[$__rate_interval]))`, legend: 'charged {{operation}}' },
            {
              expr: `sum by (operation) (rate(conductor_credits_refunded_total{${SEL}}[$__rate_interval])) or sum by (operation) (rate(conductor_credits_charged_total{${SEL}}[$__rate_interval])) * 0`,
              legend: 'refunded {{operation}}',
            },
          ],
        },
        {
          title: 'Model tokens',
          description: "Tokens per second used by the conductor's model turns, by provider.",
          unit: 'short',
          stacked: true,
          queries: [{ expr: `sum by (provider) (rate(conductor_model_tokens_total{${SEL}}[$__rate_interval]))`, legend: '{{provider}}' }],
        },
      ],
    },
    { title: 'Requests by route', panels: red('route', 'route template') },
  ],
});
