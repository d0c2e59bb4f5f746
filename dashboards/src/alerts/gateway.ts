import { ofComponents } from '../components.ts';
import type { AlertRule } from './types.ts';

const GATEWAY = ofComponents('gateway');

export const upstreamFailing: AlertRule = {
  alert: 'TemporaUpstreamFailing',
  expr: `sum by (upstream) (rate(gateway_upstream_duration_seconds_count{${GATEWAY}, status=~"5..|error"}[5m])) / sum by (upstream) (rate(gateway_upstream_duration_seconds_count{${GATEWAY}}[5m])) > 0.05`,
  for: '10m',
  severity: 'warning',
  summary: 'An upstream of the gateway is failing.',
  description: "More than 5% of the gateway's calls to {{ $labels.upstream }} end in a 5xx or no answer.",
  runbook: {
    meaning: 'The gateway forwards requests to a service that answers 5xx or not at all (status `error`).',
    impact: 'Consumers get 502/504 for that part of the API; charged calls are refunded.',
    diagnosis: ['Tempora / Gateway, Upstreams row: which destination, which status.', "The destination service's own dashboard and pods."],
    mitigation: ['Restore the upstream service (see TemporaTargetDown and its error budget alerts).'],
  },
  tests: [
    {
      name: 'a tenth of calls to generation fail',
      input: [
        { series: 'gateway_upstream_duration_seconds_count{tempora_component="gateway", upstream="generation", status="200"}', values: '0+90x30' },
        { series: 'gateway_upstream_duration_seconds_count{tempora_component="gateway", upstream="generation", status="error"}', values: '0+10x30' },
      ],
      at: '20m',
      fires: [{ upstream: 'generation' }],
    },
    {
      name: 'every call answered',
      input: [{ series: 'gateway_upstream_duration_seconds_count{tempora_component="gateway", upstream="generation", status="200"}', values: '0+90x30' }],
      at: '20m',
      fires: [],
    },
  ],
};

export const creditRefundSpike: AlertRule = {
  alert: 'TemporaCreditRefundSpike',
  expr: `sum(rate(gateway_credits_refunded_total{${GATEWAY}}[15m])) / sum(rate(gateway_credits_charged_total{${GATEWAY}}[15m])) > 0.1`,
  for: '15m',
  severity: 'warning',
  summary: 'Many charged calls are being refunded.',
  description: 'More than 10% of the credits charged in the last 15 minutes were refunded: paid work is failing.',
  runbook: {
    meaning:
      'The gateway refunds a charged call whose upstream did not deliver (an error, a broken stream, a client that left before the answer). A high share means paid operations are failing.',
    impact: 'Users pay nothing for failed work, but they do not get what they asked for.',
    diagnosis: ['Tempora / Gateway, Credits row: which operations are refunded.', 'Then the generation or simulation dashboard for the failing step.'],
    mitigation: ['Fix the failing upstream (see TemporaUpstreamFailing, TemporaModelProviderFailing).'],
  },
  tests: [
    {
      name: 'a third refunded',
      input: [
        { series: 'gateway_credits_charged_total{tempora_component="gateway", operation="generate.sync"}', values: '0+30x40' },
        { series: 'gateway_credits_refunded_total{tempora_component="gateway", operation="generate.sync"}', values: '0+10x40' },
      ],
      at: '35m',
      fires: [{}],
    },
    {
      name: 'one in a hundred refunded',
      input: [
        { series: 'gateway_credits_charged_total{tempora_component="gateway", operation="generate.sync"}', values: '0+100x40' },
        { series: 'gateway_credits_refunded_total{tempora_component="gateway", operation="generate.sync"}', values: '0+1x40' },
      ],
      at: '35m',
      fires: [],
    },
  ],
};
