import { type Component, ofComponents, SERVICES } from '../components.ts';
import type { AlertRule, RecordingRule } from './types.ts';

// The services' objectives, one pair for all of them (availability and latency), the recording rules
// that measure them over each window, and the burn-rate alerts that compare those windows.

/** Availability objective of every service: 99.9% of requests answered without a 5xx. */
export const AVAILABILITY_SLO = 0.999;
/** Latency objective: 99% of short requests answered within LATENCY_THRESHOLD_SECONDS. */
export const LATENCY_SLO = 0.99;
export const LATENCY_THRESHOLD_SECONDS = 1;
/** Routes that stream or render for as long as the work takes, outside the latency objective. */
const LONG_ROUTES = 'route!~".*(generate|stream|simulat|conductor|mcp).*"';

/** The services' request histogram: other workloads' instrumentation (OpenTelemetry's HTTP conventions) shares its name. */
const SERVED = ofComponents(...SERVICES);

const WINDOWS = ['5m', '30m', '1h', '2h', '6h', '1d', '3d'] as const;
type Window = (typeof WINDOWS)[number];

const METRIC = 'http_server_request_duration_seconds';
export const errorRatio = (w: Window) => `job:http_request_errors:ratio_rate${w}`;
export const slowRatio = (w: Window) => `job:http_request_slow:ratio_rate${w}`;

export const RECORDING_RULES: RecordingRule[] = WINDOWS.flatMap((w) => [
  {
    record: errorRatio(w),
    expr: `sum by (tempora_component, job) (rate(${METRIC}_count{${SERVED}, status=~"5.."}[${w}])) / sum by (tempora_component, job) (rate(${METRIC}_count{${SERVED}}[${w}]))`,
  },
  {
    record: slowRatio(w),
    expr: `1 - sum by (tempora_component, job) (rate(${METRIC}_bucket{${SERVED}, le="${LATENCY_THRESHOLD_SECONDS}", ${LONG_ROUTES}}[${w}])) / sum by (tempora_component, job) (rate(${METRIC}_count{${SERVED}, ${LONG_ROUTES}}[${w}]))`,
  },
]);

/** Multiwindow, multi-burn-rate alerts from the SRE workbook (chapter 5, "Alerting on SLOs"). */
function burn(kind: 'errors' | 'latency', fast: boolean): Pick<AlertRule, 'expr' | 'for'> {
  const ratio = kind === 'errors' ? errorRatio : slowRatio;
  const budget = kind === 'errors' ? 1 - AVAILABILITY_SLO : 1 - LATENCY_SLO;
  const pair = (rate: number, long: Window, short: Window) =>
    `(${ratio(long)} > ${rate} * ${budget.toFixed(3)} and ${ratio(short)} > ${rate} * ${budget.toFixed(3)})`;
  return fast
    ? { expr: `${pair(14.4, '1h', '5m')} or ${pair(6, '6h', '30m')}`, for: '2m' }
    : { expr: `${pair(3, '1d', '2h')} or ${pair(1, '3d', '6h')}`, for: '1h' };
}

const requests = (job: Component, status: string, perMinute: number) => ({
  series: `${METRIC}_count{tempora_component="${job}", job="${job}", route="/api/v1/moments", status="${status}"}`,
  values: `0+${perMinute}x200`,
});
const fastRequests = (job: Component, perMinute: number, fastPerMinute: number) => [
  {
    series: `${METRIC}_bucket{tempora_component="${job}", job="${job}", route="/api/v1/moments", status="200", le="${LATENCY_THRESHOLD_SECONDS}"}`,
    values: `0+${fastPerMinute}x200`,
  },
  { series: `${METRIC}_count{tempora_component="${job}", job="${job}", route="/api/v1/moments", status="200"}`, values: `0+${perMinute}x200` },
];

const SLO_DIAGNOSIS = [
  'Open the Tempora / Overview dashboard, pick the job: which routes fail (Errors) or are slow (Latency p50 / p99)?',
  "Read the service's logs for the failing requests: each log line carries the request id that the caller saw in X-Request-ID.",
  'Check what the service depends on: PostgreSQL and Redis reachability (`/health` reports both), and for the gateway the Upstreams row of its dashboard.',
];

/** The burn-rate alerts of every service's two objectives, fast and slow. */
export const SLO_ALERTS: AlertRule[] = [
  {
    alert: 'TemporaErrorBudgetBurn',
    ...burn('errors', true),
    severity: 'critical',
    summary: 'A service is burning its availability error budget fast.',
    description:
      "{{ $labels.job }} answers more than 14.4 times (1 h) or 6 times (6 h) the 5xx rate its 99.9% objective allows: at this pace the month's budget is gone within days.",
    runbook: {
      meaning:
        'The share of requests answered with a 5xx is far above what the 99.9% availability objective allows, over both a long and a short window (so the problem is real and still happening).',
      impact: 'Callers get errors; through the gateway, charged calls are refunded but the work is not done.',
      diagnosis: SLO_DIAGNOSIS,
      mitigation: [
        'Roll back the last deployment of that service if it started then (`kubectl rollout undo deployment/<gateway>-<service>`).',
        'Restore the dependency that fails (database, Redis, an upstream); the service recovers without a restart.',
        'Scale out if the errors are 503s from saturation.',
      ],
    },
    tests: [
      {
        name: 'one request in ten fails for an hour',
        input: [requests('graph', '200', 90), requests('graph', '500', 10)],
        at: '70m',
        fires: [{ tempora_component: 'graph', job: 'graph' }],
      },
      { name: 'one in ten thousand fails: within the objective', input: [requests('graph', '200', 9999), requests('graph', '500', 1)], at: '70m', fires: [] },
    ],
  },
  {
    alert: 'TemporaErrorBudgetBurnSlow',
    ...burn('errors', false),
    severity: 'warning',
    summary: 'A service is slowly burning its availability error budget.',
    description: '{{ $labels.job }} answers 5xx at more than the rate its 99.9% objective allows, over a day (3×) or three days (1×).',
    runbook: {
      meaning: "A steady, low error rate that will exhaust the month's error budget if it lasts: not urgent, but it does not heal by itself.",
      impact: 'A small share of requests fail, repeatedly.',
      diagnosis: SLO_DIAGNOSIS,
      mitigation: ['Find the failing route and fix its cause in working hours; file the request ids of a few failures with the fix.'],
    },
    tests: [
      {
        name: 'one request in two hundred fails for a day',
        input: [
          { series: `${METRIC}_count{tempora_component="gateway", job="gateway", route="/api/v1/moments", status="200"}`, values: '0+199x1500' },
          { series: `${METRIC}_count{tempora_component="gateway", job="gateway", route="/api/v1/moments", status="500"}`, values: '0+1x1500' },
        ],
        at: '1440m',
        fires: [{ tempora_component: 'gateway', job: 'gateway' }],
      },
      {
        name: 'no failures',
        input: [{ series: `${METRIC}_count{tempora_component="gateway", job="gateway", route="/api/v1/moments", status="200"}`, values: '0+100x1500' }],
        at: '1440m',
        fires: [],
      },
    ],
  },
  {
    alert: 'TemporaLatencyBudgetBurn',
    ...burn('latency', true),
    severity: 'critical',
    summary: 'A service is burning its latency budget fast.',
    description: 'More than 14.4× (1 h) or 6× (6 h) the share of slow requests (over 1 s) that the 99% objective allows on {{ $labels.job }}.',
    runbook: {
      meaning: `Requests that should answer within ${LATENCY_THRESHOLD_SECONDS} s (every route but generation, streams, simulations, the conductor and MCP) are slow far more often than the 99% objective allows.`,
      impact: 'Pages and clients wait; callers with short time-outs fail.',
      diagnosis: [
        "Tempora / Overview: Latency p50 / p99 by service, then the service's own dashboard by route.",
        'Process row: CPU saturated or event-loop lag above tens of milliseconds means the process is overloaded.',
        'Database: slow queries show in the traces (span `pg.query`) of the slow requests.',
      ],
      mitigation: [
        'Scale out the service (TemporaGateway CR `spec.<service>.replicas`).',
        'If one route is slow, look for a missing index or a traversal with a high depth/limit.',
      ],
    },
    tests: [
      {
        name: 'one request in five is slow for an hour',
        input: fastRequests('graph', 100, 80),
        at: '70m',
        fires: [{ tempora_component: 'graph', job: 'graph' }],
      },
      { name: 'every request is fast', input: fastRequests('graph', 100, 100), at: '70m', fires: [] },
    ],
  },
  {
    alert: 'TemporaLatencyBudgetBurnSlow',
    ...burn('latency', false),
    severity: 'warning',
    summary: 'A service is slowly burning its latency budget.',
    description: "Slow requests on {{ $labels.job }} exceed the 99% objective's allowance over a day (3×) or three days (1×).",
    runbook: {
      meaning: 'A steady share of slow requests that will use up the latency budget if it lasts.',
      impact: 'Some requests are slow, repeatedly.',
      diagnosis: ["Tempora / Overview, Latency by service, over the last days: did a deploy or the data's growth start it?"],
      mitigation: ['Profile the slow route (traces); add capacity or fix the query in working hours.'],
    },
    tests: [
      {
        name: 'one request in twenty is slow for a day',
        input: fastRequests('gateway', 100, 95).map((s) => ({ ...s, values: s.values.replace('x200', 'x1500') })),
        at: '1440m',
        fires: [{ tempora_component: 'gateway', job: 'gateway' }],
      },
      {
        name: 'one in a thousand is slow',
        input: fastRequests('gateway', 1000, 999).map((s) => ({ ...s, values: s.values.replace('x200', 'x1500') })),
        at: '1440m',
        fires: [],
      },
    ],
  },
];
