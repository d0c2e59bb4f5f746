// The operator on a real node (test/k8s/node.ts): time from applying a TemporaGateway to its first answered
// request. The platform is installed as in the end-to-end tests (test/e2e/platform.ts: our images, the
// operator in the cluster under its ServiceAccount, PostgreSQL and Redis on the host); each round applies a
// new TemporaGateway on an empty database of its own (what a first install meets: migrations and the graph's
// seed), follows it to its first answers through its Service, then deletes it.
//   npm run bench:operator:real-node -- [--rounds 3]
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import * as R from '../../operator/src/kube/resources.ts';
import { applyAs, condition } from '../../operator/test/cluster.ts';
import { call, gatewayResource, gatewayUrl, NAMESPACE, startPlatform } from '../../test/e2e/platform.ts';
import { waitFor } from '../../test/support/wait.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' } } });
const rounds = Number(values.rounds);

interface Round {
  /** Seconds from the apply: the operator's Deployments exist, every pod is scheduled, every container has started, every pod is Ready. */
  deploymentsCreated: number;
  podsScheduled: number;
  containersStarted: number;
  podsReady: number;
  /** The gateway's own /health answers 200 through the Service (its database and Redis reachable). */
  firstGatewayAnswer: number;
  /** A graph read answered 200 through the gateway: the first request a user could make. */
  firstAnsweredRequest: number;
  gatewayReady: number;
  /** When each service's first pod became Ready. */
  serviceReady: Record<string, number>;
  /** The machine's load average (1 min) as the round began: other work shares its 2 cores. */
  loadAverage: number;
}

const platform = await startPlatform('bench');
process.once('SIGINT', () => void platform.stop().then(() => process.exit(130)));
const { admin } = platform;
const results: Round[] = [];
try {
  for (let round = 1; round <= rounds; round++) {
    const name = `bench-${round}`;
    const database = await platform.newDatabase(`bench-db-${round}`);
    const started = performance.now();
    const at = () => +((performance.now() - started) / 1000).toFixed(1);
    const serviceReady: Record<string, number> = {};
    const marks: Partial<Round> = { loadAverage: +loadavg()[0]!.toFixed(1), serviceReady };
    const mark = (key: Exclude<keyof Round, 'serviceReady' | 'loadAverage'>) => (marks[key] ??= at());
    const owner = await applyAs(admin, gatewayResource(name, 'bench', { databaseSecret: database }));

    // Pods and the TemporaGateway's status are read twice a second; the requests go out every 100 ms.
    const following = (async () => {
      const deadline = Date.now() + 15 * 60_000;
      while (marks.gatewayReady === undefined) {
        if (Date.now() > deadline) throw new Error(`TemporaGateway ${name} not Ready after 15 min: ${JSON.stringify(marks)}`);
        const deployments = (await admin.list(R.Deployment, {}, NAMESPACE)).items.filter((d) =>
          d.metadata.ownerReferences?.some((r) => r.uid === owner.metadata.uid),
        );
        if (deployments.length > 0) mark('deploymentsCreated');
        const pods = (await admin.list(R.Pod, { labelSelector: `tempora.dev/owner-uid=${owner.metadata.uid}` }, NAMESPACE)).items;
        const has = (p: KubeObject, type: string) =>
          ((p.status?.conditions ?? []) as { type: string; status: string }[]).some((c) => c.type === type && c.status === 'True');
        const expected = deployments.length;
        if (expected > 0 && pods.length >= expected) {
          if (pods.every((p) => has(p, 'PodScheduled'))) mark('podsScheduled');
          if (pods.every((p) => ((p.status?.containerStatuses ?? []) as { state?: { running?: unknown } }[]).some((c) => c.state?.running)))
            mark('containersStarted');
          if (pods.every((p) => has(p, 'Ready'))) mark('podsReady');
        }
        for (const p of pods.filter((pod) => has(pod, 'Ready'))) serviceReady[p.metadata.labels?.['app.kubernetes.io/name'] ?? '?'] ??= at();
        const gw = await admin.get(R.TemporaGateway, NAMESPACE, name);
        const ready = condition(gw, 'Ready');
        if (ready?.status === 'True' && ready.observedGeneration === gw.metadata.generation) mark('gatewayReady');
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    const url = await waitFor('the gateway Service', () => gatewayUrl(admin, name), { timeoutMs: 120_000, intervalMs: 100 });
    await waitFor('the gateway answering', async () => (await call(`${url}/health`, { timeoutMs: 2_000 })).status === 200, {
      timeoutMs: 600_000,
      intervalMs: 100,
    });
    mark('firstGatewayAnswer');
    await waitFor(
      'a graph read answered through the gateway',
      async () => (await call(`${url}/api/v1/graph/moments?limit=1`, { timeoutMs: 2_000, headers: { 'x-forwarded-for': '198.51.100.1' } })).status === 200,
      { timeoutMs: 600_000, intervalMs: 100 },
    );
    mark('firstAnsweredRequest');
    await following;
    results.push(marks as Round);
    console.error(`round ${round}: ${JSON.stringify(marks)}`);

    await admin.delete(R.TemporaGateway, NAMESPACE, name);
    await waitFor(
      "the TemporaGateway's pods gone",
      async () => (await admin.list(R.Pod, { labelSelector: `tempora.dev/owner-uid=${owner.metadata.uid}` }, NAMESPACE)).items.length === 0,
      { timeoutMs: 300_000, intervalMs: 1000 },
    );
  }
  const keys = (Object.keys(results[0]!) as (keyof Round)[]).filter((k): k is Exclude<keyof Round, 'serviceReady'> => k !== 'serviceReady');
  const median = (k: Exclude<keyof Round, 'serviceReady'>) => results.map((r) => r[k]).sort((a, b) => a - b)[Math.floor(results.length / 2)];
  console.log(JSON.stringify({ rounds: results, median: Object.fromEntries(keys.map((k) => [k, median(k)])) }, null, 2));
} finally {
  await platform.stop();
}
