// Operator benchmark on the real control plane: 1,000 custom resources of mixed kinds applied at once.
// Each round first times the control plane's own share of the work with no operator (floor.ts), then the
// operator on a fresh control plane, and prints time to all Ready as a ratio to that floor, writes per
// reconcile, status writes per custom resource, writes per minute at steady state and the operator's RSS.
// The operator runs as its own process (node operator/src/main.ts), as in a cluster. Ready waits for
// available pods, which the tests' kubelet stand-in reports in both runs (no node runs 1,000 custom
// resources' pods on 2 cores). --floor runs the floor alone.
//   npm run bench:operator -- [--count 1000] [--steady-seconds 60] [--gateway-every 10] [--rounds 1] [--floor]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import * as R from '../../operator/src/kube/resources.ts';
import { collectionPath } from '../../operator/src/kube/resources.ts';
import { applyAs, type Cluster, clientFor, startCluster } from '../../operator/test/cluster.ts';
import { agentPool, gateway, graphWorker, simulationBudget } from '../../operator/test/fixtures.ts';
import { KubeletStandIn } from '../../operator/test/kubelet-stand-in.ts';
import { tlsSecret } from '../../operator/test/tls-secret.ts';
import { announced, asJson, shownAt } from '../../test/support/platform.ts';
import { waitFor } from '../../test/support/wait.ts';
import { controlPlaneFloor, type FloorFigures } from './floor.ts';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '1000' },
    'steady-seconds': { type: 'string', default: '60' },
    'gateway-every': { type: 'string', default: '10' },
    rounds: { type: 'string', default: '1' },
    floor: { type: 'boolean', default: false },
  },
});
const count = Number(values.count);
const steadySeconds = Number(values['steady-seconds']);
const gatewayEvery = Number(values['gateway-every']);
/**
 * How often the kubelet stand-in lists the pods to report the new ones: it lists all of them (about 1,300),
 * so the default 200 ms of the tests would cost kube-apiserver more than the pods themselves. The same in
 * the floor and the operator's run.
 */
const KUBELET_POLL_MS = 1000;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * One TemporaGateway in `--gateway-every` (default 10; each owns a Deployment, Service, ConfigMap and PDB per
 * service and more, its Services' cluster IPs allocated by kube-apiserver one at a time), then an
 * AgentPool serving it (a TemporaGateway takes one pool: a second would run nothing, AnotherPoolServes), then
 * GraphWorkers of that TemporaGateway and SimulationBudgets in turn. The budgets name no TemporaGateway: theirs would be
 * Ready only once its simulation service reported them, and none runs here (GatewayNotFound, reconciled
 * and reported all the same).
 */
function resources(n: number, gatewayEvery: number): KubeObject[] {
  const out: KubeObject[] = [];
  let current = '';
  for (let i = 0; i < n; i++) {
    const k = i % gatewayEvery;
    if (k === 0) {
      current = `gw-${i}`;
      out.push(gateway(current));
    } else if (k === 1) out.push(agentPool(`ap-${i}`, { gatewayRef: current }));
    else if (k % 2 === 0) out.push(graphWorker(`wk-${i}`, k % 4 === 0 ? 'renderer' : 'daily', { gatewayRef: current }));
    else out.push(simulationBudget(`sb-${i}`));
  }
  return out;
}

const PLURAL: Record<string, R.ResourceType> = {
  TemporaGateway: R.TemporaGateway,
  GraphWorker: R.GraphWorker,
  AgentPool: R.AgentPool,
  SimulationBudget: R.SimulationBudget,
};

/** Sums per metric name; writes also per `<verb> <resource>` under `writes <verb> <resource>`. */
async function scrape(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const sums = new Map<string, number>();
  const add = (key: string, value: number) => sums.set(key, (sums.get(key) ?? 0) + value);
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (!m) continue;
    const [, name, labels = '', value] = m;
    if (name === 'tempora_operator_api_writes_total') {
      if (labels.includes('resource="leases"')) continue;
      const label = (l: string) => new RegExp(`${l}="([^"]*)"`).exec(labels)?.[1];
      add(`writes ${label('verb')} ${label('resource')}`, Number(value));
    }
    add(name!, Number(value));
  }
  return sums;
}

/** A fresh control plane with the kubelet stand-in reporting on its pods, stopped after `fn`. */
async function withCluster<T>(fn: (cluster: Cluster) => Promise<T>): Promise<T> {
  const cluster = await startCluster();
  const kubelet = new KubeletStandIn(cluster.admin);
  kubelet.start(KUBELET_POLL_MS);
  try {
    return await fn(cluster);
  } finally {
    await kubelet.stop();
    await cluster.cp.stop();
  }
}

/**
 * The Secrets the Gateways name (operator/test/fixtures.ts), as an install has them before its custom
 * resources: without them every TemporaGateway is Degraded (SecretMissing) and looked at again each minute. One
 * certificate serves every TemporaGateway's TLS Secret (openssl once, not once per TemporaGateway).
 */
function secrets(objs: KubeObject[]): KubeObject[] {
  const { secret: tls } = tlsSecret('tls', 'default', 'bench.tempora.test', 365);
  const url = Buffer.from('postgres://bench').toString('base64');
  return [
    ...['tempora-keys', 'tempora-providers', 'tempora-billing'].map((name) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: 'default' },
      data: {},
    })),
    ...['tempora-db', 'tempora-redis'].map((name) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: 'default' }, data: { url } })),
    ...objs.filter((o) => o.kind === 'TemporaGateway').map((gw) => ({ ...tls, metadata: { name: `${gw.metadata.name}-tls`, namespace: 'default' } })),
  ];
}

const floorRun = (): Promise<FloorFigures> =>
  withCluster((cluster) => controlPlaneFloor(cluster, clientFor(cluster.operatorKubeconfig), resources(count, gatewayEvery)));

const operatorRun = () =>
  withCluster(async (cluster) => {
    // The image's command line (operator/Dockerfile's CMD), V8 flags included, as in a cluster.
    const [, ...cmdArgs] = JSON.parse(/^CMD (\[.*\])$/m.exec(readFileSync(join(ROOT, 'operator', 'Dockerfile'), 'utf8'))![1]!) as string[];
    const operator = spawn(process.execPath, [...cmdArgs.slice(0, -1), join(ROOT, cmdArgs.at(-1)!)], {
      env: {
        ...process.env,
        KUBECONFIG: cluster.operatorKubeconfig,
        // Bound at once; the port is read from the operator's start line.
        OPERATOR_PORT: '0',
        LEADER_ELECTION_NAMESPACE: 'tempora-system',
        POD_NAME: 'bench',
        LOG_LEVEL: 'info',
        RESYNC_SECONDS: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Its start line names the port; of the rest, only what LOG_LEVEL=error would have shown is passed on.
    const listening = announced(
      operator,
      (line) => {
        const entry = asJson(line);
        return entry?.msg === 'operator started' ? Number(entry.port) : undefined;
      },
      shownAt('error', (line) => process.stderr.write(`${line}\n`)),
    );
    const kill = () => operator.kill('SIGKILL');
    process.once('exit', kill);
    try {
      const port = await listening;
      await waitFor('operator ready', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).ok, { timeoutMs: 30_000, intervalMs: 200 });
      await waitFor('operator leading', async () => (await scrape(port)).get('leader_election_master_status') === 1, { timeoutMs: 30_000, intervalMs: 200 });
      const objs = resources(count, gatewayEvery);
      const total = Object.fromEntries(Object.keys(PLURAL).map((kind) => [kind, objs.filter((o) => o.kind === kind).length]));
      // Ready is followed through one watch per kind, opened before the first apply: polling lists cost the
      // API server the encoding of every object twice a second, on the very CPU the run is measuring.
      const readyByKind = new Map(Object.keys(PLURAL).map((kind) => [kind, new Set<string>()]));
      let readyCount = 0;
      const watching = new AbortController();
      const watches = Object.entries(PLURAL).map(([kind, r]) =>
        cluster.admin
          .watch(collectionPath(r, 'default'), {}, watching.signal, (event) => {
            if (event.type === 'ERROR' || event.type === 'BOOKMARK') return;
            const o = event.object;
            const c = ((o.status?.conditions ?? []) as { type: string; status: string; observedGeneration?: number }[]).find((x) => x.type === 'Ready');
            const set = readyByKind.get(kind)!;
            const before = set.size;
            // A SimulationBudget is Ready once its TemporaGateway's simulation service reports it, and no service
            // runs here: it counts once the operator has reconciled it and said why (Ready at its generation).
            const done = kind === 'SimulationBudget' ? c !== undefined : c?.status === 'True';
            if (done && c?.observedGeneration === o.metadata.generation) set.add(o.metadata.name!);
            else set.delete(o.metadata.name!);
            readyCount += set.size - before;
          })
          .catch((error: unknown) => {
            if (!watching.signal.aborted) throw error;
          }),
      );
      const closeWatches = async () => {
        watching.abort();
        await Promise.all(watches);
      };
      for (const secret of secrets(objs)) await applyAs(cluster.admin, secret);
      const started = performance.now();
      const queue = [...objs];
      const applying = Promise.all(
        Array.from({ length: 32 }, async () => {
          for (let o = queue.shift(); o; o = queue.shift()) await applyAs(cluster.admin, o);
        }),
      );
      await applying.catch(async (err: unknown) => {
        await closeWatches();
        throw err;
      });
      const applied = performance.now();
      let lastReport = 0;
      await waitFor(
        `${count} Ready`,
        async () => {
          if (process.env.BENCH_VERBOSE && performance.now() - lastReport > 2000) {
            lastReport = performance.now();
            const m = await scrape(port);
            const kinds = [...readyByKind].map(([kind, set]) => `${kind} ${set.size}/${total[kind]}`).join(', ');
            console.error(
              `${((lastReport - started) / 1000).toFixed(1)}s ready=${readyCount} (${kinds}) reconciles=${m.get('controller_runtime_reconcile_total')} depth=${m.get('workqueue_depth')} writes=${m.get('tempora_operator_api_writes_total')}`,
            );
          }
          return readyCount === count;
        },
        { timeoutMs: 600_000, intervalMs: 50 },
      ).finally(closeWatches);
      const allReady = performance.now();
      const atReady = await scrape(port);
      // After Ready, kube-controller-manager still creates Pods for a while and status follows their counts;
      // steady state starts once the operator has written nothing for 5 s (at most 60 s after Ready).
      const writesNow = async () => (await scrape(port)).get('tempora_operator_api_writes_total') ?? 0;
      let previous = await writesNow();
      const settleDeadline = performance.now() + 60_000;
      for (let quiet = 0; quiet < 5 && performance.now() < settleDeadline; ) {
        await new Promise((r) => setTimeout(r, 1000));
        const w = await writesNow();
        quiet = w === previous ? quiet + 1 : 0;
        previous = w;
      }
      const settled = await scrape(port);
      await new Promise((r) => setTimeout(r, steadySeconds * 1000));
      const steady = await scrape(port);
      const writes = atReady.get('tempora_operator_api_writes_total') ?? 0;
      const reconciles = atReady.get('controller_runtime_reconcile_total') ?? 0;
      const settledWrites = settled.get('tempora_operator_api_writes_total') ?? 0;
      const steadyWrites = (steady.get('tempora_operator_api_writes_total') ?? 0) - settledWrites;
      const figures = {
        customResources: count,
        applySeconds: +((applied - started) / 1000).toFixed(1),
        timeToAllReadySeconds: +((allReady - started) / 1000).toFixed(1),
        reconciles,
        reconcileErrors: atReady.get('controller_runtime_reconcile_errors_total') ?? 0,
        writes,
        writesPerReconcile: +(writes / reconciles).toFixed(2),
        writesByResource: Object.fromEntries([...atReady].filter(([k, v]) => k.startsWith('writes ') && v > 0).map(([k, v]) => [k.slice(7), v])),
        writesWhileSettling: settledWrites - writes,
        // The operator writes its custom resources only through their status subresource, once settled.
        statusWritesPerResource: Object.fromEntries(
          Object.entries(PLURAL).map(([kind, r]) => [kind, +((settled.get(`writes patch ${r.plural}/status`) ?? 0) / total[kind]!).toFixed(2)]),
        ),
        steadyStateWritesPerMinute: +((steadyWrites * 60) / steadySeconds).toFixed(1),
        operatorRssMB: +((steady.get('process_resident_memory_bytes') ?? 0) / 2 ** 20).toFixed(0),
        operatorHeapUsedMB: +((steady.get('nodejs_heap_size_used_bytes') ?? 0) / 2 ** 20).toFixed(0),
        targets: { timeToAllReadySeconds: 30, ratioToFloor: 1.15, statusWritesPerResource: 2, steadyStateWritesPerMinute: 0, operatorRssMB: 150 },
      };
      return figures;
    } finally {
      process.off('exit', kill);
      operator.kill('SIGTERM');
      await new Promise((r) => operator.once('exit', r));
    }
  });

for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
if (values.floor) {
  console.log(JSON.stringify(await floorRun(), null, 2));
  process.exit(0);
}
const runs = [];
for (let round = 1; round <= Number(values.rounds); round++) {
  // The floor first, then the operator, each on a control plane of its own: the ratio compares two runs
  // minutes apart on the same machine, not a figure with one measured on another day.
  const floor = await floorRun();
  const operator = await operatorRun();
  runs.push({ floor, operator, ratioToFloor: +(operator.timeToAllReadySeconds / floor.allAvailableSeconds).toFixed(2) });
  if (Number(values.rounds) > 1) console.error(`round ${round}: ${operator.timeToAllReadySeconds} s against a floor of ${floor.allAvailableSeconds} s`);
}
console.log(JSON.stringify(runs.length === 1 ? runs[0] : runs, null, 2));
