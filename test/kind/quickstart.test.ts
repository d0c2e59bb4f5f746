// docs/kind.md's cluster half, run as written on the project's one-node test cluster (test/k8s/node.ts: a
// real kubelet, containerd and kube-proxy) in place of kind: the same Dockerfiles built into the node's
// containerd under the names the page loads into kind, then every block of the page that is not marked
// "kind only", in order, with a real helm and kubectl: install the operator and the platform, sign in,
// render a scene, open the graph, read the metrics, upgrade to a changed value and roll back (the platform
// answering after each), uninstall (nothing of ours left but the data the chart documents as kept). The
// gateway is reached through its Service's cluster IP, which the node routes from the host, instead of an
// ingress controller (the page's `GW=http://tempora.localhost` is kind only).
//
// The node needs Linux, root and cgroups; elsewhere the suite is skipped and says why.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { binaryDir } from '../k8s/control-plane.ts';
import { KubeNode, skipWithoutNode } from '../k8s/node.ts';
import { DEPLOYED_SERVICES } from '../../operator/src/reconcilers/platform-services.ts';
import { Helm } from '../helm/helm.ts';
import { kindDocBlocks, ROOT, runnable } from './kind-doc.ts';

const blocks = kindDocBlocks();
const chartDefaults = parse(readFileSync(join(ROOT, 'charts', 'tempora', 'values.yaml'), 'utf8')) as {
  postgresql: { image: string; persistence: { size: string } };
  redis: { image: string; persistence: { size: string } };
};
const NAMESPACE = 'tempora';

interface Gateway {
  metadata: { generation: number };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string; message: string }[] };
}

describe('docs/kind.md on the test node (install, sign in, render, upgrade, roll back, uninstall)', function () {
  let node: KubeNode | undefined;
  let env: NodeJS.ProcessEnv;
  let gatewayUrl = '';

  /** Runs shell text as the page's reader would, in one bash, failing on the first failing command. */
  function sh(script: string, extraEnv: NodeJS.ProcessEnv = {}, timeoutMs = 30 * 60_000): string {
    // curl fails on an HTTP error instead of printing it, so every command must succeed.
    const run = spawnSync('bash', ['-euo', 'pipefail', '-c', script.replaceAll(/curl -s /g, 'curl -sS --fail-with-body --max-time 300 ')], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: timeoutMs,
      env: { ...env, ...extraEnv },
    });
    assert.equal(run.status, 0, `the page's commands failed:\n${script}\n--- stdout ---\n${run.stdout.slice(-4000)}\n--- stderr ---\n${run.stderr.slice(-4000)}`);
    return run.stdout;
  }

  function gateway(): Promise<Gateway> {
    return node!.api<Gateway>('GET', `/apis/tempora.dev/v1alpha1/namespaces/${NAMESPACE}/gateways/tempora`);
  }

  /**
   * Waits until the release's rollout has finished: no pod terminating, every pod ready. Ready on the Gateway
   * means the new pods are available; the old ones may still be shutting down, and a request routed to one
   * in that moment can fail (seen once: a 502 from the gateway for generation right after an upgrade).
   */
  async function settled(): Promise<void> {
    const deadline = Date.now() + 5 * 60_000;
    for (;;) {
      type Pods = { items: { metadata: { name: string; deletionTimestamp?: string }; status?: { phase?: string; conditions?: { type: string; status: string }[] } }[] };
      // A loaded machine's API server may drop a request; the next poll asks again.
      const pods = await node!.api<Pods>('GET', `/api/v1/namespaces/${NAMESPACE}/pods`).catch(() => ({ items: [{ metadata: { name: '(API server unanswered)' } }] }) as Pods);
      const unsettled = pods.items.filter((p) => p.status?.phase !== 'Succeeded' && (p.metadata.deletionTimestamp || !p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')));
      if (unsettled.length === 0) return;
      if (Date.now() > deadline) assert.fail(`pods not settled: ${unsettled.map((p) => p.metadata.name).join(', ')}`);
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }

  /** The sign-in, scene, graph and metrics sections against the gateway's Service; their output lines. */
  function useThePlatform(): string[] {
    return sh(runnable(blocks, ['7.', '8.', '9.', '10.']), { GW: gatewayUrl }).trim().split('\n');
  }

  before(async function () {
    skipWithoutNode(this);
    // A first run builds Kubernetes, BuildKit, CoreDNS, kubectl and helm (about 25 min on 2 cores); cached,
    // the images still take minutes to build.
    this.timeout(90 * 60_000);
    const helm = Helm.build();
    const kubectl = spawnSync('bash', [join(ROOT, 'test', 'k8s', 'build-binaries.sh'), 'kubectl'], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (kubectl.status !== 0) throw new Error('building kubectl failed');
    node = await KubeNode.start();
    env = {
      ...process.env,
      KUBECONFIG: node.kubeconfigPath,
      PATH: [dirname(helm.binary), binaryDir(), dirname(process.execPath), process.env.PATH].join(':'),
      HELM_CACHE_HOME: join(helm.home, 'cache'),
      HELM_CONFIG_HOME: join(helm.home, 'config'),
      HELM_DATA_HOME: join(helm.home, 'data'),
    };

    // The page's images (docker build -t local/<name>:dev; kind load), built from the same Dockerfiles.
    for (const name of DEPLOYED_SERVICES) await node.buildImage({ dockerfile: `services/${name}/Dockerfile`, name, tag: 'dev' });
    await node.buildImage({ dockerfile: 'operator/Dockerfile', name: 'operator', tag: 'dev' });
    // PostgreSQL and Redis, which kind's node pulls from Docker Hub: built here and named as the chart's
    // defaults, so that the kubelet finds them (pull policy IfNotPresent) and the page's command runs as is.
    for (const [name, target] of [['postgresql', chartDefaults.postgresql.image], ['redis', chartDefaults.redis.image]] as const) {
      const ref = await node.buildImage({ dockerfile: `test/kind/images/${name}/Dockerfile`, context: `test/kind/images/${name}`, name: `${name}-test`, tag: 'dev' });
      const tagged: { status: number | null; stderr: string } = spawnSync('ctr', ['--address', node.containerdSocket, '-n', 'k8s.io', 'images', 'tag', '--force', `docker.io/${ref}`, target], { encoding: 'utf8' });
      assert.equal(tagged.status, 0, tagged.stderr);
    }
    // kind's node has a volume provisioner (local-path); this one has none, so the chart's two claims get a
    // host directory each, writable by the stores' uid 999.
    for (const [name, size] of [['postgresql', chartDefaults.postgresql.persistence.size], ['redis', chartDefaults.redis.persistence.size]] as const) {
      const path = join(node.runDir, 'volumes', name);
      mkdirSync(path, { recursive: true });
      chownSync(path, 999, 999);
      // Cluster-scoped, which node.apply (namespaced objects) does not address.
      await node.api('PATCH', `/api/v1/persistentvolumes/tempora-${name}?fieldManager=tempora-test&force=true`, {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `tempora-${name}` },
        spec: {
          capacity: { storage: size },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          hostPath: { path, type: 'Directory' },
          claimRef: { namespace: NAMESPACE, name: `data-tempora-${name}-0` },
        },
      }, 'application/apply-patch+yaml');
    }
  });

  after(async function () {
    this.timeout(120_000);
    if (node) assert.deepEqual(await node.stop(), [], 'the node left the host as it was');
  });

  it('installs the operator and the platform with the page commands, and the Gateway becomes Ready', function () {
    this.timeout(40 * 60_000);
    sh(runnable(blocks, ['5.', '6.']));
  });

  it('serves a signed-in request through the gateway: a scene rendered, the graph opened, the metrics counted', async function () {
    this.timeout(10 * 60_000);
    const svc = await node!.api<{ spec: { clusterIP: string; ports: { port: number }[] } }>('GET', `/api/v1/namespaces/${NAMESPACE}/services/tempora-gateway`);
    gatewayUrl = `http://${svc.spec.clusterIP}:${svc.spec.ports[0]!.port}`;
    const [user, , , , moment, ...metrics] = useThePlatform();
    assert.match(user!, /^[0-9a-f-]{36}$/);
    assert.equal(moment, 'Storming of the Bastille');
    assert.ok(metrics.some((l) => l.includes('route="proxy:generation",status="200"')), metrics.join('\n'));
  });

  it('upgrades to a changed value: the pods get it, and the platform answers', async function () {
    this.timeout(20 * 60_000);
    const [upgrade] = blocks.filter((b) => b.section.startsWith('11.') && !b.kindOnly);
    sh(upgrade!.script);
    const cm = await node!.api<{ data: Record<string, string> }>('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/tempora-gateway`);
    assert.equal(cm.data.LOG_LEVEL, 'debug');
    assert.equal((await gateway()).status?.observedGeneration, 2);
    await settled();
    useThePlatform();
  });

  it('rolls back to the first revision: the value is back, and the platform answers', async function () {
    this.timeout(20 * 60_000);
    const [, rollback] = blocks.filter((b) => b.section.startsWith('11.') && !b.kindOnly);
    sh(rollback!.script);
    const cm = await node!.api<{ data: Record<string, string> }>('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/tempora-gateway`);
    assert.equal(cm.data.LOG_LEVEL, 'info');
    await settled();
    useThePlatform();
  });

  it('uninstalls: nothing of ours is left but the PostgreSQL and Redis volumes and the Secrets that open them', async function () {
    this.timeout(10 * 60_000);
    const [, , uninstall] = blocks.filter((b) => b.section.startsWith('11.') && !b.kindOnly);
    sh(uninstall!.script);
    const expected = ['PersistentVolumeClaim/data-tempora-postgresql-0', 'PersistentVolumeClaim/data-tempora-redis-0', 'Secret/tempora-postgresql', 'Secret/tempora-redis'];
    const left = async (): Promise<string[]> => {
      const found: string[] = [];
      for (const [kind, path] of [
        ['Pod', `/api/v1/namespaces/${NAMESPACE}/pods`],
        ['Service', `/api/v1/namespaces/${NAMESPACE}/services`],
        ['ConfigMap', `/api/v1/namespaces/${NAMESPACE}/configmaps`],
        ['Secret', `/api/v1/namespaces/${NAMESPACE}/secrets`],
        ['PersistentVolumeClaim', `/api/v1/namespaces/${NAMESPACE}/persistentvolumeclaims`],
        ['Deployment', `/apis/apps/v1/namespaces/${NAMESPACE}/deployments`],
        ['StatefulSet', `/apis/apps/v1/namespaces/${NAMESPACE}/statefulsets`],
        ['CronJob', `/apis/batch/v1/namespaces/${NAMESPACE}/cronjobs`],
        ['Gateway', `/apis/tempora.dev/v1alpha1/namespaces/${NAMESPACE}/gateways`],
        ['Deployment', '/apis/apps/v1/namespaces/tempora-system/deployments'],
      ] as const) {
        const list = await node!.api<{ items: { metadata: { name: string } }[] }>('GET', path);
        // kube-root-ca.crt is the namespace's own, published by kube-controller-manager in every namespace.
        found.push(...list.items.filter((o) => o.metadata.name !== 'kube-root-ca.crt').map((o) => `${kind}/${o.metadata.name}`));
      }
      return found.sort();
    };
    const deadline = Date.now() + 5 * 60_000;
    while (JSON.stringify(await left()) !== JSON.stringify(expected) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2_000));
    assert.deepEqual(await left(), expected);
  });
});
