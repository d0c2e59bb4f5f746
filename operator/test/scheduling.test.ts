// Scheduling, pulling and pod metadata (spec.pods) and monitor labels (spec.monitoring) as the
// reconcilers turn them into children: every pod template of every kind gets them, a TemporaGateway's services
// override them, the operator's selector labels always win, and every monitor labels its targets with
// tempora_component. The API server's side (defaults, refusals, the pods' fate) is in deployed.test.ts.
import assert from 'node:assert/strict';
import type { AgentPool, GraphWorker, PodSettings, TemporaGateway } from '../src/api/v1alpha1/index.ts';
import type { Deployment, KubeObject, MetricsEndpoint } from '../src/kube/object.ts';
import * as R from '../src/kube/resources.ts';
import { desiredAgentPoolChildren } from '../src/reconcilers/agent-pool.ts';
import type { DesiredChild } from '../src/reconcilers/context.ts';
import { desiredGatewayChildren } from '../src/reconcilers/gateway.ts';
import { desiredGraphWorkerChildren } from '../src/reconcilers/graph-worker.ts';
import { COMPONENT_TARGET_LABEL, mergePodSettings } from '../src/reconcilers/workload.ts';
import { agentPool, gateway, graphWorker } from './fixtures.ts';

const SERVICES = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'];

const PODS: PodSettings = {
  labels: { team: 'platform', 'example.com/cost-centre': 'research' },
  annotations: { 'example.com/owner': 'sre' },
  imagePullSecrets: [{ name: 'regcred' }],
  nodeSelector: { pool: 'tempora', 'kubernetes.io/arch': 'amd64' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'tempora', effect: 'NoSchedule' }],
  affinity: {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }] },
    },
  },
  topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' }],
  priorityClassName: 'tempora-high',
};

// The API server's defaults, which the reconcilers expect filled in (the fixtures are what a user applies).
// The casts stand for the API server's defaulting: a fixture is untyped user input, and only the CRDs'
// defaults, which these helpers restate in part, make it the kind the reconcilers take.
const image = { registry: 'ghcr.io/tempora', version: '1.0.0', pullPolicy: 'IfNotPresent' };
const asGateway = (o: KubeObject): TemporaGateway =>
  ({ ...o, metadata: { ...o.metadata, uid: 'gw-uid' }, spec: { logLevel: 'info', rateLimits: { tiers: [] }, ...o.spec, image } }) as unknown as TemporaGateway;
const asPool = (o: KubeObject): AgentPool =>
  ({
    ...o,
    metadata: { ...o.metadata, uid: 'pool-uid' },
    spec: { gatewayRef: 'alpha', cpuTargetPercent: 70, concurrency: 8, queueDepthTarget: 20, ...o.spec, image },
  }) as unknown as AgentPool;
const asWorker = (o: KubeObject): GraphWorker =>
  ({
    ...o,
    metadata: { ...o.metadata, uid: `${o.metadata.name}-uid` },
    spec: {
      gatewayRef: 'alpha',
      concurrency: 2,
      dailyBudgetUsd: 5,
      timeZone: 'UTC',
      concurrencyPolicy: 'Forbid',
      successfulJobsHistoryLimit: 3,
      failedJobsHistoryLimit: 1,
      ...o.spec,
      image,
    },
  }) as unknown as GraphWorker;

type Template = NonNullable<Deployment['spec']>['template'];

/** A child as the API server would take it: of its resource's apiVersion and kind (apply-children's childObject sets them). */
const asApplied = (c: DesiredChild): KubeObject => ({ ...c.object, apiVersion: R.apiVersionOf(c.resource), kind: c.resource.kind });

/** Every pod template among the children: Deployments' and CronJobs' Jobs'. */
function templates(children: DesiredChild[]): Map<string, Template> {
  const out = new Map<string, Template>();
  for (const object of children.map(asApplied)) {
    if (R.isOf(R.Deployment, object)) out.set(object.metadata.name, object.spec!.template);
    if (R.isOf(R.CronJob, object)) out.set(object.metadata.name, object.spec!.jobTemplate.spec!.template);
  }
  return out;
}

/** The children's ServiceMonitors and PodMonitors, with the endpoints each scrapes. */
const monitors = (children: DesiredChild[]) =>
  children.map(asApplied).flatMap((m): (KubeObject & { endpoints: MetricsEndpoint[] })[] => {
    if (R.isOf(R.ServiceMonitor, m)) return [{ ...m, endpoints: m.spec?.endpoints ?? [] }];
    if (R.isOf(R.PodMonitor, m)) return [{ ...m, endpoints: m.spec?.podMetricsEndpoints ?? [] }];
    return [];
  });
const endpoints = (m: { endpoints: MetricsEndpoint[] }) => m.endpoints;

/** Asserts the template carries every field of `pods`, spread constraints scoped to the component's pods. */
function assertScheduled(name: string, t: Template, pods: PodSettings, component: string): void {
  const selector = { 'app.kubernetes.io/name': component, 'app.kubernetes.io/instance': t.metadata?.labels?.['app.kubernetes.io/instance'] };
  for (const [k, v] of Object.entries(pods.labels ?? {})) assert.equal(t.metadata?.labels?.[k], v, `${name}: label ${k}`);
  for (const [k, v] of Object.entries(pods.annotations ?? {})) assert.equal(t.metadata?.annotations?.[k], v, `${name}: annotation ${k}`);
  assert.deepEqual(t.spec?.imagePullSecrets, pods.imagePullSecrets, `${name}: imagePullSecrets`);
  assert.deepEqual(t.spec?.nodeSelector, pods.nodeSelector, `${name}: nodeSelector`);
  assert.deepEqual(t.spec?.tolerations, pods.tolerations, `${name}: tolerations`);
  assert.deepEqual(t.spec?.affinity, pods.affinity, `${name}: affinity`);
  assert.deepEqual(t.spec?.priorityClassName, pods.priorityClassName, `${name}: priorityClassName`);
  assert.deepEqual(
    t.spec?.topologySpreadConstraints,
    pods.topologySpreadConstraints?.map((c) => ({ labelSelector: { matchLabels: selector }, ...c })),
    `${name}: topologySpreadConstraints`,
  );
}

describe('pod settings and monitors of the children', function () {
  const gw = asGateway(gateway('alpha', { pods: PODS, monitoring: { labels: { release: 'kube-prometheus-stack' } } }));

  it('puts spec.pods into the pod template of every service of a TemporaGateway', function () {
    const found = templates(desiredGatewayChildren(gw, true));
    assert.deepEqual([...found.keys()].sort(), SERVICES.map((s) => `alpha-${s}`).sort());
    for (const svc of SERVICES) assertScheduled(svc, found.get(`alpha-${svc}`)!, PODS, svc);
  });

  it("puts spec.pods into the pods of an AgentPool and of every GraphWorker role, the daily Job's too", function () {
    const pool = templates(desiredAgentPoolChildren(asPool(agentPool('agents', { pods: PODS })), { queueMetric: false, podMonitor: true, keda: false }, gw));
    assertScheduled('agents', pool.get('agents')!, PODS, 'generation-agents');
    for (const role of ['renderer', 'expander', 'judge', 'daily']) {
      const worker = templates(desiredGraphWorkerChildren(asWorker(graphWorker(role, role, { pods: PODS })), true, gw));
      assertScheduled(role, worker.get(role)!, PODS, `graph-${role}`);
    }
  });

  it('leaves a pod spec as it was without spec.pods: no empty fields the operator would own', function () {
    const plain = asGateway(gateway('plain'));
    const t = templates(desiredGatewayChildren(plain, false)).get('plain-graph')!;
    for (const field of ['imagePullSecrets', 'nodeSelector', 'tolerations', 'affinity', 'topologySpreadConstraints', 'priorityClassName'])
      assert.ok(!(field in t.spec!), field);
    const empty = asGateway(gateway('empty', { pods: { tolerations: [], nodeSelector: {}, priorityClassName: '' } }));
    const e = templates(desiredGatewayChildren(empty, false)).get('empty-graph')!;
    assert.deepEqual(Object.keys(e.spec!).sort(), Object.keys(t.spec!).sort());
  });

  it('lets a TemporaGateway service override spec.pods: maps key by key, every other field whole', function () {
    const overridden = asGateway(
      gateway('over', {
        pods: PODS,
        services: {
          graph: { pods: { labels: { team: 'graph' }, nodeSelector: { pool: 'graph-nodes' }, tolerations: [], priorityClassName: 'graph-critical' } },
        },
      }),
    );
    const found = templates(desiredGatewayChildren(overridden, false));
    const graph = found.get('over-graph')!;
    assert.deepEqual(graph.metadata?.labels?.team, 'graph');
    assert.equal(graph.metadata?.labels?.['example.com/cost-centre'], 'research', 'the resource-wide label kept');
    assert.deepEqual(graph.spec?.nodeSelector, { pool: 'graph-nodes', 'kubernetes.io/arch': 'amd64' });
    assert.equal(graph.spec?.tolerations, undefined, 'an empty list clears the resource-wide tolerations');
    assert.equal(graph.spec?.priorityClassName, 'graph-critical');
    assert.deepEqual(graph.spec?.imagePullSecrets, PODS.imagePullSecrets, 'what the service does not set comes from spec.pods');
    assertScheduled('gateway', found.get('over-gateway')!, PODS, 'gateway');
    assert.deepEqual(mergePodSettings(undefined, { priorityClassName: 'x' }), { priorityClassName: 'x' });
    assert.deepEqual(mergePodSettings(PODS, undefined), PODS);
  });

  it("keeps its own labels and annotations over the spec's: a pod label cannot take the selector over", function () {
    // The CRDs refuse these keys (deployed.test.ts); an object stored before that, or written around the
    // schema, still cannot move the pods out of their Deployment's selector or the operator's indexes.
    const hijack = asGateway(
      gateway('hijack', {
        pods: {
          labels: {
            'app.kubernetes.io/name': 'other',
            'app.kubernetes.io/instance': 'other',
            'tempora.dev/owner-uid': 'other',
            'tempora.dev/temporagateway': 'other',
            extra: 'kept',
          },
          annotations: { 'tempora.dev/config-hash': 'forged' },
        },
      }),
    );
    for (const child of desiredGatewayChildren(hijack, false).map(asApplied)) {
      if (!R.isOf(R.Deployment, child)) continue;
      const spec = child.spec!;
      const labels = spec.template.metadata?.labels ?? {};
      for (const [k, v] of Object.entries(spec.selector.matchLabels ?? {})) assert.equal(labels[k], v, `${child.metadata.name}: ${k}`);
      assert.deepEqual([labels['tempora.dev/owner-uid'], labels['tempora.dev/temporagateway'], labels.extra], ['gw-uid', 'hijack', 'kept']);
      assert.notEqual(spec.template.metadata?.annotations?.['tempora.dev/config-hash'], 'forged');
    }
  });

  it('labels every monitor as spec.monitoring says and every target with tempora_component', function () {
    const found = monitors(desiredGatewayChildren(gw, true));
    assert.equal(found.length, SERVICES.length);
    for (const m of found) {
      const svc = m.metadata.labels!['app.kubernetes.io/name']!;
      assert.equal(m.metadata.labels!.release, 'kube-prometheus-stack', `${m.metadata.name}: the monitor label`);
      assert.deepEqual(
        endpoints(m).map((e) => e.relabelings),
        [[{ action: 'replace', targetLabel: COMPONENT_TARGET_LABEL, replacement: svc }]],
      );
    }
    assert.deepEqual(found.map((m) => m.metadata.labels!['app.kubernetes.io/name']).sort(), [...SERVICES].sort());
  });

  it("labels the workers' PodMonitors with their own spec.monitoring, else their TemporaGateway's, and agent-pool or graph-worker", function () {
    const [poolMonitor] = monitors(desiredAgentPoolChildren(asPool(agentPool('agents')), { queueMetric: false, podMonitor: true, keda: false }, gw));
    assert.equal(poolMonitor!.metadata.labels!.release, 'kube-prometheus-stack', "the TemporaGateway's labels");
    assert.deepEqual(endpoints(poolMonitor!)[0]!.relabelings, [{ action: 'replace', targetLabel: COMPONENT_TARGET_LABEL, replacement: 'agent-pool' }]);
    const own = asWorker(graphWorker('renderer', 'renderer', { monitoring: { labels: { release: 'other-prometheus' } } }));
    const [workerMonitor] = monitors(desiredGraphWorkerChildren(own, true, gw));
    assert.equal(workerMonitor!.metadata.labels!.release, 'other-prometheus', "the worker's own labels");
    assert.deepEqual(endpoints(workerMonitor!)[0]!.relabelings, [{ action: 'replace', targetLabel: COMPONENT_TARGET_LABEL, replacement: 'graph-worker' }]);
    const hijack = asWorker(
      graphWorker('judge', 'judge', { monitoring: { labels: { 'app.kubernetes.io/managed-by': 'someone', 'app.kubernetes.io/name': 'x' } } }),
    );
    const [kept] = monitors(desiredGraphWorkerChildren(hijack, true, gw));
    assert.deepEqual(
      [kept!.metadata.labels!['app.kubernetes.io/managed-by'], kept!.metadata.labels!['app.kubernetes.io/name']],
      ['tempora-operator', 'graph-judge'],
    );
  });

  it("serves each service's /metrics on a port of its own: the monitors scrape it, the Ingress routes only the API", function () {
    const children = desiredGatewayChildren(gw, true);
    const PORTS: Record<string, number> = { gateway: 8080, generation: 8081, graph: 8082, simulation: 8083, conductor: 8084, billing: 8085 };
    for (const svc of SERVICES) {
      const container = templates(children).get(`alpha-${svc}`)!.spec!.containers[0]!;
      const port = PORTS[svc]!;
      assert.deepEqual(
        container.ports,
        [
          { name: 'http', containerPort: port, protocol: 'TCP' },
          { name: 'metrics', containerPort: port + 1000, protocol: 'TCP' },
        ],
        svc,
      );
      assert.equal(container.env?.find((e) => e.name === 'METRICS_PORT')?.value, String(port + 1000), svc);
      const service = children.map(asApplied).find((c) => R.isOf(R.Service, c) && c.metadata.name === `alpha-${svc}`);
      assert.ok(service && R.isOf(R.Service, service));
      assert.deepEqual(
        service.spec?.ports?.map((p) => [p.name, p.port, p.targetPort]),
        [
          ['http', port, 'http'],
          ['metrics', port + 1000, 'metrics'],
        ],
        svc,
      );
      const monitor = monitors(children).find((m) => m.kind === 'ServiceMonitor' && m.metadata.name === `alpha-${svc}`)!;
      assert.deepEqual(
        endpoints(monitor).map((e) => [e.port, e.path]),
        [['metrics', '/metrics']],
        svc,
      );
    }
    const ingress = children.map(asApplied).find((c) => R.isOf(R.Ingress, c));
    assert.ok(ingress && R.isOf(R.Ingress, ingress));
    const backends = ingress.spec?.rules?.flatMap((r) => r.http?.paths.map((p) => p.backend.service?.port));
    assert.deepEqual(backends, [{ name: 'http' }], "the Ingress reaches the gateway's API port alone");
  });

  it('scrapes a worker on its one port, which no Ingress reaches', function () {
    for (const role of ['renderer', 'expander', 'judge']) {
      const [monitor] = monitors(desiredGraphWorkerChildren(asWorker(graphWorker(role, role)), true, gw));
      assert.deepEqual(
        endpoints(monitor!).map((e) => [e.port, e.path]),
        [['http', '/metrics']],
        role,
      );
    }
  });
});
