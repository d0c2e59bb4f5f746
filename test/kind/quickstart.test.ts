// docs/kind.md's cluster half, run as written on the project's one-node test cluster (test/k8s/node.ts: a
// real kubelet, containerd and kube-proxy) in place of kind, with a real registry at the page's
// localhost:5001 (test/k8s/registry.ts): every block of the page the tests can run (neither "kind only" nor
// "needs internet"), in order, with a real helm and kubectl: publish this tree to the registry with
// `npm run release` (BuildKit's buildctl against the node's buildkitd), install the operator
// and the platform, sign in through the Ingress at tempora.localhost, render a scene, open the graph, read
// the metrics, upgrade to a changed value and roll back (the platform answering after each), uninstall
// (nothing of ours left but what the page says is kept), remove the rest (nothing of ours left at all).
//
// The chart's NetworkPolicies (on by default) are enforced throughout, by kube-router's policy controller
// (test/k8s/network-policy.ts), as kind's own network plugin enforces them: the page works under them, and
// a pod of another namespace reaches the gateway but not billing, PostgreSQL or Redis.
//
// The ingress controller is Traefik built from its Go module (test/e2e/ingress.ts) in place of the page's
// Traefik chart, which comes from the internet: the controller of the IngressClass traefik, on the host
// beside the node, serving the Ingress the operator makes from charts/tempora/examples/kind.yaml. The
// page's curl commands connect tempora.localhost:80 to it (curl --connect-to), as kind's port mapping
// connects 127.0.0.1:80 to the Traefik on kind's node.
//
// "Nothing of ours" is every object, of any kind the API server lists, in the platform's and the operator's
// namespaces, and the cluster-wide objects of the kinds the charts render; the kinds the charts and the
// operator make (helm template of both charts with every values file, the operator's child types, its
// Lease) must all be among them, and must all be found while the platform runs, so the sweep cannot miss
// a new kind.
//
// The node needs Linux, root and cgroups; elsewhere the suite is skipped and says why.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { apiVersionOf, Lease, OPTIONAL_CHILDREN, ServiceMonitor, WATCHED_CHILDREN } from '../../operator/src/kube/resources.ts';
import { DEPLOYED_SERVICES } from '../../operator/src/reconcilers/platform-services.ts';
import { clientFor } from '../../operator/test/cluster.ts';
import { ensureTraefik, INGRESS_CLASS, type Ingress, startTraefik } from '../e2e/ingress.ts';
import { Helm } from '../helm/helm.ts';
import { binaryDir } from '../k8s/control-plane.ts';
import { type PolicyEnforcer, startPolicyEnforcer } from '../k8s/network-policy.ts';
import { KubeNode, LOCAL_REGISTRY, skipWithoutNode } from '../k8s/node.ts';
import { type Registry, startRegistry } from '../k8s/registry.ts';
import { waitFor } from '../support/wait.ts';
import { kindDocBlocks, ROOT, runnable } from './kind-doc.ts';

const blocks = kindDocBlocks();
const chartDefaults = parse(readFileSync(join(ROOT, 'charts', 'tempora', 'values.yaml'), 'utf8')) as {
  postgresql: { image: string; persistence: { size: string } };
  redis: { image: string; persistence: { size: string } };
};
const kindValues = parse(readFileSync(join(ROOT, 'charts', 'tempora', 'examples', 'kind.yaml'), 'utf8')) as { ingress: { host: string; className: string } };
const NAMESPACE = 'tempora';
const OPERATOR_NAMESPACE = 'tempora-system';
/** The Prometheus Operator's group, whose ServiceMonitor and PrometheusRule the charts render only where it is served. */
const MONITORING_GROUP = ServiceMonitor.group;
/**
 * The groups of the operator's optional children (OPTIONAL_CHILDREN: the Prometheus Operator's, KEDA's), whose
 * kinds the charts and the operator make only where their CRDs are installed.
 */
const OPTIONAL_GROUPS = new Set(OPTIONAL_CHILDREN.map((r) => r.group));

/** A type the API server serves, from its discovery documents. */
interface ApiType {
  group: string;
  kind: string;
  plural: string;
  namespaced: boolean;
  /** `/api/v1` or `/apis/<group>/<version>`. */
  base: string;
}

/** The kinds of object our charts and the operator make, by `group/kind`, with the names the charts give them. */
type OurKinds = Map<string, { group: string; kind: string; names: Set<string> }>;

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? apiVersion.split('/')[0]! : '');

/**
 * Every kind the two charts render (helm template with their defaults, every example values file and the
 * chart tests' every-value files, the Prometheus Operator's kinds served, CRDs included), and every kind the
 * operator makes: its children (WATCHED_CHILDREN, OPTIONAL_CHILDREN) and its leader-election Lease.
 */
function ourKinds(helm: Helm): OurKinds {
  const kinds: OurKinds = new Map();
  const add = (apiVersion: string, kind: string, name?: string) => {
    const key = `${groupOf(apiVersion)}/${kind}`;
    if (!kinds.has(key)) kinds.set(key, { group: groupOf(apiVersion), kind, names: new Set() });
    if (name) kinds.get(key)!.names.add(name);
  };
  const operatorChart = join(ROOT, 'charts', 'tempora-operator');
  for (const values of [[], ['-f', join(ROOT, 'test', 'helm', 'values-full.yaml')]]) {
    for (const o of helm.template(
      'tempora-operator',
      operatorChart,
      OPERATOR_NAMESPACE,
      '--include-crds',
      '--api-versions',
      `${MONITORING_GROUP}/v1/ServiceMonitor`,
      ...values,
    ))
      add(o.apiVersion, o.kind, o.metadata.name);
  }
  const platformChart = join(ROOT, 'charts', 'tempora');
  const examples = readdirSync(join(platformChart, 'examples')).filter((f) => f.endsWith('.yaml'));
  for (const values of [
    [],
    ...examples.map((f) => ['-f', join(platformChart, 'examples', f)]),
    ['-f', join(ROOT, 'test', 'helm', 'platform-values-full.yaml')],
  ]) {
    for (const o of helm.template('tempora', platformChart, NAMESPACE, '--api-versions', `${MONITORING_GROUP}/v1/PrometheusRule`, ...values))
      add(o.apiVersion, o.kind, o.metadata.name);
  }
  for (const r of [...WATCHED_CHILDREN, ...OPTIONAL_CHILDREN, Lease]) add(apiVersionOf(r), r.kind);
  return kinds;
}

/**
 * Objects every namespace has of its own, made by kube-controller-manager (the root CA bundle, the default
 * ServiceAccount), and Events, which are records, not objects we make, and expire (kube-apiserver's
 * --event-ttl, one hour).
 */
const NAMESPACE_OWN = new Set(['ConfigMap/kube-root-ca.crt', 'ServiceAccount/default']);
const RECORDS = new Set(['/Event', 'events.k8s.io/Event']);

interface TemporaGateway {
  metadata: { generation: number };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string; message: string }[] };
}

describe('docs/kind.md on the test node (install, sign in through the Ingress, render, upgrade, roll back, uninstall, remove)', function () {
  let node: KubeNode | undefined;
  let helm: Helm;
  let ingress: Ingress | undefined;
  let registry: Registry | undefined;
  let enforcer: PolicyEnforcer | undefined;
  let env: NodeJS.ProcessEnv;
  /** curl's flag that connects the Ingress's host, port 80, to Traefik (what kind's port mapping does). */
  let connectTo = '';

  /** bash's arguments for the page's shell text: curl fails on an HTTP error instead of printing it, so every command must succeed. */
  const bashArgs = (script: string) => ['-euo', 'pipefail', '-c', script.replaceAll(/curl -s /g, `curl -sS --fail-with-body --max-time 300 ${connectTo} `)];
  const failed = (script: string, stdout: string, stderr: string) =>
    `the page's commands failed:\n${script}\n--- stdout ---\n${stdout.slice(-4000)}\n--- stderr ---\n${stderr.slice(-4000)}`;

  /** Runs shell text as the page's reader would, in one bash, failing on the first failing command. */
  function sh(script: string, extraEnv: NodeJS.ProcessEnv = {}, timeoutMs = 30 * 60_000): string {
    const run = spawnSync('bash', bashArgs(script), { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs, env: { ...env, ...extraEnv } });
    assert.equal(run.status, 0, failed(script, run.stdout, run.stderr));
    return run.stdout;
  }

  /** sh, leaving the event loop free meanwhile (for traffic sent while the commands run). */
  function shAsync(script: string): Promise<string> {
    const child = spawn('bash', bashArgs(script), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let [stdout, stderr] = ['', ''];
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    return new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(failed(script, stdout, stderr))))));
  }

  /** One GET through the Ingress on a connection of its own, as a client from outside the cluster sends it. */
  function throughIngress(path: string): Promise<{ status: number; body: string }> {
    const [host, port] = connectTo.split(' ')[1]!.split(':').slice(2);
    return new Promise((resolve, reject) => {
      const req = request({ host, port: Number(port), path, agent: false, headers: { host: kindValues.ingress.host }, timeout: 30_000 }, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
      req.on('error', reject);
      req.end();
    });
  }

  /**
   * Requests through the Ingress, one after another and each on a new connection, until `until` settles:
   * the gateway's /health (never rate limited) twice, then the graph (gateway → graph), which an anonymous
   * caller may read 60 times a minute: about 25 a minute at this pace. Returns how many were answered 200
   * and every other outcome, timed, so a dropped request names its moment and its hop's answer.
   */
  async function trafficDuring(until: Promise<unknown>): Promise<{ answered: number; failures: string[] }> {
    let finished = false;
    const stop = until.finally(() => (finished = true));
    const failures: string[] = [];
    let answered = 0;
    for (let i = 0; !finished; i++) {
      const path = i % 3 === 2 ? '/api/v1/graph/moments?limit=1' : '/health';
      const at = new Date().toISOString().slice(11, 23);
      const answer = await throughIngress(path).catch((err: Error) => ({ status: 0, body: err.message }));
      if (answer.status === 200) answered++;
      else failures.push(`${at} ${path}: ${answer.status} ${answer.body.slice(0, 200)}`);
      await new Promise((r) => setTimeout(r, 700));
    }
    await stop;
    return { answered, failures };
  }

  function gateway(): Promise<TemporaGateway> {
    return node!.api<TemporaGateway>('GET', `/apis/tempora.dev/v1alpha1/namespaces/${NAMESPACE}/temporagateways/tempora`);
  }

  /**
   * Waits until the release's rollout has finished: no pod terminating, every pod ready. Ready on the TemporaGateway
   * means the new pods are available; the old ones may still be shutting down, and a request routed to one
   * in that moment can fail (seen once: a 502 from the gateway for generation right after an upgrade).
   */
  async function settled(): Promise<void> {
    const deadline = Date.now() + 5 * 60_000;
    for (;;) {
      type Pods = {
        items: { metadata: { name: string; deletionTimestamp?: string }; status?: { phase?: string; conditions?: { type: string; status: string }[] } }[];
      };
      // A loaded machine's API server may drop a request; the next poll asks again.
      const pods = await node!
        .api<Pods>('GET', `/api/v1/namespaces/${NAMESPACE}/pods`)
        .catch(() => ({ items: [{ metadata: { name: '(API server unanswered)' } }] }) as Pods);
      const unsettled = pods.items.filter(
        (p) =>
          p.status?.phase !== 'Succeeded' && (p.metadata.deletionTimestamp || !p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
      );
      if (unsettled.length === 0) return;
      if (Date.now() > deadline) assert.fail(`pods not settled: ${unsettled.map((p) => p.metadata.name).join(', ')}`);
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }

  /** The sign-in, scene, graph and metrics sections, through the Ingress; their output lines. */
  function useThePlatform(): string[] {
    return sh(runnable(blocks, ['7.', '8.', '9.', '10.']))
      .trim()
      .split('\n');
  }

  /** The page's blocks of section 11 that the tests run: upgrade, roll back, uninstall, remove the rest. */
  function section11(): string[] {
    const scripts = blocks.filter((b) => b.section.startsWith('11.') && b.run).map((b) => b.script);
    assert.equal(scripts.length, 4, 'section 11: upgrade, roll back, uninstall, remove the rest');
    return scripts;
  }

  /** The API server's types, every group at its preferred version. */
  async function servedTypes(): Promise<ApiType[]> {
    type Resources = { resources: { name: string; kind: string; namespaced: boolean; verbs: string[] }[] };
    const types: ApiType[] = [];
    const add = (group: string, base: string, list: Resources) => {
      for (const r of list.resources)
        if (!r.name.includes('/') && r.verbs.includes('list')) types.push({ group, kind: r.kind, plural: r.name, namespaced: r.namespaced, base });
    };
    add('', '/api/v1', await node!.api<Resources>('GET', '/api/v1'));
    const { groups } = await node!.api<{ groups: { name: string; preferredVersion: { groupVersion: string } }[] }>('GET', '/apis');
    for (const g of groups)
      add(g.name, `/apis/${g.preferredVersion.groupVersion}`, await node!.api<Resources>('GET', `/apis/${g.preferredVersion.groupVersion}`));
    return types;
  }

  /**
   * Every object of ours in the cluster, as "<namespace>: Kind/name" or, cluster-wide, "Kind/name": in the
   * platform's and the operator's namespaces every object of every type the API server lists (but each
   * namespace's own and Events); cluster-wide, the objects of the kinds the charts render that bear a chart's
   * name for them or the part-of label, and the two namespaces the page's commands create.
   */
  async function ours(types: ApiType[], kinds: OurKinds): Promise<string[]> {
    const found: string[] = [];
    type List = { items: { metadata: { name: string; labels?: Record<string, string> } }[] };
    // A type whose CRD is deleted is no longer served: nothing of it is left.
    const list = (path: string) => node!.api<List>('GET', path).catch((err: unknown) => (/: 404 /.test(String(err)) ? { items: [] } : Promise.reject(err)));
    for (const namespace of [NAMESPACE, OPERATOR_NAMESPACE]) {
      for (const t of types.filter((x) => x.namespaced && !RECORDS.has(`${x.group}/${x.kind}`))) {
        const objects = await list(`${t.base}/namespaces/${namespace}/${t.plural}`);
        found.push(...objects.items.filter((o) => !NAMESPACE_OWN.has(`${t.kind}/${o.metadata.name}`)).map((o) => `${namespace}: ${t.kind}/${o.metadata.name}`));
      }
    }
    for (const t of types.filter((x) => !x.namespaced)) {
      const kind = kinds.get(`${t.group}/${t.kind}`);
      if (!kind && t.kind !== 'Namespace') continue;
      const objects = await list(`${t.base}/${t.plural}`);
      const mine = (o: List['items'][number]) =>
        t.kind === 'Namespace'
          ? [NAMESPACE, OPERATOR_NAMESPACE].includes(o.metadata.name)
          : kind!.names.has(o.metadata.name) || o.metadata.labels?.['app.kubernetes.io/part-of'] === 'tempora';
      found.push(...objects.items.filter(mine).map((o) => `${t.kind}/${o.metadata.name}`));
    }
    return found.sort();
  }

  /** Waits until ours() is `expected` (the garbage collector and the namespace controller take a while). */
  async function onlyLeft(types: ApiType[], kinds: OurKinds, expected: string[]): Promise<void> {
    const deadline = Date.now() + 5 * 60_000;
    // A loaded machine's API server may drop a request; the next poll asks again.
    while (Date.now() < deadline && JSON.stringify(await ours(types, kinds).catch(() => [])) !== JSON.stringify(expected))
      await new Promise((r) => setTimeout(r, 3_000));
    assert.deepEqual(await ours(types, kinds), expected);
  }

  before(async function () {
    skipWithoutNode(this);
    // A first run builds Kubernetes, BuildKit, CoreDNS, kubectl and helm (about 25 min on 2 cores); cached,
    // the images still take minutes to build.
    this.timeout(90 * 60_000);
    helm = Helm.build();
    const kubectl = spawnSync('bash', [join(ROOT, 'test', 'k8s', 'build-binaries.sh'), 'kubectl'], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (kubectl.status !== 0) throw new Error('building kubectl failed');
    const traefik = ensureTraefik();
    node = await KubeNode.start();
    registry = await startRegistry();
    enforcer = await startPolicyEnforcer(node);
    // The page's step 2, an ingress controller serving the IngressClass the kind values name.
    assert.equal(kindValues.ingress.className, INGRESS_CLASS);
    ingress = await startTraefik(node, clientFor(node.kubeconfigPath), traefik);
    const traefikAt = new URL(ingress.url);
    connectTo = `--connect-to ${kindValues.ingress.host}:80:${traefikAt.hostname}:${traefikAt.port}`;
    env = {
      ...process.env,
      KUBECONFIG: node.kubeconfigPath,
      PATH: [dirname(helm.binary), binaryDir(), node.buildkitBinaryDir, dirname(process.execPath), process.env.PATH].join(':'),
      // The page's release builds with BuildKit (the node's, whose cache the other suites' builds filled), on
      // the tests' Node base (node:22-slim, the Dockerfiles' default, is on Docker Hub, out of reach).
      BUILDKIT_HOST: `unix://${node.buildkitSocket}`,
      TEMPORA_BASE_IMAGE: node.baseImage,
      HELM_CACHE_HOME: join(helm.home, 'cache'),
      HELM_CONFIG_HOME: join(helm.home, 'config'),
      HELM_DATA_HOME: join(helm.home, 'data'),
    };

    // PostgreSQL and Redis, which kind's node pulls from Docker Hub: built here and named as the chart's
    // defaults, so that the kubelet finds them (pull policy IfNotPresent) and the page's command runs as is.
    for (const [name, target] of [
      ['postgresql', chartDefaults.postgresql.image],
      ['redis', chartDefaults.redis.image],
    ] as const) {
      const ref = await node.buildImage({
        dockerfile: `test/kind/images/${name}/Dockerfile`,
        context: `test/kind/images/${name}`,
        name: `${name}-test`,
        tag: 'dev',
      });
      const tagged: { status: number | null; stderr: string } = spawnSync(
        'ctr',
        ['--address', node.containerdSocket, '-n', 'k8s.io', 'images', 'tag', '--force', `docker.io/${ref}`, target],
        { encoding: 'utf8' },
      );
      assert.equal(tagged.status, 0, tagged.stderr);
    }
    // kind's node has a volume provisioner (local-path); this one has none, so the chart's two claims get a
    // host directory each, writable by the stores' uid 999.
    for (const [name, size] of [
      ['postgresql', chartDefaults.postgresql.persistence.size],
      ['redis', chartDefaults.redis.persistence.size],
    ] as const) {
      const path = join(node.runDir, 'volumes', name);
      mkdirSync(path, { recursive: true });
      chownSync(path, 999, 999);
      // Cluster-scoped, which node.apply (namespaced objects) does not address.
      await node.api(
        'PATCH',
        `/api/v1/persistentvolumes/tempora-${name}?fieldManager=tempora-test&force=true`,
        {
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
        },
        'application/apply-patch+yaml',
      );
    }
  });

  after(async function () {
    this.timeout(120_000);
    await ingress?.stop();
    await registry?.stop();
    await enforcer?.stop();
    if (node) assert.deepEqual(await node.stop(), [], 'the node left the host as it was');
  });

  let released: { images: Record<string, { reference: string; digest: string }>; charts: Record<string, { reference: string; digest: string }> };

  it('publishes this tree to the registry: seven images and two charts, the charts naming the images by digest', async function () {
    this.timeout(40 * 60_000);
    const out = sh(runnable(blocks, ['4.']), {}, 45 * 60_000);
    released = JSON.parse(out.slice(out.indexOf('\n{') + 1));
    assert.deepEqual(Object.keys(released.images).sort(), [...DEPLOYED_SERVICES, 'operator'].sort());
    assert.deepEqual(Object.keys(released.charts).sort(), ['tempora', 'tempora-operator']);
    // The registry holds each manifest under the digest the release reported.
    for (const { reference, digest } of Object.values(released.images)) {
      const repository = reference.slice(LOCAL_REGISTRY.length + 1).split(':')[0];
      const answer = await fetch(`http://${LOCAL_REGISTRY}/v2/${repository}/manifests/${digest}`, {
        method: 'HEAD',
        headers: {
          accept: 'application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json',
        },
      });
      assert.equal(answer.status, 200, `${reference}@${digest} in the registry`);
    }
    // What a user's `helm show values` of the published charts says.
    const values = (chart: string) => parse(sh(`helm show values ${released.charts[chart]!.reference} --version 0.1.0-dev --plain-http`));
    assert.deepEqual(values('tempora').image.digests, Object.fromEntries(DEPLOYED_SERVICES.map((s) => [s, released.images[s]!.digest])));
    assert.equal(values('tempora-operator').image.digest, released.images.operator!.digest);
  });

  it('installs the operator and the platform from the registry with the page commands, and the TemporaGateway becomes Ready', async function () {
    this.timeout(40 * 60_000);
    sh(runnable(blocks, ['5.', '6.']));
    // Every pod of ours runs an image pulled from the registry by the digest the release pushed.
    type Pod = { metadata: { name: string }; spec: { containers: { image: string }[] }; status: { containerStatuses?: { imageID: string }[] } };
    for (const namespace of [NAMESPACE, OPERATOR_NAMESPACE]) {
      const pods = await node!.api<{ items: Pod[] }>('GET', `/api/v1/namespaces/${namespace}/pods`);
      for (const pod of pods.items.filter((p) => p.spec.containers[0]!.image.startsWith(`${LOCAL_REGISTRY}/tempora/`))) {
        const image = pod.spec.containers[0]!.image;
        const name = image.slice(`${LOCAL_REGISTRY}/tempora/`.length).split(':')[0]!;
        assert.equal(image, `${released.images[name]!.reference}@${released.images[name]!.digest}`, pod.metadata.name);
      }
      assert.ok(
        pods.items.some((p) => p.spec.containers[0]!.image.startsWith(`${LOCAL_REGISTRY}/tempora/`)),
        `pods from the registry in ${namespace}`,
      );
    }
  });

  it('serves a signed-in request through the Ingress at tempora.localhost: a scene rendered, the graph opened, the metrics counted', async function () {
    this.timeout(10 * 60_000);
    // The Ingress the operator made from the chart's values, for Traefik's class and the page's host.
    type IngressObject = { spec: { ingressClassName?: string; rules: { host: string; http: { paths: { backend: { service: { name: string } } }[] } }[] } };
    const made = await node!.api<IngressObject>('GET', `/apis/networking.k8s.io/v1/namespaces/${NAMESPACE}/ingresses/tempora`);
    assert.equal(made.spec.ingressClassName, INGRESS_CLASS);
    assert.deepEqual(
      made.spec.rules.map((r) => [r.host, r.http.paths[0]!.backend.service.name]),
      [[kindValues.ingress.host, 'tempora-gateway']],
    );
    // Traefik answers 404 for a host it has no route for yet; it follows the Ingress within seconds.
    await waitFor(
      'Traefik routing tempora.localhost',
      async () => sh(`curl -s -o /dev/null -w '%{http_code}' http://${kindValues.ingress.host}/health || true`).trim() === '200',
      { timeoutMs: 60_000, intervalMs: 1_000 },
    );
    const [user, , , , moment, ...metrics] = useThePlatform();
    assert.match(user!, /^[0-9a-f-]{36}$/);
    assert.equal(moment, 'Storming of the Bastille');
    assert.ok(
      metrics.some((l) => l.includes('route="proxy:generation",status="200"')),
      metrics.join('\n'),
    );
    // The public host serves the API, /health and the docs; /metrics lives on a port the Ingress never routes.
    const answered: Array<[string, number]> = [];
    for (const path of ['/metrics', '/health', '/docs', '/api/v1/credits/costs']) answered.push([path, (await throughIngress(path)).status]);
    assert.deepEqual(answered, [
      ['/metrics', 404],
      ['/health', 200],
      ['/docs', 200],
      ['/api/v1/credits/costs', 200],
    ]);
  });

  it('fences the platform: a pod of another namespace reaches the gateway and the metrics, not billing, PostgreSQL or Redis', async function () {
    this.timeout(5 * 60_000);
    const policies = await node!.api<{ items: { metadata: { name: string } }[] }>('GET', `/apis/networking.k8s.io/v1/namespaces/${NAMESPACE}/networkpolicies`);
    assert.deepEqual(
      policies.items.map((p) => p.metadata.name).sort(),
      ['default-deny', 'gateway', 'metrics', 'operator', 'within'].map((p) => `tempora-${p}`),
    );
    const targets = {
      gateway: `tempora-gateway.${NAMESPACE}.svc:8080`,
      gatewayMetrics: `tempora-gateway.${NAMESPACE}.svc:9080`,
      billing: `tempora-billing.${NAMESPACE}.svc:8085`,
      postgresql: `tempora-postgresql.${NAMESPACE}.svc:5432`,
      redis: `tempora-redis.${NAMESPACE}.svc:6379`,
    };
    // Node, from the gateway's image, tries each for 30 s: a new pod's address reaches the enforcer's sets
    // within a sync, so a peer rule may let it in only after a few seconds. Refused (kube-router rejects)
    // or timed out (other plugins drop) is "blocked": every target listens, the platform's pods reach them.
    const probe = `const net = require('net'); const targets = ${JSON.stringify(targets)};
const once = (host, port) => new Promise((resolve) => {
  const socket = net.connect({ host, port: Number(port), timeout: 3000 });
  socket.once('connect', () => { socket.destroy(); resolve(true); });
  socket.once('timeout', () => { socket.destroy(); resolve(false); });
  socket.once('error', () => resolve(false));
});
const reach = async (target) => {
  const [host, port] = target.split(':');
  for (const until = Date.now() + 30000; Date.now() < until; await new Promise((r) => setTimeout(r, 1000))) if (await once(host, port)) return 'open';
  return 'blocked';
};
Promise.all(Object.entries(targets).map(async ([name, target]) => [name, await reach(target)])).then((results) => console.log(JSON.stringify(Object.fromEntries(results))));`;
    const intruder = 'tempora-test-intruder';
    await node!.api('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: intruder } });
    try {
      await node!.waitForServiceAccount(intruder);
      const image = `${released.images.gateway!.reference}@${released.images.gateway!.digest}`;
      await node!.api('POST', `/api/v1/namespaces/${intruder}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'probe' },
        spec: { restartPolicy: 'Never', containers: [{ name: 'probe', image, command: ['node', '-e', probe] }] },
      });
      await waitFor(
        'the probe pod to finish',
        async () =>
          ['Succeeded', 'Failed'].includes((await node!.api<{ status: { phase: string } }>('GET', `/api/v1/namespaces/${intruder}/pods/probe`)).status.phase),
        { timeoutMs: 120_000, intervalMs: 1_000 },
      );
      const reached = JSON.parse(await node!.api<string>('GET', `/api/v1/namespaces/${intruder}/pods/probe/log`));
      assert.deepEqual(reached, { gateway: 'open', gatewayMetrics: 'open', billing: 'blocked', postgresql: 'blocked', redis: 'blocked' });
    } finally {
      await node!.api('DELETE', `/api/v1/namespaces/${intruder}`);
    }
  });

  /** The page's shell text run while traffic goes through the Ingress, until the rollout is over: none may fail. */
  async function answeringThroughout(script: string, what: string): Promise<void> {
    const traffic = await trafficDuring(
      shAsync(script)
        .then(settled)
        .then(() => new Promise((r) => setTimeout(r, 3_000))),
    );
    console.log(`      ${traffic.answered} requests answered during the ${what}`);
    assert.deepEqual(traffic.failures, [], `requests the ${what} dropped`);
    assert.ok(traffic.answered > 10, `only ${traffic.answered} requests sent during the ${what}`);
  }

  it('upgrades to a changed value: the pods get it, every request meanwhile is answered', async function () {
    this.timeout(20 * 60_000);
    const [upgrade] = section11();
    await answeringThroughout(upgrade!, 'upgrade');
    const cm = await node!.api<{ data: Record<string, string> }>('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/tempora-gateway`);
    assert.equal(cm.data.LOG_LEVEL, 'debug');
    assert.equal((await gateway()).status?.observedGeneration, 2);
    useThePlatform();
  });

  it('rolls back to the first revision: the value is back, every request meanwhile is answered', async function () {
    this.timeout(20 * 60_000);
    const [, rollback] = section11();
    await answeringThroughout(rollback!, 'rollback');
    const cm = await node!.api<{ data: Record<string, string> }>('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/tempora-gateway`);
    assert.equal(cm.data.LOG_LEVEL, 'info');
    useThePlatform();
  });

  describe('uninstall and removal', function () {
    let types: ApiType[];
    let kinds: OurKinds;
    let crds: string[];

    before(async function () {
      this.timeout(5 * 60_000);
      types = await servedTypes();
      kinds = ourKinds(helm);
      crds = [...kinds.get('apiextensions.k8s.io/CustomResourceDefinition')!.names].sort();
    });

    it('sweeps every kind the charts and the operator make, and finds each served one while the platform runs', async function () {
      this.timeout(5 * 60_000);
      const served = new Set(types.map((t) => `${t.group}/${t.kind}`));
      // Only the kinds of the optional children's groups may be missing: the kind page installs neither the
      // Prometheus Operator nor KEDA.
      const unserved = [...kinds].filter(([key, k]) => !served.has(key) && !OPTIONAL_GROUPS.has(k.group)).map(([key]) => key);
      assert.deepEqual(unserved, [], 'kinds of ours the API server does not serve');
      const running = await ours(types, kinds);
      const kindsFound = new Set(running.map((o) => o.replace(/^[^ ]+: /, '').split('/')[0]));
      const missing = [...kinds.values()].filter((k) => served.has(`${k.group}/${k.kind}`) && !kindsFound.has(k.kind)).map((k) => k.kind);
      assert.deepEqual(missing, [], `kinds of ours the sweep finds nothing of while the platform runs:\n${running.join('\n')}`);
      // What the workloads' controllers make is swept too, though neither chart nor operator names it.
      for (const kind of ['ReplicaSet', 'Pod', 'EndpointSlice', 'ControllerRevision'])
        assert.ok(
          running.some((o) => o.startsWith(`${NAMESPACE}: ${kind}/`)),
          `a ${kind} in ${NAMESPACE}`,
        );
    });

    it('uninstalls: nothing of ours is left but what the page says is kept (the data, the CRDs, the Lease, the namespaces)', async function () {
      this.timeout(10 * 60_000);
      const [, , uninstall] = section11();
      sh(uninstall!);
      await onlyLeft(
        types,
        kinds,
        [
          `${NAMESPACE}: PersistentVolumeClaim/data-tempora-postgresql-0`,
          `${NAMESPACE}: PersistentVolumeClaim/data-tempora-redis-0`,
          `${NAMESPACE}: Secret/tempora-postgresql`,
          `${NAMESPACE}: Secret/tempora-redis`,
          `${OPERATOR_NAMESPACE}: Lease/tempora-operator`,
          ...crds.map((c) => `CustomResourceDefinition/${c}`),
          `Namespace/${NAMESPACE}`,
          `Namespace/${OPERATOR_NAMESPACE}`,
        ].sort(),
      );
    });

    it('removes the rest with the page commands: nothing of ours is left at all', async function () {
      this.timeout(10 * 60_000);
      const [, , , remove] = section11();
      for (const c of crds) assert.match(remove!, new RegExp(`\\b${c.replaceAll('.', '\\.')}\\b`), `the page deletes the CRD ${c}`);
      sh(remove!);
      await onlyLeft(types, kinds, []);
    });
  });
});
