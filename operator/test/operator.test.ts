// The operator against a real kube-apiserver and kube-controller-manager (test/k8s/control-plane.ts).
// Tests run in order and share one cluster: later ones build on the resources earlier ones created.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { V1ReplicaSet } from '@kubernetes/client-node';
import { GatewayConfigSchema } from '../../services/gateway/src/config.ts';
import { GenerationConfigSchema } from '../../services/generation/src/config.ts';
import { service as asService, SERVICE_KEY, type SimulationHarness, startSimulation, userId } from '../../services/simulation/test/harness.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { OperatorConfig } from '../src/config.ts';
import type { KubeClient } from '../src/kube/client.ts';
import type { Deployment, Kind, KubeObject } from '../src/kube/object.ts';
import * as R from '../src/kube/resources.ts';
import type { Operator } from '../src/operator.ts';
import { QUEUE_DEPTH_METRIC } from '../src/reconcilers/agent-pool.ts';
import {
  applyAs,
  condition,
  counterSum,
  newOperator,
  type OperatorCluster,
  ownedBy,
  startOperatorCluster,
  stopOperatorCluster,
  type WithConditions,
  waitReady as waitReadyIn,
} from './cluster.ts';
import { agentPool, externalMetricsApi, fieldsAt, gateway, graphWorker, NS, simulationBudget } from './fixtures.ts';
import { ConfigMapVolume } from './kubelet-stand-in.ts';

const SERVICES = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'];
/** The port a listening server took. */
const portOf = (server: Server) => {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : undefined;
};
const ReplicaSet: R.ResourceType<Kind<V1ReplicaSet>> = { group: 'apps', version: 'v1', kind: 'ReplicaSet', plural: 'replicasets' };
const Job: R.ResourceType = { group: 'batch', version: 'v1', kind: 'Job', plural: 'jobs' };
const APIService: R.ResourceType = { group: 'apiregistration.k8s.io', version: 'v1', kind: 'APIService', plural: 'apiservices' };

describe('operator on a real control plane', function () {
  this.timeout(120_000);
  let cluster: OperatorCluster;
  let admin: KubeClient;
  let op: Operator;
  // The real simulation service (on this test's PostgreSQL), reading its budgets from the directory that
  // the ConfigMap of TemporaGateway alpha is mounted as: the operator asks it for each budget's spend.
  let sim: SimulationHarness;
  let budgets: ConfigMapVolume;
  const budgetsDir = mkdtempSync(join(tmpdir(), 'operator-budgets-'));
  let operatorOverrides: Partial<OperatorConfig>;

  before(async function () {
    // A clean machine builds kube-apiserver and kube-controller-manager first (minutes, once).
    this.timeout(1_800_000);
    sim = await startSimulation({ SIMULATION_BUDGETS_PATH: budgetsDir, BUDGETS_RELOAD_MS: '100' });
    // No cluster DNS here: every TemporaGateway's simulation Service is this process's service.
    operatorOverrides = { serviceUrlTemplate: sim.url, budgetPollMs: 500 };
    cluster = await startOperatorCluster('operator-a', operatorOverrides);
    ({ admin, op } = cluster);
    budgets = new ConfigMapVolume(admin, NS, 'alpha-simulation-budgets', budgetsDir);
    budgets.start();
    // The Gateways' keys Secret (spec.secrets.keys): the operator reads its SERVICE_KEY to ask the service.
    await applyAs(admin, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'tempora-keys', namespace: NS },
      data: { SERVICE_KEY: Buffer.from(SERVICE_KEY).toString('base64') },
    });
  });

  after(async function () {
    this.timeout(60_000);
    await budgets?.stop();
    await stopOperatorCluster({ ...cluster, op });
    await sim?.stop();
    rmSync(budgetsDir, { recursive: true, force: true });
  });

  const waitReady = <T extends WithConditions>(resource: R.ResourceType<T>, name: string, timeoutMs = 30_000) =>
    waitReadyIn(admin, resource, NS, name, timeoutMs);
  const owned = <T extends KubeObject>(resource: R.ResourceType<T>, owner: KubeObject) => ownedBy(admin, resource, owner, NS);

  /** Waits until no reconcile is queued or running for a continuous second. */
  async function settle(operator = op): Promise<void> {
    let quietSince = Date.now();
    await waitFor(
      'the operator to settle',
      async () => {
        if (!operator.idle()) quietSince = Date.now();
        return Date.now() - quietSince > 1000;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
  }

  /** The owner's one PodMonitor scrapes exactly its Deployment's pods: /metrics on the container's named port. */
  async function assertPodMonitor(owner: KubeObject, dep: Deployment, component: string, platformComponent: string): Promise<void> {
    const monitors = await owned(R.PodMonitor, owner);
    assert.equal(monitors.length, 1, `one PodMonitor for ${owner.metadata.name}`);
    const spec = monitors[0]!.spec!;
    const labels = { 'app.kubernetes.io/name': component, 'app.kubernetes.io/instance': owner.metadata.name };
    assert.deepEqual(spec.selector, { matchLabels: labels });
    const template = dep.spec!.template;
    assert.deepEqual(dep.spec!.selector.matchLabels, labels, 'the same pods as the Deployment');
    for (const [k, v] of Object.entries(labels)) assert.equal(template.metadata?.labels?.[k], v, `the pods carry ${k}`);
    const [port] = template.spec?.containers[0]?.ports ?? [];
    assert.equal(port?.containerPort, 8091);
    // Every target is labelled with the platform's name of the component, which alerts and dashboards select on.
    const relabelings = [{ action: 'replace', targetLabel: 'tempora_component', replacement: platformComponent }];
    assert.deepEqual(spec.podMetricsEndpoints, [{ port: port?.name, path: '/metrics', interval: '30s', relabelings }]);
  }

  const writes = (operator = op) => counterSum(operator, 'tempora_operator_api_writes_total', (l) => l.resource !== 'leases');
  const writesByResource = async () => {
    const { values } = await op.metrics.apiWrites.get();
    return Object.fromEntries(values.filter((v) => v.labels.resource !== 'leases').map((v) => [`${v.labels.verb} ${v.labels.resource}`, v.value]));
  };

  describe('schema', function () {
    const refused = async (obj: KubeObject, match: RegExp) => {
      await assert.rejects(applyAs(admin, obj), (err: Error) => {
        assert.match(err.message, / 422 /);
        assert.match(err.message, match);
        return true;
      });
    };

    it('refuses invalid custom resources', async function () {
      await refused(gateway('bad-version', { image: { version: 'not a tag!' } }), /spec.image.version/);
      await refused({ ...gateway('no-image'), spec: { ingress: { host: 'x.test' } } }, /spec.image: Required value/);
      await refused(gateway('bad-host', { ingress: { host: 'Not A Host' } }), /spec.ingress.host/);
      await refused(gateway('bad-replicas', { services: { graph: { replicas: -1 } } }), /spec.services.graph.replicas/);
      await refused(graphWorker('bad-role', 'painter'), /spec.role: Unsupported value/);
      await refused(graphWorker('bad-schedule', 'renderer', { schedule: '*/5 * * * *' }), /schedule applies to the daily role only/);
      await refused(agentPool('bad-range', { minReplicas: 5, maxReplicas: 2 }), /maxReplicas must be at least minReplicas/);
      await refused(
        gateway('crowded', { database: undefined, redis: undefined, services: { graph: { replicas: 2 } } }),
        /more than one replica needs spec.database and spec.redis/,
      );
      await refused(
        gateway('crowded', { redis: undefined, services: { gateway: { replicas: 3 } } }),
        /more than one replica needs spec.database and spec.redis/,
      );
      await refused(
        gateway('bad-tier', { rateLimits: { tiers: [{ name: 'gold', requestsPerMinute: 5 }] } }),
        /spec.rateLimits.tiers\[0\].name: Unsupported value: "gold"/,
      );
      await refused(gateway('bad-proxies', { trustedProxies: 10 }), /spec.trustedProxies/);
      await refused(gateway('bad-tracing', { tracing: { endpoint: 'collector:4318' } }), /spec.tracing.endpoint/);
      await refused(gateway('bad-sampling', { tracing: { endpoint: 'http://collector:4318', samplingRatio: 2 } }), /spec.tracing.samplingRatio/);
      await refused(
        agentPool('bad-policy', { models: { presets: [{ name: 'a', provider: 'p', model: 'm' }], policy: { default: 'b' } } }),
        /models.policy.default must name one of models.presets/,
      );
      await refused(
        gateway('bad-models', { generation: { models: { presets: [{ name: 'a', provider: 'p', model: 'm' }], policy: { default: 'b' } } } }),
        /models.policy.default must name one of models.presets/,
      );
      await refused(gateway('bad-public-url', { generation: { publicUrl: 'ftp://images.test' } }), /spec.generation.publicUrl/);
      await refused(simulationBudget('bad-run', { limitUsd: 5, perRunMaxUsd: 6 }), /perRunMaxUsd cannot exceed limitUsd/);
      await refused(simulationBudget('bad-scope', { scope: 'everything' }), /spec.scope/);
      await refused(simulationBudget('bad-period', { period: 'weekly' }), /spec.period: Unsupported value/);
      await refused({ ...simulationBudget('x'), metadata: { name: 'b'.repeat(249), namespace: NS } }, /at most 248 characters/);
      await refused(
        gateway('crowded', { database: undefined, services: { simulation: { replicas: 2 } } }),
        /more than one replica needs spec.database and spec.redis/,
      );
      // Pod and monitor labels never take the operator's own over: those select the pods and the children.
      await refused(
        gateway('pod-selector', { pods: { labels: { 'app.kubernetes.io/name': 'other' } } }),
        /spec.pods.labels: Invalid value.*they select the pods/,
      );
      await refused(
        gateway('svc-selector', { services: { graph: { pods: { labels: { 'tempora.dev/owner-uid': 'x' } } } } }),
        /spec.services.graph.pods.labels: Invalid value.*they select the pods/,
      );
      await refused(graphWorker('worker-selector', 'renderer', { pods: { labels: { 'app.kubernetes.io/instance': 'x' } } }), /spec.pods.labels: Invalid value/);
      await refused(
        agentPool('monitor-selector', { monitoring: { labels: { 'app.kubernetes.io/managed-by': 'me' } } }),
        /spec.monitoring.labels: Invalid value.*are the operator's/,
      );
      await refused(gateway('pod-hash', { pods: { annotations: { 'tempora.dev/config-hash': 'x' } } }), /spec.pods.annotations: Invalid value/);
      await refused(gateway('bad-label-key', { pods: { labels: { 'not a key': 'x' } } }), /a label key is a qualified name/);
      await refused(gateway('bad-label-value', { monitoring: { labels: { release: 'not a value' } } }), /spec.monitoring.labels.release/);
      await refused(
        gateway('bad-toleration', { pods: { tolerations: [{ key: 'k', operator: 'Sometimes' }] } }),
        /spec.pods.tolerations\[0\].operator: Unsupported value/,
      );
      await refused(
        agentPool('bad-spread', { pods: { topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone' }] } }),
        /spec.pods.topologySpreadConstraints\[0\].whenUnsatisfiable: Required value/,
      );
      await refused(graphWorker('bad-pull', 'daily', { pods: { imagePullSecrets: [{ name: 'Not_A_Name' }] } }), /spec.pods.imagePullSecrets\[0\].name/);
    });

    it('applies defaults and refuses a change of an immutable field', async function () {
      const created = await applyAs(admin, simulationBudget('defaults'));
      assert.equal(created.spec?.period, 'daily');
      assert.deepEqual(created.spec?.alertThresholds, [0.5, 0.8, 1]);
      assert.equal(created.spec?.gatewayRef, 'tempora');
      const gw = await applyAs(admin, graphWorker('immutable', 'renderer'));
      assert.equal(gw.spec?.concurrency, 2);
      assert.equal(gw.spec?.gatewayRef, 'tempora');
      await assert.rejects(applyAs(admin, graphWorker('immutable', 'judge')), /role is immutable/);
    });
  });

  describe('each kind from creation to Ready', function () {
    it('TemporaGateway: Deployments, Services, ConfigMaps, PDBs per service and an Ingress', async function () {
      await applyAs(admin, gateway('alpha'));
      const gw = await waitReady(R.TemporaGateway, 'alpha');
      const deployments = await owned(R.Deployment, gw);
      assert.deepEqual(deployments.map((d) => d.metadata.name).sort(), SERVICES.map((s) => `alpha-${s}`).sort());
      const perService: R.ResourceType[] = [R.Service, R.PodDisruptionBudget, R.ServiceMonitor];
      for (const kind of perService) assert.equal((await owned(kind, gw)).length, SERVICES.length, kind.kind);
      // A ConfigMap of settings per service, and the SimulationBudgets naming the TemporaGateway.
      assert.deepEqual(
        (await owned(R.ConfigMap, gw)).map((c) => c.metadata.name).sort(),
        [...SERVICES.map((s) => `alpha-${s}`), 'alpha-simulation-budgets'].sort(),
      );
      const [ingress] = await owned(R.Ingress, gw);
      assert.equal(ingress!.spec?.rules?.[0]?.host, 'alpha.tempora.test');

      const dep = deployments.find((d) => d.metadata.name === 'alpha-gateway')!;
      const ref = dep.metadata.ownerReferences?.[0];
      assert.deepEqual([ref?.kind, ref?.name, ref?.controller], ['TemporaGateway', 'alpha', true]);
      const managers = (dep.metadata.managedFields ?? []).filter((m) => m.operation === 'Apply');
      assert.deepEqual(
        managers.map((m) => m.manager),
        ['tempora-operator'],
      );
      const container = dep.spec!.template.spec!.containers[0]!;
      assert.equal(container.image, 'ghcr.io/tempora/gateway:1.0.0');
      assert.equal(dep.spec!.replicas, 2);
      // Ready once the pods are available: kube-controller-manager made the ReplicaSet and its pods, and the
      // kubelet stand-in reported them running and ready.
      assert.ok((await owned(ReplicaSet, dep)).length === 1, 'ReplicaSet created by the deployment controller');
      const available = gw.status!.services!.find((s) => s.name === 'gateway');
      assert.deepEqual([available?.replicas, available?.availableReplicas], [2, 2]);
      // The tiers reach the variable the gateway reads, in the form its configuration schema accepts.
      const config = (await admin.get(R.ConfigMap, NS, 'alpha-gateway')).data!;
      assert.deepEqual(GatewayConfigSchema.parse(config).RATE_LIMIT_TIERS, {
        free: { perMinute: 10, perDay: 100 },
        pro: { perMinute: 60, perDay: 1000 },
        enterprise: { perMinute: 300, perDay: 10000 },
      });
      assert.equal(config.GRAPH_URL, 'http://alpha-graph.default.svc:8082');
      const events = await admin.list(R.Event, { fieldSelector: 'involvedObject.name=alpha,involvedObject.kind=TemporaGateway' }, NS);
      assert.ok(
        events.items.some((e) => e.reason === 'Reconciled'),
        'a Ready transition Event',
      );
    });

    it('TemporaGateway: the generation service gets its models, callback secret and public URL', async function () {
      const models = {
        presets: [{ name: 'balanced', provider: 'native', model: 'gemini-2.5-flash', temperature: 0.7, maxTokens: 4096 }],
        policy: { default: 'balanced', allowed: ['balanced'] },
      };
      await applyAs(admin, gateway('gen', { generation: { models, callbackSecret: { secretName: 'tempora-callbacks' } } }));
      await waitReady(R.TemporaGateway, 'gen');
      const data = (await admin.get(R.ConfigMap, NS, 'gen-generation')).data!;
      // What the pods get must pass the generation service's own configuration schema.
      const parsed = GenerationConfigSchema.parse({ ...data, CALLBACK_SECRET: 'the value of the Secret key' });
      assert.deepEqual(parsed.MODEL_PRESETS, models.presets);
      assert.deepEqual(parsed.MODEL_POLICY, models.policy);
      assert.equal(parsed.PUBLIC_URL, 'https://gen.tempora.test', 'the Ingress URL by default');
      const container = (await admin.get(R.Deployment, NS, 'gen-generation')).spec!.template.spec!.containers[0]!;
      assert.deepEqual(
        container.env!.find((e) => e.name === 'CALLBACK_SECRET'),
        { name: 'CALLBACK_SECRET', valueFrom: { secretKeyRef: { name: 'tempora-callbacks', key: 'callback-secret' } } },
      );
      const gatewayData = (await admin.get(R.ConfigMap, NS, 'gen-gateway')).data!;
      assert.deepEqual([gatewayData.MODEL_PRESETS, gatewayData.PUBLIC_URL], [undefined, undefined], 'only the generation service');

      await applyAs(
        admin,
        gateway('gen', { generation: { models, callbackSecret: { secretName: 'tempora-callbacks' }, publicUrl: 'https://images.tempora.test/base' } }),
      );
      await waitFor(
        'an explicit publicUrl',
        async () => (await admin.get(R.ConfigMap, NS, 'gen-generation')).data!.PUBLIC_URL === 'https://images.tempora.test/base',
        { timeoutMs: 30_000 },
      );
      await admin.delete(R.TemporaGateway, NS, 'gen');
    });

    it('GraphWorker: a Deployment and a PodMonitor for renderer, a CronJob for daily', async function () {
      await applyAs(admin, graphWorker('renderer', 'renderer', { gatewayRef: 'alpha', replicas: 2 }));
      await applyAs(admin, graphWorker('daily', 'daily', { gatewayRef: 'alpha' }));
      const renderer = await waitReady(R.GraphWorker, 'renderer');
      const daily = await waitReady(R.GraphWorker, 'daily');
      const [dep] = await owned(R.Deployment, renderer);
      const container = dep!.spec!.template.spec!.containers[0]!;
      assert.deepEqual(container.command, ['node', 'src/worker.ts', 'renderer']);
      assert.ok(
        container.env!.some((e) => e.name === 'WORKER_PORT' && e.value === '8091'),
        'the worker is told where to serve /health and /metrics',
      );
      assert.equal(container.readinessProbe?.httpGet?.path, '/health');
      await assertPodMonitor(renderer, dep!, 'graph-renderer', 'graph-worker');
      assert.equal((await owned(R.PodMonitor, daily)).length, 0, 'the daily Job serves nothing to scrape');
      const [cron] = await owned(R.CronJob, daily);
      assert.equal(cron!.spec!.jobTemplate.spec!.template.spec!.containers[0]!.readinessProbe, undefined, 'a run-to-completion job has no probes');
      const spec = cron!.spec!;
      assert.equal(spec.schedule, '0 4 * * *');
      assert.equal(spec.concurrencyPolicy, 'Forbid');
      assert.equal(spec.timeZone, 'UTC');
      assert.equal(spec.successfulJobsHistoryLimit, 3);
      assert.equal((await owned(R.Deployment, daily)).length, 0);
    });

    it('AgentPool: a Deployment whose replicas the HorizontalPodAutoscaler owns, and a PodMonitor', async function () {
      await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha' }));
      const pool = await waitReady(R.AgentPool, 'agents');
      const [hpa] = await owned(R.HorizontalPodAutoscaler, pool);
      const spec = hpa!.spec!;
      assert.deepEqual([spec.minReplicas, spec.maxReplicas], [2, 6]);
      assert.equal(spec.metrics![0]!.resource!.target.averageUtilization, 70);
      assert.equal(spec.metrics!.length, 1, 'no queue-depth metric without a metrics adapter');
      const [dep] = await owned(R.Deployment, pool);
      const operatorFields = dep!.metadata.managedFields?.find((m) => m.manager === 'tempora-operator');
      assert.ok(fieldsAt(operatorFields?.fieldsV1, 'f:spec'), 'the operator owns fields of the spec');
      assert.equal(fieldsAt(operatorFields?.fieldsV1, 'f:spec', 'f:replicas'), undefined, 'the operator does not own replicas');
      const config = (await admin.get(R.ConfigMap, NS, 'agents')).data!;
      assert.equal(JSON.parse(config.MODEL_POLICY!).default, 'balanced');
      assert.deepEqual([config.AGENT_POOL, config.AGENT_POOL_CONCURRENCY], ['redis', '8']);
      const container = dep!.spec!.template.spec!.containers[0]!;
      assert.deepEqual(container.command, ['node', 'src/worker.ts']);
      assert.ok(container.env!.some((e) => e.name === 'WORKER_PORT' && e.value === '8091'));
      await assertPodMonitor(pool, dep!, 'generation-agents', 'agent-pool');
    });

    it('AgentPool: the queue-depth metric while a metrics adapter is registered, and only then', async function () {
      const adapter = externalMetricsApi('monitoring', 'metrics-adapter');
      const hpaMetrics = async () => (await admin.get(R.HorizontalPodAutoscaler, NS, 'agents')).spec?.metrics ?? [];
      assert.equal((await hpaMetrics()).length, 1, 'cpu only without an adapter');
      await applyAs(admin, adapter);
      try {
        const queueDepth = {
          type: 'External',
          external: {
            metric: { name: QUEUE_DEPTH_METRIC, selector: { matchLabels: { pool: 'agents' } } },
            target: { type: 'AverageValue', averageValue: '20' },
          },
        };
        const hasQueueDepth = async () => {
          const m = await hpaMetrics();
          return m.some((metric) => metric.type === 'External') ? m : undefined;
        };
        // The pods request no CPU, so a utilization would fail and keep the HPA from scaling down.
        assert.deepEqual(await waitFor('the queue-depth metric', hasQueueDepth, { timeoutMs: 30_000 }), [queueDepth]);
        await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha', resources: { requests: { cpu: '100m' } } }));
        const both = await waitFor('CPU beside the queue depth', async () => ((await hpaMetrics()).length === 2 ? hpaMetrics() : undefined), {
          timeoutMs: 30_000,
        });
        assert.equal(both[0]!.resource!.target.averageUtilization, 70);
        assert.deepEqual(both[1], queueDepth);
        await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha' }));
        await waitReady(R.AgentPool, 'agents');
      } finally {
        await admin.delete(APIService, '', adapter.metadata.name);
      }
      await waitFor('cpu only again once the adapter is gone', async () => (await hpaMetrics()).every((m) => m.type === 'Resource'), { timeoutMs: 30_000 });
    });

    it('SimulationBudget: enforced by the real simulation service, whose spend, alerts and exhaustion come back into status', async function () {
      this.timeout(180_000);
      const owner = 'budget-tester';
      const thresholds = [0.25, 0.5, 0.75];
      // The account as the gateway names it in X-User-ID (a UUID; the harness derives one per name).
      const spec = { gatewayRef: 'alpha', scope: `account:${userId(owner)}`, limitUsd: 0.2, perRunMaxUsd: 0.1, alertThresholds: thresholds };
      // A budget of an earlier operator version owned two ConfigMaps of its own: they are pruned.
      const created = await applyAs(admin, simulationBudget('sim', spec));
      await applyAs(admin, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: 'sim-usage',
          namespace: NS,
          labels: { 'app.kubernetes.io/managed-by': 'tempora-operator' },
          ownerReferences: [{ apiVersion: 'tempora.dev/v1alpha1', kind: 'SimulationBudget', name: 'sim', uid: created.metadata.uid!, controller: true }],
        },
        data: { period: '2020-01-01', spentUsd: '3' },
      });

      // The budget is a key of its TemporaGateway's ConfigMap, which the simulation pods mount as a directory.
      const key = await waitFor(
        'sim.json in alpha-simulation-budgets',
        async () => (await admin.get(R.ConfigMap, NS, 'alpha-simulation-budgets')).data?.['sim.json'],
        { timeoutMs: 30_000 },
      );
      assert.deepEqual(JSON.parse(key), { scope: spec.scope, period: 'daily', limitUsd: 0.2, perRunMaxUsd: 0.1, alertThresholds: thresholds });
      const dep = (await admin.get(R.Deployment, NS, 'alpha-simulation')).spec!;
      assert.deepEqual(
        dep.template.spec!.volumes!.find((v) => v.name === 'budgets'),
        { name: 'budgets', configMap: { name: 'alpha-simulation-budgets', defaultMode: 420 } },
      );
      assert.deepEqual(
        dep.template.spec!.containers[0]!.volumeMounts!.find((m) => m.name === 'budgets'),
        { name: 'budgets', mountPath: '/etc/tempora/simulation-budgets', readOnly: true },
        'the whole directory, no subPath',
      );

      const ready = await waitReady(R.SimulationBudget, 'sim');
      const today = new Date().toISOString().slice(0, 10);
      assert.deepEqual(ready.status, { ...ready.status, period: today, spentUsd: 0, reservedUsd: 0, remainingUsd: 0.2, alertsCrossed: [] });
      assert.deepEqual([condition(ready, 'Exhausted')?.status, condition(ready, 'Exhausted')?.reason], ['False', 'WithinBudget']);
      assert.equal(condition(ready, 'Ready')?.reason, 'Enforced');
      await waitFor('sim-usage pruned', async () => !(await admin.getOrUndefined(R.ConfigMap, NS, 'sim-usage')), { timeoutMs: 30_000 });

      // Runs of this owner reserve their maximum (perRunMaxUsd) and are charged what they spent, until the
      // budget has no room for one more.
      let refusal: Record<string, any> | undefined;
      const runs: Record<string, any>[] = [];
      while (!refusal && runs.length < 20) {
        const reply = await sim.run({ template: 'apollo-13', fidelity: 5 }, owner);
        if (reply.status === 402) refusal = reply.body;
        else runs.push(reply.body);
      }
      assert.equal(refusal?.budget, 'sim', 'the budget refuses the run that does not fit');
      assert.ok(runs.length >= 2 && runs.every((run) => ['completed', 'stopped'].includes(run.status)), JSON.stringify(runs.map((run) => run.status)));
      const report = (await sim.call('GET', '/api/v1/simulations/budgets/sim', { headers: asService })).body;
      assert.ok(report.spent_usd > 0.1 && report.reserved_usd === 0, JSON.stringify(report));
      assert.deepEqual(report.alerts_crossed, [0.25, 0.5], 'over half of the limit spent: the first two thresholds');

      // The operator writes the service's report into status, and one Warning Event per threshold crossed.
      const reported = await waitFor(
        'status as the service reports it',
        async () => {
          const b = await admin.get(R.SimulationBudget, NS, 'sim');
          return b.status?.spentUsd === report.spent_usd ? b : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.deepEqual(
        [reported.status?.period, reported.status?.spentUsd, reported.status?.reservedUsd, reported.status?.remainingUsd, reported.status?.alertsCrossed],
        [report.current_period, report.spent_usd, 0, report.remaining_usd, [0.25, 0.5]],
      );
      assert.equal(condition(reported, 'Exhausted')?.status, 'False');
      const alerts = async () =>
        (await admin.list(R.Event, { fieldSelector: 'involvedObject.name=sim,involvedObject.kind=SimulationBudget' }, NS)).items.filter(
          (e) => e.reason === 'AlertThresholdCrossed',
        ) as (KubeObject & { type: string; message: string })[];
      await waitFor('two alert Events', async () => (await alerts()).length === 2, { timeoutMs: 30_000 });
      const statusWrites = () => counterSum(op, 'tempora_operator_api_writes_total', (l) => l.resource === 'simulationbudgets/status');
      const writesBefore = await statusWrites();
      // Several polls later, with nothing spent meanwhile: no write, no second Event for a threshold.
      await sleep(2500);
      assert.equal(await statusWrites(), writesBefore, 'no status write while the spend stands still');
      const announced = await alerts();
      assert.deepEqual(
        announced.map((e) => e.type),
        ['Warning', 'Warning'],
      );
      assert.deepEqual(announced.map((e) => /past the (\d+)% alert threshold/.exec(e.message)?.[1]).sort(), ['25', '50']);

      // A run never spends more than it reserved, so spend reaches the limit only when the limit comes down
      // to it: lowered below what was spent, the budget is exhausted, without restarting anything.
      const lowered = await applyAs(admin, simulationBudget('sim', { ...spec, limitUsd: 0.1, perRunMaxUsd: 0.05 }));
      const exhausted = await waitFor(
        'Exhausted at the new generation',
        async () => {
          const b = await admin.get(R.SimulationBudget, NS, 'sim');
          const c = condition(b, 'Exhausted');
          return c?.status === 'True' && c.observedGeneration === lowered.metadata.generation && condition(b, 'Ready')?.status === 'True' ? b : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.equal(condition(exhausted, 'Exhausted')?.reason, 'LimitReached');
      assert.deepEqual([exhausted.status?.remainingUsd, exhausted.status?.alertsCrossed], [0, thresholds]);
      const events = await waitFor(
        'LimitReached and the third alert',
        async () => {
          const all = (await admin.list(R.Event, { fieldSelector: 'involvedObject.name=sim,involvedObject.kind=SimulationBudget' }, NS))
            .items as (KubeObject & {
            type: string;
            reason: string;
          })[];
          return all.some((e) => e.reason === 'LimitReached') && all.filter((e) => e.reason === 'AlertThresholdCrossed').length === 3 ? all : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.ok(events.some((e) => e.reason === 'LimitReached' && e.type === 'Warning'));
      const refused = await sim.run({ template: 'apollo-13', fidelity: 1 }, owner);
      assert.deepEqual([refused.status, refused.body.budget], [402, 'sim']);
    });
  });

  describe('SimulationBudget not enforced', function () {
    const waitReason = (name: string, reason: string) =>
      waitFor(
        `${name} Ready=False (${reason})`,
        async () => {
          const b = await admin.get(R.SimulationBudget, NS, name);
          const ready = condition(b, 'Ready');
          return ready?.status === 'False' && ready.reason === reason && ready.observedGeneration === b.metadata.generation ? b : undefined;
        },
        { timeoutMs: 30_000 },
      );
    const states = (b: KubeObject) => ['Ready', 'Progressing', 'Degraded'].map((type) => condition(b, type)?.status);

    it('says why: no TemporaGateway, a budget not read by the service yet, no service key', async function () {
      const orphan = await waitReason((await applyAs(admin, simulationBudget('orphan', { gatewayRef: 'nowhere' }))).metadata.name, 'GatewayNotFound');
      assert.deepEqual(states(orphan), ['False', 'False', 'True']);
      assert.equal(orphan.status?.spentUsd, undefined, 'nothing reported, nothing made up');
      assert.equal(condition(orphan, 'Exhausted'), undefined);

      // beta's budgets ConfigMap reaches no simulation service here (only alpha's is mounted): waiting, not failing.
      await applyAs(admin, gateway('beta', { ingress: undefined }));
      await applyAs(admin, simulationBudget('unread', { gatewayRef: 'beta' }));
      const unread = await waitReason('unread', 'NotLoaded');
      assert.deepEqual(states(unread), ['False', 'True', 'False']);
      assert.match(condition(unread, 'Ready')!.message, /beta-simulation has not read this budget yet/);

      await applyAs(admin, gateway('beta', { ingress: undefined, secrets: undefined }));
      const keyless = await waitReason('unread', 'ServiceKeyRequired');
      assert.deepEqual(states(keyless), ['False', 'False', 'True']);
      await admin.delete(R.TemporaGateway, NS, 'beta');
      await waitReason('unread', 'GatewayNotFound');
      await admin.delete(R.SimulationBudget, NS, 'unread');
      await admin.delete(R.SimulationBudget, NS, 'orphan');
    });
  });

  describe('convergence', function () {
    it('rolls spec changes through: image (pinned by digest where given), replicas, schedule', async function () {
      const gw = await admin.get(R.TemporaGateway, NS, 'alpha');
      const digest = `sha256:${'4'.repeat(64)}`;
      await applyAs(admin, gateway('alpha', { image: { version: '1.1.0', digests: { graph: digest } }, services: { gateway: { replicas: 3 } } }));
      await waitReady(R.TemporaGateway, 'alpha');
      for (const svc of SERVICES) {
        const dep = await admin.get(R.Deployment, NS, `alpha-${svc}`);
        const pinned = svc === 'graph' ? `@${digest}` : '';
        assert.equal(dep.spec!.template.spec!.containers[0]!.image, `ghcr.io/tempora/${svc}:1.1.0${pinned}`);
        // The deployment controller rolled it: a ReplicaSet with the new image exists.
        const sets = await owned(ReplicaSet, dep);
        assert.ok(
          sets.some((rs) => rs.spec?.template?.spec?.containers[0]?.image?.endsWith(`:1.1.0${pinned}`)),
          `${svc} new ReplicaSet`,
        );
      }
      assert.equal((await admin.get(R.Deployment, NS, 'alpha-gateway')).spec!.replicas, 3);
      assert.ok((await admin.get(R.TemporaGateway, NS, 'alpha')).metadata.generation! > gw.metadata.generation!);

      await applyAs(admin, graphWorker('daily', 'daily', { gatewayRef: 'alpha', schedule: '30 2 * * *', timeZone: 'Europe/Paris' }));
      await waitReady(R.GraphWorker, 'daily');
      const cron = (await admin.get(R.CronJob, NS, 'daily')).spec!;
      assert.deepEqual([cron.schedule, cron.timeZone], ['30 2 * * *', 'Europe/Paris']);
    });

    it('leaves replicas the spec does not set to kubectl scale', async function () {
      const scale = (name: string, replicas: number) =>
        admin.request('PATCH', `${R.objectPath(R.Deployment, NS, name)}/scale`, {
          body: { spec: { replicas } },
          contentType: 'application/merge-patch+json',
          query: { fieldManager: 'kubectl-scale' },
        });
      await scale('alpha-graph', 4);
      await scale('alpha-gateway', 7);
      op.resyncAll();
      await settle();
      assert.equal((await admin.get(R.Deployment, NS, 'alpha-graph')).spec!.replicas, 4, 'open field kept');
      await waitFor('spec-owned replicas restored', async () => (await admin.get(R.Deployment, NS, 'alpha-gateway')).spec!.replicas === 3, {
        timeoutMs: 30_000,
      });
    });

    it('prunes a child the spec no longer asks for', async function () {
      const gw = await admin.get(R.TemporaGateway, NS, 'alpha');
      const { ingress: _dropped, ...withoutIngress } = gateway('alpha', { image: { version: '1.1.0' }, services: { gateway: { replicas: 3 } } }).spec!;
      await applyAs(admin, { ...gateway('alpha'), spec: withoutIngress });
      await waitFor('Ingress pruned', async () => (await owned(R.Ingress, gw)).length === 0, { timeoutMs: 30_000 });
      await waitFor('status.url removed', async () => (await admin.get(R.TemporaGateway, NS, 'alpha')).status?.url === undefined, { timeoutMs: 30_000 });
      await waitReady(R.TemporaGateway, 'alpha');
    });

    it('recreates children deleted by hand and reverts edits to operator-owned fields', async function () {
      const before = await admin.get(R.Deployment, NS, 'alpha-generation');
      await admin.delete(R.Deployment, NS, 'alpha-generation');
      await admin.delete(R.Service, NS, 'alpha-graph');
      await admin.delete(R.CronJob, NS, 'daily');
      await admin.delete(R.HorizontalPodAutoscaler, NS, 'agents');
      await waitFor(
        'Deployment back',
        async () => {
          const d = await admin.getOrUndefined(R.Deployment, NS, 'alpha-generation');
          return d && d.metadata.uid !== before.metadata.uid && !d.metadata.deletionTimestamp;
        },
        { timeoutMs: 30_000 },
      );
      await waitFor('Service back', async () => admin.getOrUndefined(R.Service, NS, 'alpha-graph'), { timeoutMs: 30_000 });
      await waitFor('CronJob back', async () => admin.getOrUndefined(R.CronJob, NS, 'daily'), { timeoutMs: 30_000 });
      await waitFor('HPA back', async () => admin.getOrUndefined(R.HorizontalPodAutoscaler, NS, 'agents'), { timeoutMs: 30_000 });

      await admin.request('PATCH', R.objectPath(R.ConfigMap, NS, 'alpha-gateway'), {
        body: { data: { LOG_LEVEL: 'trace' } },
        contentType: 'application/merge-patch+json',
        query: { fieldManager: 'someone' },
      });
      await waitFor('ConfigMap edit reverted', async () => (await admin.get(R.ConfigMap, NS, 'alpha-gateway')).data?.LOG_LEVEL === 'info', {
        timeoutMs: 30_000,
      });
      await waitReady(R.TemporaGateway, 'alpha');
    });

    it('issues zero writes on a second full reconcile of a converged cluster', async function () {
      const owners: [R.ResourceType<WithConditions>, string][] = [
        [R.TemporaGateway, 'alpha'],
        [R.GraphWorker, 'renderer'],
        [R.GraphWorker, 'daily'],
        [R.AgentPool, 'agents'],
        [R.SimulationBudget, 'sim'],
      ];
      for (const [r, n] of owners) {
        await waitReady(r, n);
      }
      // Converged: kube-controller-manager has stopped changing the children's status, so the operator
      // has had nothing to write for a while.
      let last = await writes();
      let quietSince = Date.now();
      await waitFor(
        'no writes for 3 s',
        async () => {
          const now = await writes();
          if (now !== last || !op.idle()) [last, quietSince] = [now, Date.now()];
          return Date.now() - quietSince > 3000;
        },
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      const reconcilesBefore = await counterSum(op, 'controller_runtime_reconcile_total');
      const before = await writesByResource();
      op.resyncAll();
      await settle();
      assert.ok((await counterSum(op, 'controller_runtime_reconcile_total')) >= reconcilesBefore + 6, 'every resource reconciled again');
      assert.deepEqual(await writesByResource(), before);
    });

    it('converges after the API server restarts under it, with no duplicate children', async function () {
      const restartsBefore = await counterSum(op, 'tempora_operator_informer_restarts_total');
      await cluster.cp.killApiserver();
      // An outage of the API server that outlasts the watches is what is tested, so it lasts a while.
      await new Promise((r) => setTimeout(r, 1500));
      await cluster.cp.startApiserver();
      await applyAs(admin, gateway('alpha', { image: { version: '1.2.0' }, services: { gateway: { replicas: 3 }, generation: { replicas: 2 } } }));
      await applyAs(admin, simulationBudget('after-restart', { gatewayRef: 'alpha' }));
      await waitReady(R.SimulationBudget, 'after-restart', 60_000);
      const gw = await waitReady(R.TemporaGateway, 'alpha', 60_000);
      const deployments = await owned(R.Deployment, gw);
      assert.equal(deployments.length, SERVICES.length);
      assert.ok(deployments.every((d) => d.spec!.template.spec!.containers[0]!.image?.endsWith(':1.2.0')));
      assert.ok((await counterSum(op, 'tempora_operator_informer_restarts_total')) > restartsBefore, 'watches restarted');
      assert.ok(op.isLeader);
    });

    it('recovers from a forced 410 Gone by relisting, with no duplicate children', async function () {
      const gone = () => counterSum(op, 'tempora_operator_informer_relists_total', (l) => l.reason === 'gone');
      const before = await gone();
      for (const plural of ['temporagateways', 'deployments', 'configmaps']) {
        const informer = op.informers.get(plural)!;
        // The restart above left the watch cache starting at a recent revision, so resuming from revision 1
        // is far older than it holds: the API server answers 410.
        informer.resourceVersion = '1';
        informer.restartWatch();
      }
      await waitFor('three relists after 410', async () => (await gone()) >= before + 3, { timeoutMs: 30_000 });
      await applyAs(admin, gateway('alpha', { image: { version: '1.3.0' }, services: { gateway: { replicas: 3 }, generation: { replicas: 3 } } }));
      await waitFor('generation scaled', async () => (await admin.get(R.Deployment, NS, 'alpha-generation')).spec!.replicas === 3, { timeoutMs: 30_000 });
      const gw = await waitReady(R.TemporaGateway, 'alpha');
      assert.equal((await owned(R.Deployment, gw)).length, SERVICES.length);
      assert.equal((await owned(R.ConfigMap, gw)).length, SERVICES.length + 1, 'one per service and the SimulationBudgets');
    });
  });

  describe('operations', function () {
    it('serves /metrics, /healthz and /readyz', async function () {
      const base = `http://127.0.0.1:${op.port}`;
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const text = await (await fetch(`${base}/metrics`)).text();
      for (const name of [
        'controller_runtime_reconcile_total{controller="temporagateway",result="success"}',
        'controller_runtime_reconcile_errors_total',
        'controller_runtime_reconcile_time_seconds_bucket',
        'workqueue_depth{name="temporagateway"}',
        'workqueue_adds_total{name="temporagateway"}',
        'workqueue_retries_total',
        'workqueue_queue_duration_seconds_bucket',
        'workqueue_work_duration_seconds_bucket',
        'leader_election_master_status{name="tempora-operator"} 1',
      ]) {
        assert.ok(text.includes(name), name);
      }
    });

    it('elects one leader among two instances and hands over when it stops', async function () {
      const second = newOperator(cluster.operatorKubeconfig, 'operator-b', operatorOverrides);
      await second.start();
      // "Only one leader" has no event to wait on: a window of several lease retries is the test.
      await new Promise((r) => setTimeout(r, 3000));
      assert.ok(op.isLeader);
      assert.ok(!second.isLeader, 'only one leader');
      const lease = await admin.get(R.Lease, 'tempora-system', 'tempora-operator');
      assert.equal(lease.spec?.holderIdentity, 'operator-a');

      const stoppedAt = Date.now();
      await op.stop();
      op = second;
      await waitFor('operator-b to lead', async () => second.isLeader, { timeoutMs: 20_000 });
      assert.ok(Date.now() - stoppedAt < 5000, 'a released lease is taken over without waiting out its duration');
      await applyAs(admin, simulationBudget('handover', { gatewayRef: 'alpha', limitUsd: 3, perRunMaxUsd: 1 }));
      await waitReady(R.SimulationBudget, 'handover');
    });

    it('exports a span per reconcile over OTLP when the process is given an endpoint', async function () {
      const spans: { name: string; attributes: { key: string; value: { stringValue?: string } }[] }[] = [];
      const collector = createServer((req, res) => {
        let body = '';
        req.on('data', (chunk) => (body += chunk));
        req.on('end', () => {
          if (req.url === '/v1/traces') {
            for (const r of JSON.parse(body).resourceSpans) for (const scope of r.scopeSpans) spans.push(...scope.spans);
          }
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        });
      });
      await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
      await applyAs(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'traced' } });
      // As deployed: its own process, confined to one namespace and without leader election, so that it
      // works next to operator-a.
      const child = spawn(process.execPath, [fileURLToPath(new URL('../src/main.ts', import.meta.url))], {
        env: {
          ...process.env,
          KUBECONFIG: cluster.operatorKubeconfig,
          OPERATOR_PORT: '0',
          WATCH_NAMESPACE: 'traced',
          LEADER_ELECTION: 'false',
          LOG_LEVEL: 'silent',
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${portOf(collector)}`,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_BSP_SCHEDULE_DELAY: '100',
        },
        stdio: 'inherit',
      });
      try {
        await applyAs(admin, { ...simulationBudget('traced-budget'), metadata: { name: 'traced-budget', namespace: 'traced' } });
        const attribute = (span: (typeof spans)[number], key: string) => span.attributes.find((a) => a.key === key)?.value.stringValue;
        const span = await waitFor(
          'a reconcile span',
          async () => spans.find((sp) => sp.name === 'reconcile SimulationBudget' && attribute(sp, 'tempora.resource.name') === 'traced-budget'),
          { timeoutMs: 30_000 },
        );
        assert.deepEqual([attribute(span, 'k8s.namespace.name'), attribute(span, 'tempora.resource.kind')], ['traced', 'SimulationBudget']);
      } finally {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        assert.equal(await exited, 0, 'SIGTERM shuts down cleanly');
        collector.close();
        await admin.delete({ group: '', version: 'v1', kind: 'Namespace', plural: 'namespaces' }, '', 'traced');
      }
    });

    it('deletion garbage-collects every child', async function () {
      const gw = await admin.get(R.TemporaGateway, NS, 'alpha');
      const pool = await admin.get(R.AgentPool, NS, 'agents');
      await admin.delete(R.TemporaGateway, NS, 'alpha');
      await admin.delete(R.AgentPool, NS, 'agents');
      await admin.delete(R.GraphWorker, NS, 'daily');
      const ofGateway: R.ResourceType[] = [R.Deployment, R.Service, R.ConfigMap, R.Secret, R.PodDisruptionBudget, R.Ingress, R.ServiceMonitor];
      for (const r of ofGateway) {
        await waitFor(`${r.kind}s of alpha collected`, async () => (await owned(r, gw)).length === 0, { timeoutMs: 90_000, intervalMs: 500 });
      }
      const ofPool: R.ResourceType[] = [R.HorizontalPodAutoscaler, R.PodMonitor];
      for (const r of ofPool) {
        await waitFor(`${r.kind} of agents collected`, async () => (await owned(r, pool)).length === 0, { timeoutMs: 90_000, intervalMs: 500 });
      }
      await waitFor('CronJob collected', async () => !(await admin.getOrUndefined(R.CronJob, NS, 'daily')), { timeoutMs: 90_000, intervalMs: 500 });
      assert.equal((await admin.list(Job, {}, NS)).items.length, 0);
    });
  });
});
