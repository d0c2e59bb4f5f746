/**
 * The platform's Prometheus rules: recording rules for the SLOs and every alert, each alert with its
 * runbook and its promtool unit tests in one place, so an alert cannot ship without either. build.ts
 * writes the plain rule file, the promtool test file and docs/runbooks/<alert>.md from this.
 *
 * Every selector names the components whose series it reads (components.ts), so the rules see Tempora's
 * targets only; rules.ts adds to each firing case its twin from another workload, which must stay silent.
 *
 * Longer than the ~400 lines a source file keeps to: it is a table of 20 alerts whose runbook prose and
 * test series make up most of it, and keeping each alert's three parts together is the point of the file.
 */
// Over 400 lines on purpose for now: each alert sits beside its runbook and promtool cases, so one alert
// is read in one place; the split by component (as the dashboards are) is issue 30's.
import { COMPONENTS, type Component, ofComponents, SERVICES, TEMPORA } from './components.ts';

/** Availability objective of every service: 99.9% of requests answered without a 5xx. */
export const AVAILABILITY_SLO = 0.999;
/** Latency objective: 99% of short requests answered within LATENCY_THRESHOLD_SECONDS. */
export const LATENCY_SLO = 0.99;
export const LATENCY_THRESHOLD_SECONDS = 1;
/** Routes that stream or render for as long as the work takes, outside the latency objective. */
const LONG_ROUTES = 'route!~".*(generate|stream|simulat|conductor|mcp).*"';

const GATEWAY = ofComponents('gateway');
const OPERATOR = ofComponents('operator');
const BILLING = ofComponents('billing');
/** Agents run in the generation service or, with a pool, in its AgentPool's workers. */
const AGENTS = ofComponents('generation', 'agent-pool');

/** The services' request histogram: other workloads' instrumentation (OpenTelemetry's HTTP conventions) shares its name. */
const SERVED = ofComponents(...SERVICES);

const WINDOWS = ['5m', '30m', '1h', '2h', '6h', '1d', '3d'] as const;
type Window = (typeof WINDOWS)[number];

const METRIC = 'http_server_request_duration_seconds';
export const errorRatio = (w: Window) => `job:http_request_errors:ratio_rate${w}`;
export const slowRatio = (w: Window) => `job:http_request_slow:ratio_rate${w}`;

export interface RecordingRule {
  record: string;
  expr: string;
}

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

export interface Runbook {
  /** What the alert means, in one paragraph. */
  meaning: string;
  /** What users see while it fires. */
  impact: string;
  /** Where to look first. */
  diagnosis: string[];
  /** What to do. */
  mitigation: string[];
}

export interface SeriesInput {
  series: string;
  /** promtool's expanding notation, e.g. `0+10x120` (one value per minute). */
  values: string;
}

export interface AlertTest {
  /** Why this case fires or stays silent. */
  name: string;
  input: SeriesInput[];
  at: string;
  /** The labels of each alert expected to fire at `at` (besides severity), or none: silent. */
  fires: Array<Record<string, string>>;
}

export interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  severity: 'critical' | 'warning' | 'info';
  summary: string;
  /** May use `{{ $labels.name }}` (rendered in the tests), never `$value` (its formatting is Prometheus's). */
  description: string;
  runbook: Runbook;
  tests: AlertTest[];
}

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

/**
 * TemporaCertificateExpiringSoon at two severities, as kube-prometheus's certificate alerts are: warning with
 * 3 to 14 days left, critical under 3 days or expired. The windows do not overlap, so one certificate fires
 * one of them at a time (and promtool, which compares every alert of a name, sees only the one a case expects).
 */
function certificateAlerts(): AlertRule[] {
  const left = `max by (namespace, gateway, secret) (tempora_operator_certificate_expiry_timestamp_seconds{${OPERATOR}}) - time()`;
  const day = 86_400;
  const expiry = (seconds: number) => [
    {
      series: 'tempora_operator_certificate_expiry_timestamp_seconds{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-tls"}',
      values: `${seconds}x120`,
    },
  ];
  const labels = { namespace: 'prod', gateway: 'tempora', secret: 'tempora-tls' };
  const runbook: Runbook = {
    meaning:
      "The certificate in the Ingress TLS Secret of a TemporaGateway (`spec.ingress.tlsSecretName`, its `tls.crt`) expires in under 14 days (warning) or under 3 days, or has expired (critical). cert-manager renews a certificate a third of its lifetime before it expires (30 days for Let's Encrypt's 90), so a warning means its renewal is failing. A TLS Secret that is missing or holds no certificate has no expiry: TemporaSecretMissing fires for it instead.",
    impact: "Nothing until it expires; then browsers and API clients refuse the gateway's HTTPS, and every request through the Ingress fails.",
    diagnosis: [
      'Tempora / Operator, Certificate expiry: which TemporaGateway and Secret, how long is left.',
      "`kubectl get secret <secret> -n <namespace> -o jsonpath='{.data.tls\\.crt}' | base64 -d | openssl x509 -noout -subject -enddate`: the certificate the Ingress serves.",
      'With cert-manager: `kubectl describe certificate -n <namespace>` (Ready, Renewal Time), then its CertificateRequest, Order and Challenges (an ACME challenge the Ingress or DNS does not answer is the usual cause).',
    ],
    mitigation: [
      'Fix what stops the renewal, then renew: `cmctl renew <certificate> -n <namespace>`.',
      'Without cert-manager: replace the Secret with a new certificate and key (`kubectl create secret tls <secret> --cert=… --key=… --dry-run=client -o yaml | kubectl apply -f -`); the Ingress controller serves it without a restart.',
      'The operator reads the new expiry at its next resync (`RESYNC_SECONDS`, 10 minutes by default), and the alert resolves.',
    ],
  };
  const common = { alert: 'TemporaCertificateExpiringSoon', runbook };
  return [
    {
      ...common,
      expr: `${left} < 14 * ${day} and ${left} >= 3 * ${day}`,
      for: '1h',
      severity: 'warning',
      summary: "A TemporaGateway's TLS certificate expires within 14 days.",
      description:
        "The certificate in Secret {{ $labels.secret }} ({{ $labels.namespace }}), served by TemporaGateway {{ $labels.gateway }}'s Ingress, expires within 14 days: its renewal is not happening.",
      tests: [
        { name: 'ten days left', input: expiry(10 * day), at: '90m', fires: [labels] },
        { name: 'thirty days left', input: expiry(30 * day), at: '90m', fires: [] },
      ],
    },
    {
      ...common,
      expr: `${left} < 3 * ${day}`,
      for: '5m',
      severity: 'critical',
      summary: "A TemporaGateway's TLS certificate expires within 3 days, or has expired.",
      description:
        "The certificate in Secret {{ $labels.secret }} ({{ $labels.namespace }}), served by TemporaGateway {{ $labels.gateway }}'s Ingress, expires within 3 days or has expired: HTTPS clients will refuse the gateway.",
      tests: [
        { name: 'one day left', input: expiry(day), at: '30m', fires: [labels] },
        { name: 'expired', input: expiry(0), at: '30m', fires: [labels] },
        { name: 'expired, then renewed for thirty days', input: [{ ...expiry(0)[0]!, values: `0x10 ${30 * day}x110` }], at: '30m', fires: [] },
      ],
    },
  ];
}

/** What every TemporaGateway runs, and the operator: each must have a scraped target. */
const ALWAYS_THERE: Component[] = [...SERVICES, 'operator'];

/**
 * TemporaComponentAbsent's expression: one absent() per component that must be there (each yields that
 * component's label), and the agent pool's while generation reports a pool it hands agents to.
 */
function componentAbsent(): string {
  const absent = (component: Component) => `absent(up{${ofComponents(component)}})`;
  return [...ALWAYS_THERE.map(absent), `(${absent('agent-pool')} and on () group(generation_agent_pool_workers{${ofComponents('generation')}}))`].join(' or ');
}

/** A target of each component, up for twenty minutes. */
const scraped = (...components: Component[]) =>
  components.map((c) => ({ series: `up{tempora_component="${c}", job="${c}", instance="${c}-0"}`, values: '1x20' }));

const SLO_DIAGNOSIS = [
  'Open the Tempora / Overview dashboard, pick the job: which routes fail (Errors) or are slow (Latency p50 / p99)?',
  "Read the service's logs for the failing requests: each log line carries the request id that the caller saw in X-Request-ID.",
  'Check what the service depends on: PostgreSQL and Redis reachability (`/health` reports both), and for the gateway the Upstreams row of its dashboard.',
];

export const ALERTS: AlertRule[] = [
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
  {
    alert: 'TemporaTargetDown',
    expr: `up{${TEMPORA}} == 0`,
    for: '5m',
    severity: 'warning',
    summary: 'Prometheus cannot scrape a Tempora process.',
    description: '{{ $labels.job }} at {{ $labels.instance }} has not answered a scrape for 5 minutes.',
    runbook: {
      meaning: 'A process that Prometheus should scrape does not answer /metrics: it is down, restarting, or unreachable.',
      impact: 'Whatever that replica serves is not served; its metrics and alerts are blind.',
      diagnosis: [
        "`kubectl get pods -l app.kubernetes.io/part-of=tempora` and the TemporaGateway CR's status conditions (Degraded says which pod cannot start).",
        '`kubectl describe pod` for CrashLoopBackOff, ImagePullBackOff or an unschedulable pod; `kubectl logs --previous` for the last crash.',
      ],
      mitigation: ["Fix what the pod's events name (configuration, image, resources); the operator restores the rest."],
    },
    tests: [
      {
        name: 'a target down for ten minutes',
        input: [{ series: 'up{tempora_component="graph", job="graph", instance="10.0.0.7:8082"}', values: '0x15' }],
        at: '10m',
        fires: [{ tempora_component: 'graph', job: 'graph', instance: '10.0.0.7:8082' }],
      },
      {
        name: 'a target up',
        input: [{ series: 'up{tempora_component="graph", job="graph", instance="10.0.0.7:8082"}', values: '1x15' }],
        at: '10m',
        fires: [],
      },
    ],
  },
  {
    alert: 'TemporaComponentAbsent',
    expr: componentAbsent(),
    for: '10m',
    severity: 'warning',
    summary: 'Prometheus scrapes no target of a Tempora component.',
    description:
      'No {{ $labels.tempora_component }} target has been scraped for 10 minutes: the component is not running, or this Prometheus does not select its monitor. Every other alert on it is blind.',
    runbook: {
      meaning: `Prometheus has no \`up\` series labelled \`tempora_component\` for a component that every TemporaGateway runs (${ALWAYS_THERE.join(', ')}), or for the agent pool while the generation service hands its agents to one. The platform's monitors set that label on every target (the operator's ServiceMonitors and PodMonitors, the operator chart's own); with none, no rule and no dashboard sees the component. The graph's workers are optional (a TemporaGateway may run none) and are not expected here; TemporaTargetDown covers those that are scraped.`,
      impact:
        "Nothing for users by itself; but the component's failures raise no alert and its dashboards say No data. If its pods are not running, what it serves is down.",
      diagnosis: [
        '`kubectl get pods -l app.kubernetes.io/part-of=tempora`: is the component running at all (then see TemporaTargetDown)?',
        "`kubectl get servicemonitors,podmonitors -A -l app.kubernetes.io/part-of=tempora`: the operator makes one per service and per worker Deployment when the Prometheus Operator's CRDs are served; the operator's own comes from its chart (`metrics.serviceMonitor`).",
        'Does your Prometheus select them? `kubectl get prometheus -A -o yaml`: `serviceMonitorSelector`, `podMonitorSelector` and their namespace selectors. kube-prometheus-stack selects `release: <its release>` by default: give the monitors that label (the monitor labels of the TemporaGateway and the chart, docs/operator.md).',
        "Prometheus's Status → Targets page: a target listed with the wrong labels means a monitor that does not set `tempora_component`, e.g. one written by hand.",
      ],
      mitigation: [
        'Label the monitors as your Prometheus selects them, or widen its selectors; targets appear within a scrape interval and the alert resolves.',
        'Deleted on purpose (a TemporaGateway or AgentPool removed): the alert resolves once the generation service no longer reports a pool; silence it for the time of a planned removal.',
      ],
    },
    tests: [
      {
        name: "the gateway's monitor not selected, the rest scraped",
        input: [...scraped(...COMPONENTS.filter((c) => c !== 'gateway')), { series: 'up{job="kube-scheduler", instance="10.0.0.2:10259"}', values: '1x20' }],
        at: '15m',
        fires: [{ tempora_component: 'gateway' }],
      },
      {
        name: 'nothing of Tempora scraped',
        input: [{ series: 'up{job="kube-scheduler", instance="10.0.0.2:10259"}', values: '1x20' }],
        at: '15m',
        fires: ALWAYS_THERE.map((c) => ({ tempora_component: c })),
      },
      { name: 'every component scraped', input: scraped(...COMPONENTS), at: '15m', fires: [] },
      {
        name: 'the graph gone for eight minutes, then back (a slow rollout)',
        input: [
          ...scraped(...COMPONENTS.filter((c) => c !== 'graph')),
          { series: 'up{tempora_component="graph", job="graph", instance="graph-0"}', values: '1x5 _x8 1x7' },
        ],
        at: '15m',
        fires: [],
      },
      {
        name: 'generation hands agents to a pool whose workers are not scraped',
        input: [
          ...scraped(...COMPONENTS.filter((c) => c !== 'agent-pool')),
          { series: 'generation_agent_pool_workers{tempora_component="generation", pool="agents"}', values: '2x20' },
        ],
        at: '15m',
        fires: [{ tempora_component: 'agent-pool' }],
      },
      { name: 'agents in-process and no GraphWorker: no pool, no graph worker expected', input: scraped(...ALWAYS_THERE), at: '15m', fires: [] },
    ],
  },
  {
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
  },
  {
    alert: 'TemporaModelProviderFailing',
    // A failure the image chain absorbed is an error of the provider it left and a call to it: the fallback
    // counter, relabelled by the provider it came from, adds those calls (its labels never equal the histogram's, so `or` keeps both).
    expr: `sum by (provider) (rate(generation_agent_errors_total{${AGENTS}}[5m])) / sum by (provider) (rate(generation_agent_duration_seconds_count{${AGENTS}}[5m]) or label_replace(rate(generation_provider_fallbacks_total{${AGENTS}}[5m]), "provider", "$1", "from", "(.+)")) > 0.1`,
    for: '10m',
    severity: 'warning',
    summary: 'A model provider fails agent calls.',
    description: "More than 10% of agent calls to {{ $labels.provider }} fail; the pipeline falls back where the spec's chains allow.",
    runbook: {
      meaning: 'A model vendor (native provider, aggregator or image vendor) answers errors, rate limits (429) or times out.',
      impact: 'Scenes take longer (fallbacks) or fail; failed generations are refunded.',
      diagnosis: [
        'Tempora / Generation, Agent failures by provider and code: 429 is quota, 401/403 a key, 5xx or timeout the vendor.',
        'Tempora / Generation, Provider fallbacks: failures the image chain absorbed (the scene still got an image from the next provider) count here too.',
      ],
      mitigation: [
        'Quota or key: renew it in the provider Secret; the pods read it on restart.',
        'Vendor outage: steer traffic with `model_policy`/preset defaults, or wait it out.',
      ],
    },
    tests: [
      {
        name: 'a fifth of aggregator calls fail',
        input: [
          {
            series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="openrouter", agent="scene", status="ok"}',
            values: '0+100x30',
          },
          { series: 'generation_agent_errors_total{tempora_component="generation", provider="openrouter", agent="scene", code="429"}', values: '0+20x30' },
        ],
        at: '20m',
        fires: [{ provider: 'openrouter' }],
      },
      {
        name: 'a few errors among many calls',
        input: [
          {
            series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="openrouter", agent="scene", status="ok"}',
            values: '0+100x30',
          },
          { series: 'generation_agent_errors_total{tempora_component="generation", provider="openrouter", agent="scene", code="429"}', values: '0+1x30' },
        ],
        at: '20m',
        fires: [],
      },
      {
        name: 'every native image call fails and the image vendor absorbs it',
        input: [
          {
            series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="image_vendor", agent="ImageGen", status="completed"}',
            values: '0+10x30',
          },
          {
            series: 'generation_provider_fallbacks_total{tempora_component="generation", agent="ImageGen", from="native", to="image_vendor"}',
            values: '0+10x30',
          },
          { series: 'generation_agent_errors_total{tempora_component="generation", provider="native", agent="ImageGen", code="http"}', values: '0+10x30' },
        ],
        at: '20m',
        fires: [{ provider: 'native' }],
      },
      {
        name: 'a rare native failure among many native calls, absorbed',
        input: [
          {
            series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="native", agent="ImageGen", status="completed"}',
            values: '0+100x30',
          },
          {
            series: 'generation_provider_fallbacks_total{tempora_component="generation", agent="ImageGen", from="native", to="image_vendor"}',
            values: '0+1x30',
          },
          { series: 'generation_agent_errors_total{tempora_component="generation", provider="native", agent="ImageGen", code="http"}', values: '0+1x30' },
        ],
        at: '20m',
        fires: [],
      },
    ],
  },
  {
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
  },
  {
    alert: 'TemporaRateLimiterMemoryFallback',
    expr: `max by (job, instance) (rate_limiter_memory_fallback{${TEMPORA}}) == 1`,
    for: '5m',
    severity: 'warning',
    summary: 'Rate limits are counted per process: Redis is unreachable.',
    description: '{{ $labels.job }} at {{ $labels.instance }} counts rate limits in memory: with N replicas, callers get up to N times their limit.',
    runbook: {
      meaning: 'Redis is configured but unreachable, so each replica counts rate limits alone (the in-memory insurance limiter).',
      impact: 'Limits still hold per replica, but not across replicas; the agent pool and caches that need Redis are degraded too.',
      diagnosis: ["The service's `/health` (redis: false); Redis's own pod and its logs."],
      mitigation: ['Restore Redis; services reconnect by themselves and the gauge returns to 0.'],
    },
    tests: [
      {
        name: 'fallen back for ten minutes',
        input: [{ series: 'rate_limiter_memory_fallback{tempora_component="gateway", job="gateway", instance="a"}', values: '1x15' }],
        at: '10m',
        fires: [{ job: 'gateway', instance: 'a' }],
      },
      {
        name: 'counting in Redis',
        input: [{ series: 'rate_limiter_memory_fallback{tempora_component="gateway", job="gateway", instance="a"}', values: '0x15' }],
        at: '10m',
        fires: [],
      },
    ],
  },
  {
    alert: 'TemporaAgentPoolBacklog',
    // Every process of a pool (the generation pods and its workers) reports the same stream's depth: max, per pool.
    expr: `max by (namespace, pool) (tempora_generation_queue_depth{${AGENTS}}) > 100`,
    for: '10m',
    severity: 'warning',
    summary: 'Agent tasks are piling up in an agent pool.',
    description: 'More than 100 agent tasks have waited on the agent pool {{ $labels.pool }} for 10 minutes: its workers cannot keep up.',
    runbook: {
      meaning: "The generation service puts agent tasks on the pool's Redis stream faster than the AgentPool's workers finish them.",
      impact: 'Scenes take longer; synchronous generations may time out.',
      diagnosis: [
        'Tempora / Generation: Queue depth by pool and agent latency; `kubectl get hpa` for the AgentPool (at its maximum?).',
        "The pool's worker pods: running and Ready? Their provider errors?",
      ],
      mitigation: ["Raise the AgentPool's `maxReplicas`, or fix the workers' provider errors that slow every task."],
    },
    tests: [
      {
        name: 'a backlog of 500 on one pool for a quarter hour, reported by two of its processes; another pool keeps up',
        input: [
          { series: 'tempora_generation_queue_depth{tempora_component="generation", pool="agents", instance="generation-0"}', values: '500x20' },
          { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="agents", instance="agents-0"}', values: '500x20' },
          { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="batch", instance="batch-0"}', values: '5x20' },
        ],
        at: '15m',
        fires: [{ pool: 'agents' }],
      },
      {
        name: 'short queues on every pool',
        input: [
          { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="agents", instance="agents-0"}', values: '5x20' },
          { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="batch", instance="batch-0"}', values: '50x20' },
        ],
        at: '15m',
        fires: [],
      },
    ],
  },
  {
    alert: 'TemporaGraphWorkerBudgetExhausted',
    expr: `max by (role) (graph_worker_budget_exhausted{${ofComponents('graph', 'graph-worker')}}) == 1`,
    for: '5m',
    severity: 'info',
    summary: 'A graph worker has spent its daily model budget.',
    description: 'The {{ $labels.role }} worker reached its daily budget and pauses until midnight UTC.',
    runbook: {
      meaning: 'The expander, judge or daily worker spent the USD budget its GraphWorker allows per day and stops calling models until the day ends.',
      impact: 'The graph grows or is moderated more slowly until midnight UTC; nothing fails.',
      diagnosis: ['Tempora / Graph, Spend against budget.'],
      mitigation: ["Raise the GraphWorker's `spec.dailyBudgetUsd` if the spend is expected; otherwise nothing to do."],
    },
    tests: [
      {
        name: 'the expander exhausted',
        input: [{ series: 'graph_worker_budget_exhausted{tempora_component="graph-worker", role="expander"}', values: '1x10' }],
        at: '8m',
        fires: [{ role: 'expander' }],
      },
      {
        name: 'within budget',
        input: [{ series: 'graph_worker_budget_exhausted{tempora_component="graph-worker", role="expander"}', values: '0x10' }],
        at: '8m',
        fires: [],
      },
    ],
  },
  {
    alert: 'TemporaOperatorReconcileErrors',
    expr: `sum by (controller) (rate(controller_runtime_reconcile_errors_total{${OPERATOR}}[5m])) > 0`,
    for: '15m',
    severity: 'warning',
    summary: 'The operator keeps failing to reconcile.',
    description: 'The {{ $labels.controller }} controller has failed reconciles for 15 minutes.',
    runbook: {
      meaning: 'Reconciles of a kind of custom resource fail and are retried with back-off.',
      impact: 'Changes to those resources are not applied; what runs keeps running.',
      diagnosis: ['`kubectl describe` the custom resources of that kind: their conditions and Events say why.', "The operator's logs for the failing key."],
      mitigation: ["Fix the resource (an invalid value, a missing Secret) or the operator's RBAC if it is refused."],
    },
    tests: [
      {
        name: 'errors for twenty minutes',
        input: [{ series: 'controller_runtime_reconcile_errors_total{tempora_component="operator", controller="temporagateway"}', values: '0+1x30' }],
        at: '25m',
        fires: [{ controller: 'temporagateway' }],
      },
      {
        name: 'no errors',
        input: [{ series: 'controller_runtime_reconcile_errors_total{tempora_component="operator", controller="temporagateway"}', values: '0x30' }],
        at: '25m',
        fires: [],
      },
    ],
  },
  {
    alert: 'TemporaOperatorWorkQueueStuck',
    expr: `max by (name) (workqueue_depth{${OPERATOR}}) > 0 and sum by (name) (rate(workqueue_work_duration_seconds_count{${OPERATOR}}[10m])) == 0`,
    for: '15m',
    severity: 'critical',
    summary: 'An operator work queue holds keys that nobody works on.',
    description: 'The {{ $labels.name }} work queue has had keys waiting and no work done for 15 minutes.',
    runbook: {
      meaning: "Keys wait in the operator's work queue but no reconcile finishes: the workers are stuck, or no replica holds the leader lease.",
      impact: 'No change to any custom resource of that kind is applied.',
      diagnosis: [
        'Tempora / Operator: Leader (is any replica 1?), Work-queue depth, Reconcile duration.',
        "The operator's logs around the last finished reconcile.",
      ],
      mitigation: ['Restart the operator pods (`kubectl rollout restart deployment/tempora-operator`); the lease moves to a fresh replica.'],
    },
    tests: [
      {
        name: 'keys waiting, no work done',
        input: [
          { series: 'workqueue_depth{tempora_component="operator", name="gateway"}', values: '3x40' },
          { series: 'workqueue_work_duration_seconds_count{tempora_component="operator", name="gateway"}', values: '10x40' },
        ],
        at: '30m',
        fires: [{ name: 'gateway' }],
      },
      {
        name: 'keys waiting and being worked on',
        input: [
          { series: 'workqueue_depth{tempora_component="operator", name="gateway"}', values: '3x40' },
          { series: 'workqueue_work_duration_seconds_count{tempora_component="operator", name="gateway"}', values: '10+5x40' },
        ],
        at: '30m',
        fires: [],
      },
    ],
  },
  {
    alert: 'TemporaSimulationBudgetExhausted',
    expr: `max by (budget) (simulation_budget_remaining_usd{${ofComponents('simulation')}}) <= 0 and max by (budget) (simulation_budget_limit_usd{${ofComponents('simulation')}}) > 0`,
    for: '5m',
    severity: 'warning',
    summary: 'A simulation budget has no room left.',
    description: 'The SimulationBudget {{ $labels.budget }} has nothing left in its current period: new runs against it are refused (402).',
    runbook: {
      meaning: "Settled and reserved runs together reached the budget's limit for its period; the SimulationBudget also reports the `Exhausted` condition.",
      impact:
        'Every new run that this budget applies to is refused until the period ends or the limit is raised; runs in flight finish within their reservation.',
      diagnosis: [
        'Tempora / Simulation, Spend against budget; `kubectl describe simulationbudget <name>` for its status and Events (one per alert threshold crossed).',
        '`GET /api/v1/simulations/usage` (service key) for who spent it.',
      ],
      mitigation: ['Raise `spec.limitUsd` if the spend is expected; the service reads the change without a restart.', 'Otherwise wait for the next period.'],
    },
    tests: [
      {
        name: 'exhausted for ten minutes',
        input: [
          { series: 'simulation_budget_remaining_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '0x15' },
          { series: 'simulation_budget_limit_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '10x15' },
        ],
        at: '10m',
        fires: [{ budget: 'research' }],
      },
      {
        name: 'room left',
        input: [
          { series: 'simulation_budget_remaining_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '4x15' },
          { series: 'simulation_budget_limit_usd{tempora_component="simulation", budget="research", period="2026-11"}', values: '10x15' },
        ],
        at: '10m',
        fires: [],
      },
    ],
  },
  {
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
  },
  {
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
  },
  ...certificateAlerts(),
  {
    alert: 'TemporaSecretMissing',
    expr: `max by (namespace, gateway, secret) (tempora_operator_secret_missing{${OPERATOR}}) == 1`,
    for: '10m',
    severity: 'critical',
    summary: 'A Secret the platform needs is missing or incomplete.',
    description:
      'Secret {{ $labels.secret }} in {{ $labels.namespace }}, named by TemporaGateway {{ $labels.gateway }}, does not exist, lacks a key the platform reads from it, or (a TLS Secret) holds no certificate.',
    runbook: {
      meaning:
        "The operator reads every Secret a TemporaGateway names: the Ingress's TLS Secret (`tls.crt` holding a certificate, `tls.key`), the keys, providers and billing Secrets (passed whole to the pods), and the database, Redis and callback keys (`spec.database`, `spec.redis`, `spec.generation.callbackSecret`: the key they name). One of them has been missing, or without what is read from it, for 10 minutes.",
      impact:
        'A TLS Secret: the Ingress controller serves its own default certificate, which browsers and API clients refuse. Any other: pods that start now (a rollout, a rescheduled or restarted pod) wait in `CreateContainerConfigError`, and the pods still running lose their service when they go.',
      diagnosis: [
        '`kubectl describe gateway <gateway> -n <namespace>`: the Degraded condition (reason SecretMissing) names each Secret, the spec field that names it, and the key it lacks; the Events show when it started.',
        "`kubectl get secret <secret> -n <namespace> -o jsonpath='{.data}'`: which keys it has (a typo in a key, or a Secret in another namespace, is the usual cause).",
        'A TLS Secret made by cert-manager: `kubectl describe certificate -n <namespace>` and its CertificateRequest, Order and Challenges say why it is not issued.',
        'Tempora / Operator, Secrets missing (row Certificates and Secrets): which TemporaGateways and Secrets, since when.',
      ],
      mitigation: [
        "Create the Secret or add the key (`kubectl create secret generic|tls …`), or correct the TemporaGateway's field. The operator looks again within a minute; pods waiting for it start by themselves.",
        'A TLS Secret: fix its issuer (cert-manager), or create it from a certificate and key with `kubectl create secret tls <secret> --cert=… --key=…`.',
      ],
    },
    tests: [
      {
        name: 'a TLS Secret missing for a quarter hour',
        input: [
          {
            series: 'tempora_operator_secret_missing{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-tls"}',
            values: '1x20',
          },
        ],
        at: '15m',
        fires: [{ namespace: 'prod', gateway: 'tempora', secret: 'tempora-tls' }],
      },
      {
        name: 'created five minutes after its TemporaGateway (cert-manager issuing it)',
        input: [
          {
            series: 'tempora_operator_secret_missing{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-tls"}',
            values: '1x5 0x15',
          },
        ],
        at: '15m',
        fires: [],
      },
      {
        name: 'every Secret there',
        input: [
          {
            series: 'tempora_operator_secret_missing{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-keys"}',
            values: '0x20',
          },
        ],
        at: '15m',
        fires: [],
      },
    ],
  },
];
