// Autoscaling on queue depth on the real node, the two ways an adopter runs it: prometheus-adapter with the
// rules the platform chart ships, which the pool's own HPA reads, and KEDA, for which the operator gives the
// AgentPool a ScaledObject. Either runs as host processes built from the Go module proxy (test/k8s), beside a
// Prometheus that scrapes the pool's pods for tempora_generation_queue_depth. Agent tasks put on the pool's
// Redis stream and held running (claimed by a consumer that keeps them, as a worker busy with a slow model
// call does) raise the queue depth: the HPA adds pods. Once they are gone the depth falls to 0 and the pool
// goes back to its minimum, through the scale-down stabilization the pool sets (0 s here, so that the test
// takes minutes).
//
// The node needs Linux, root and cgroups. A cold build of KEDA is longer than a CI run can spend, so its suite
// runs only when TEMPORA_BUILD_KEDA=1 asks or the binaries are cached (test/k8s/keda.ts); elsewhere it is
// skipped and says why.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import * as R from '../../operator/src/kube/resources.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { kedaHpaName } from '../../operator/src/reconcilers/agent-pool.ts';
import { redisKeyPrefix } from '../../operator/src/reconcilers/gateway-ref.ts';
import { WORKER_PORT } from '../../operator/src/reconcilers/workload.ts';
import { applyAs } from '../../operator/test/cluster.ts';
import { freePort } from '../../scripts/infra.ts';
import { poolKeys } from '../../services/generation/src/pool/protocol.ts';
import type { ExternalMetricsServer } from '../k8s/external-metrics.ts';
import { kedaUnavailableReason, startKeda } from '../k8s/keda.ts';
import { type KubeNode, skipWithoutNode } from '../k8s/node.ts';
import { startPrometheusAdapter } from '../k8s/prometheus-adapter.ts';
import { prometheusBinaries } from '../support/prometheus.ts';
import { waitFor } from '../support/wait.ts';
import { startOperatorOnNode, startPoolNode } from './pool-node.ts';

const NS = 'tempora-autoscaling';
const TAG = 'autoscaling';
const image = { registry: 'local', version: TAG, pullPolicy: 'Never' };
const MIN = 1;
const MAX = 3;
/** Queued tasks per pod: TASKS of them want MAX pods. */
const TARGET = 2;
const TASKS = 6;
/** The consumer that holds the tasks, in the pool's consumer group. */
const HOLDER = 'autoscaling-test';

/** What serves the queue depth to an HPA, and the HPA that scales the pool with it. */
interface Scaler {
  name: string;
  /** Why it cannot run here, or undefined. */
  unavailable(): string | undefined;
  start(node: KubeNode, prometheusUrl: string): Promise<ExternalMetricsServer>;
  /** The pool's spec.autoscaling. */
  autoscaling(prometheusUrl: string): Record<string, unknown>;
  /** The HPA that scales the pool. */
  hpa: string;
}

const SCALERS: Scaler[] = [
  {
    name: "prometheus-adapter and the pool's own HPA",
    unavailable: () => undefined,
    start: startPrometheusAdapter,
    autoscaling: () => ({ scaleDownStabilizationSeconds: 0 }),
    hpa: 'agents',
  },
  {
    name: 'KEDA',
    unavailable: kedaUnavailableReason,
    start: (node) => startKeda(node),
    autoscaling: (prometheusAddress) => ({ prometheusAddress, scaleDownStabilizationSeconds: 0 }),
    hpa: kedaHpaName('agents'),
  },
];

for (const scaler of SCALERS) describeScaling(scaler);

function describeScaling(scaler: Scaler): void {
  describe(`AgentPool autoscaling on queue depth with ${scaler.name} on the real node`, function () {
    this.timeout(600_000);
    let node: KubeNode;
    let admin: KubeClient;
    let op: Operator | undefined;
    let metricsServer: ExternalMetricsServer | undefined;
    let prometheus: ChildProcess | undefined;
    let redis: { url: string; stop(): Promise<void> } | undefined;
    let prometheusUrl: string;
    let discovery: NodeJS.Timeout | undefined;

    before(async function () {
      skipWithoutNode(this);
      const unavailable = scaler.unavailable();
      if (unavailable) {
        process.stdout.write(`      skipped: ${unavailable}\n`);
        this.skip();
      }
      this.timeout(90 * 60_000);
      ({ node, admin, redis } = await startPoolNode(NS, TAG));

      // Prometheus finds the pool's pods through a file the test keeps current from the API server: Debian's
      // Prometheus is built without Kubernetes service discovery. Targets are labelled with their namespace and
      // pod, as the Prometheus Operator labels a PodMonitor's.
      const { prometheus: binary } = prometheusBinaries();
      const port = await freePort();
      prometheusUrl = `http://127.0.0.1:${port}`;
      const config = join(node.runDir, 'prometheus.yml');
      const targets = join(node.runDir, 'agent-pool-targets.json');
      writeFileSync(targets, '[]');
      writeFileSync(
        config,
        `global: {scrape_interval: 2s}
scrape_configs:
  - job_name: agent-pool
    file_sd_configs: [{files: [${targets}], refresh_interval: 1s}]
`,
      );
      discovery = setInterval(() => {
        void admin
          .list(R.Pod, { labelSelector: 'app.kubernetes.io/name=generation-agents' }, NS)
          .then(({ items }) => {
            const running = items.filter((p) => p.status?.podIP && !p.metadata.deletionTimestamp);
            const groups = running.map((p) => ({ targets: [`${p.status!.podIP}:${WORKER_PORT}`], labels: { namespace: NS, pod: p.metadata.name } }));
            writeFileSync(`${targets}.next`, JSON.stringify(groups));
            renameSync(`${targets}.next`, targets);
          })
          .catch(() => undefined);
      }, 1000);
      const log = openSync(join(node.runDir, 'prometheus.log'), 'a');
      prometheus = spawn(
        binary,
        [`--config.file=${config}`, `--storage.tsdb.path=${join(node.runDir, 'prometheus-data')}`, `--web.listen-address=127.0.0.1:${port}`],
        { stdio: ['ignore', log, log] },
      );
      closeSync(log);

      // Before the operator, whose first look then finds the external metrics API.
      metricsServer = await scaler.start(node, prometheusUrl);
      op = await startOperatorOnNode(node, admin, NS, TAG);
    });

    afterEach(async function () {
      if (this.currentTest?.state !== 'failed' || !node) return;
      // The run's folder goes with the node: the last lines of Prometheus' and KEDA's logs are kept here.
      const tails = ['prometheus.log', 'prometheus-adapter.log', 'keda-operator.log', 'keda-metrics-apiserver.log'].map((f) => {
        const path = join(node!.runDir, f);
        return existsSync(path) ? `${f}:\n${readFileSync(path, 'utf8').split('\n').slice(-12).join('\n')}` : '';
      });
      process.stderr.write(`${await node.report(NS)}\n${await scalingState()}\n${tails.join('\n')}\n`);
    });

    /** Each link of the chain a failed scale stops at: the metric in Prometheus, KEDA's HPA, the Deployment, the pool. */
    const scalingState = async () => {
      const look = async (what: string, read: () => Promise<unknown>) =>
        `${what}: ${JSON.stringify(await read().catch((err: unknown) => `(unreadable: ${String(err)})`))}`;
      return [
        await look('queue depth in Prometheus', async () =>
          (await fetch(`${prometheusUrl}/api/v1/query?query=tempora_generation_queue_depth`)).json().then((a) => (a as { data: unknown }).data),
        ),
        await look(`HPA ${scaler.hpa} status`, async () => (await admin.get(R.HorizontalPodAutoscaler, NS, scaler.hpa)).status),
        await look('Deployment agents replicas', replicas),
        await look('AgentPool agents status', poolCounts),
      ].join('\n');
    };

    after(async function () {
      this.timeout(120_000);
      await op?.stop();
      await metricsServer?.stop();
      clearInterval(discovery);
      prometheus?.kill('SIGTERM');
      await redis?.stop();
      await node?.stop();
    });

    const keys = () => poolKeys(redisKeyPrefix(NS, 'tempora'));
    const redisCli = (...args: string[]) => {
      const r = spawnSync('redis-cli', ['-u', redis!.url, ...args], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.trim();
    };
    const replicas = async () => {
      const dep = await admin.get(R.Deployment, NS, 'agents');
      return { wanted: dep.spec?.replicas ?? 0, available: dep.status?.availableReplicas ?? 0 };
    };
    const poolCounts = async () => (await admin.get(R.AgentPool, NS, 'agents')).status as { replicas?: number; desiredReplicas?: number } | undefined;

    it('scales the pool up while its queue is long and back to its minimum once it drains', async function () {
      await applyAs(admin, {
        apiVersion: 'tempora.dev/v1alpha1',
        kind: 'AgentPool',
        metadata: { name: 'agents', namespace: NS },
        spec: {
          gatewayRef: 'tempora',
          image,
          minReplicas: MIN,
          maxReplicas: MAX,
          queueDepthTarget: TARGET,
          models: { presets: [{ name: 'balanced', provider: 'offline', model: 'offline' }], policy: { default: 'balanced' } },
          // No CPU request: no metrics-server runs here, and the queue is the signal.
          resources: { requests: { memory: '96Mi' } },
          autoscaling: scaler.autoscaling(prometheusUrl),
        },
      });
      const hpa = await waitFor(
        `the HPA ${scaler.hpa}, and the pool at its minimum`,
        async () => (await replicas()).available === MIN && (await admin.getOrUndefined(R.HorizontalPodAutoscaler, NS, scaler.hpa)),
        { timeoutMs: 300_000, intervalMs: 1000 },
      );
      // The one HPA of the pool scales on the queue alone: its pods request no CPU.
      assert.deepEqual(
        (await admin.list(R.HorizontalPodAutoscaler, {}, NS)).items.map((h) => h.metadata.name),
        [scaler.hpa],
      );
      assert.deepEqual(
        hpa.spec?.metrics?.map((m) => m.type),
        ['External'],
      );
      await waitFor(
        'Prometheus scraping the pool',
        async () => {
          const answer = (await (await fetch(`${prometheusUrl}/api/v1/query?query=tempora_generation_queue_depth{pool="agents"}`)).json()) as {
            data: { result: unknown[] };
          };
          return answer.data.result.length > 0;
        },
        { timeoutMs: 120_000, intervalMs: 1000 },
      );

      // The queue: TASKS entries taken by a consumer that keeps them, claimed anew every second so that no worker
      // takes them over as abandoned (AGENT_POOL_CLAIM_IDLE_MS), as a worker running them would. Added and read
      // in one transaction: Redis serves the pool's worker, blocked reading the stream, only after the EXEC, by
      // when the holder has read them (added alone, the worker took them first and dropped them as malformed).
      const { tasks, group } = keys();
      const added = redisCli(
        '--no-raw',
        'EVAL',
        `local ids = {}
         for i = 1, ${TASKS} do ids[i] = redis.call('XADD', KEYS[1], '*', 'task', 'null', 'task_id', 'held-' .. i) end
         redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ${TASKS}, 'STREAMS', KEYS[1], '>')
         return ids`,
        '1',
        tasks,
        group,
        HOLDER,
      );
      const ids = [...added.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
      assert.equal(ids.length, TASKS, added);
      const holding = setInterval(() => spawnSync('redis-cli', ['-u', redis!.url, 'XCLAIM', tasks, group, HOLDER, '0', ...ids, 'JUSTID']), 1000);
      try {
        const queued = Date.now();
        await waitFor(
          `${MAX} pods for ${TASKS} queued tasks`,
          async () => {
            const r = await replicas();
            const counts = await poolCounts();
            return r.available === MAX && counts?.desiredReplicas === MAX && counts.replicas === MAX;
          },
          { timeoutMs: 300_000, intervalMs: 1000 },
        );
        process.stdout.write(`      scaled up ${MIN} → ${MAX} in ${Math.round((Date.now() - queued) / 1000)} s\n`);
        assert.equal(Number(redisCli('XLEN', tasks)), TASKS, 'the tasks still queued');
      } finally {
        clearInterval(holding);
      }

      // Drained: the tasks are done (acked and deleted, as a worker does).
      redisCli('XACK', tasks, group, ...ids);
      redisCli('XDEL', tasks, ...ids);
      const drained = Date.now();
      await waitFor(
        `the pool back to ${MIN} pod`,
        async () => {
          const r = await replicas();
          const counts = await poolCounts();
          return r.wanted === MIN && counts?.desiredReplicas === MIN;
        },
        { timeoutMs: 300_000, intervalMs: 1000 },
      );
      process.stdout.write(`      scaled down ${MAX} → ${MIN} in ${Math.round((Date.now() - drained) / 1000)} s\n`);
    });
  });
}
