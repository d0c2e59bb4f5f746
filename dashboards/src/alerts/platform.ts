import { COMPONENTS, type Component, ofComponents, SERVICES, TEMPORA } from '../components.ts';
import type { AlertRule } from './types.ts';

/** What every TemporaGateway runs, and the operator: each must have a scraped target. */
const ALWAYS_THERE: Component[] = [...SERVICES, 'operator'];

/**
 * TemporaComponentAbsent's expression: one absent() per component that must be there (each yields that
 * component's label), and the agent pool's while generation reports a pool it hands agents to.
 */
function absentComponents(): string {
  const absent = (component: Component) => `absent(up{${ofComponents(component)}})`;
  return [...ALWAYS_THERE.map(absent), `(${absent('agent-pool')} and on () group(generation_agent_pool_workers{${ofComponents('generation')}}))`].join(' or ');
}

/** A target of each component, up for twenty minutes. */
const scraped = (...components: Component[]) =>
  components.map((c) => ({ series: `up{tempora_component="${c}", job="${c}", instance="${c}-0"}`, values: '1x20' }));

export const targetDown: AlertRule = {
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
};

export const componentAbsent: AlertRule = {
  alert: 'TemporaComponentAbsent',
  expr: absentComponents(),
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
};

export const rateLimiterMemoryFallback: AlertRule = {
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
};
