// What the operator deploys must be able to run: where state lives, the gateway's signing key, the
// agent pool, what workers take from their TemporaGateway, the settings each pod gets, and Ready meaning the
// workloads are available. Against a real control plane with a kubelet stand-in reporting pod status
// (kubelet-stand-in.ts); the end-to-end tests on a real node (test/k8s) run the images themselves.
// Tests run in order and share one cluster.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { BillingConfigSchema } from '../../services/billing/src/config.ts';
import { ConductorConfigSchema } from '../../services/conductor/src/config.ts';
import { GatewayConfigSchema } from '../../services/gateway/src/config.ts';
import { KeyStore } from '../../services/gateway/src/domain/keys.ts';
import { GenerationConfigSchema } from '../../services/generation/src/config.ts';
import { GraphConfigSchema } from '../../services/graph/src/config.ts';
import { SimulationConfigSchema } from '../../services/simulation/src/config.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { KubeClient } from '../src/kube/client.ts';
import type { KubeObject, Pod } from '../src/kube/object.ts';
import * as R from '../src/kube/resources.ts';
import type { Operator } from '../src/operator.ts';
import { PRIVATE_RANGES } from '../src/reconcilers/gateway.ts';
import { COUNTS_HOLD_MS } from '../src/reconcilers/status.ts';
import {
  applyAs,
  CRD_DIR,
  condition,
  counterSum,
  manifests,
  type OperatorCluster,
  ownedBy,
  startOperatorCluster,
  stopOperatorCluster,
  waitReady as waitReadyIn,
} from './cluster.ts';
import { agentPool, gateway, graphWorker, NS } from './fixtures.ts';

type PodSpec = NonNullable<Pod['spec']>;
type Container = PodSpec['containers'][number];

const SERVICES = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'];
/** Where the simulation pods find the SimulationBudgets: their TemporaGateway's ConfigMap, mounted whole. */
const BUDGETS_MOUNT = { name: 'budgets', mountPath: '/etc/tempora/simulation-budgets', readOnly: true };

/** A TemporaGateway without shared state: no database, no Redis, no Ingress, replicas left to the operator. */
const embedded = (name: string, spec: Record<string, unknown> = {}) =>
  gateway(name, { database: undefined, redis: undefined, ingress: undefined, services: undefined, ...spec });

describe('what the operator deploys', function () {
  this.timeout(120_000);
  let cluster: OperatorCluster;
  let admin: KubeClient;
  let op: Operator;

  before(async function () {
    this.timeout(1_800_000);
    cluster = await startOperatorCluster('deployed');
    ({ admin, op } = cluster);
    // The Secrets the embedded Gateways name, as an install has them: a TemporaGateway missing one is Degraded
    // (SecretMissing), which would hide the pod failures the readiness tests look for.
    for (const name of ['tempora-keys', 'tempora-providers', 'tempora-billing'])
      await applyAs(admin, { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NS }, data: {} });
  });

  after(async function () {
    this.timeout(60_000);
    await stopOperatorCluster(cluster);
  });

  const waitReady = (resource: R.ResourceType, name: string, timeoutMs = 30_000) => waitReadyIn(admin, resource, NS, name, timeoutMs);
  const owned = <T extends KubeObject>(resource: R.ResourceType<T>, owner: KubeObject) => ownedBy(admin, resource, owner, NS);
  const templateOf = async (deployment: string) => (await admin.get(R.Deployment, NS, deployment)).spec!.template;
  const replicas = async (deployment: string) => (await admin.get(R.Deployment, NS, deployment)).spec!.replicas;
  const container = async (deployment: string) => (await templateOf(deployment)).spec!.containers[0]!;
  const env = (c: Container, name: string) => c.env?.find((e) => e.name === name);
  const data = async (configMap: string) => (await admin.get(R.ConfigMap, NS, configMap)).data;
  const secretRef = (name: string, key = 'url') => ({ secretKeyRef: { name, key } });
  const waitCondition = (resource: R.ResourceType, name: string, type: string, status: string, reason: string, timeoutMs = 30_000) =>
    waitFor(
      `${resource.kind} ${name} ${type}=${status} (${reason})`,
      async () => {
        const obj = await admin.get(resource, NS, name);
        const c = condition(obj, type);
        return c?.status === status && c.reason === reason && c.observedGeneration === obj.metadata.generation ? obj : undefined;
      },
      { timeoutMs },
    );
  const events = async (kind: string, name: string) =>
    (await admin.list(R.Event, { fieldSelector: `involvedObject.name=${name},involvedObject.kind=${kind}` }, NS)).items as (KubeObject & {
      type: string;
      reason: string;
      message: string;
    })[];

  describe('state', function () {
    it("without spec.database and spec.redis: one replica per service, its state on the pod's data volume", async function () {
      await applyAs(admin, embedded('solo'));
      const gw = await waitReady(R.TemporaGateway, 'solo');
      assert.equal(gw.status?.state, 'Embedded');
      for (const svc of SERVICES) {
        const dep = await admin.get(R.Deployment, NS, `solo-${svc}`);
        assert.equal(dep.spec!.replicas, 1, `${svc}: the operator owns replicas`);
        const pod = dep.spec!.template.spec!;
        const c = pod.containers[0]!;
        assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
        assert.equal(env(c, 'TEMPORA_DATA_DIR')?.value, '/var/lib/tempora');
        const budgets = svc === 'simulation';
        assert.deepEqual(c.volumeMounts, [
          { name: 'tmp', mountPath: '/tmp' },
          { name: 'data', mountPath: '/var/lib/tempora' },
          ...(budgets ? [BUDGETS_MOUNT] : []),
        ]);
        assert.deepEqual(pod.volumes, [
          { name: 'tmp', emptyDir: {} },
          { name: 'data', emptyDir: {} },
          ...(budgets ? [{ name: 'budgets', configMap: { name: 'solo-simulation-budgets', defaultMode: 420 } }] : []),
        ]);
        assert.deepEqual([env(c, 'DATABASE_URL'), env(c, 'REDIS_URL')], [undefined, undefined]);
      }
      // A second replica would keep a database of its own: kubectl scale is reverted.
      await admin.request('PATCH', `${R.objectPath(R.Deployment, NS, 'solo-graph')}/scale`, {
        body: { spec: { replicas: 3 } },
        contentType: 'application/merge-patch+json',
        query: { fieldManager: 'kubectl-scale' },
      });
      await waitFor('one replica again', async () => (await replicas('solo-graph')) === 1, { timeoutMs: 30_000 });
    });

    it("with them: every service shares the PostgreSQL and Redis of the Secrets, and replicas are the spec's", async function () {
      await applyAs(admin, gateway('shared', { ingress: undefined }));
      const gw = await waitReady(R.TemporaGateway, 'shared');
      assert.equal(gw.status?.state, 'External');
      for (const svc of SERVICES) {
        const c = await container(`shared-${svc}`);
        assert.deepEqual(env(c, 'DATABASE_URL')?.valueFrom, secretRef('tempora-db'), svc);
        assert.deepEqual(env(c, 'REDIS_URL')?.valueFrom, secretRef('tempora-redis'), svc);
        assert.equal((await data(`shared-${svc}`))!.REDIS_KEY_PREFIX, 'tempora:default:shared', 'one prefix per TemporaGateway, so Gateways can share a Redis');
      }
      assert.equal(await replicas('shared-gateway'), 2);
    });

    it('refuses, in status, a TemporaGateway stored before more replicas needed shared state', async function () {
      // As after an upgrade: the TemporaGateway was stored under a CRD without the rule, which the API server now
      // enforces only on its next change.
      const crdName = 'temporagateways.tempora.dev';
      const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`;
      await admin.request('PATCH', crdPath, {
        body: [{ op: 'remove', path: '/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations' }],
        contentType: 'application/json-patch+json',
      });
      try {
        await waitFor(
          'the TemporaGateway stored without the rule',
          async () => {
            try {
              return await applyAs(admin, embedded('legacy', { services: { graph: { replicas: 2 } } }));
            } catch {
              return undefined;
            }
          },
          { timeoutMs: 30_000 },
        );
      } finally {
        const [crd] = manifests(join(CRD_DIR, 'temporagateway.yaml'));
        await applyAs(admin, crd!);
      }
      await waitCondition(R.TemporaGateway, 'legacy', 'Ready', 'False', 'ExternalStateRequired');
      const degraded = condition(await admin.get(R.TemporaGateway, NS, 'legacy'), 'Degraded');
      assert.equal(degraded?.status, 'True');
      assert.match(degraded!.message, /graph: more than one replica needs spec.database and spec.redis/);
      assert.equal(await replicas('legacy-graph'), 1, 'runs one meanwhile');
      await waitFor(
        'a Warning Event',
        async () => (await events('TemporaGateway', 'legacy')).some((e) => e.type === 'Warning' && e.reason === 'ExternalStateRequired'),
        { timeoutMs: 30_000 },
      );
      await admin.delete(R.TemporaGateway, NS, 'legacy');
    });
  });

  describe('the simulation service', function () {
    it('gets its state, keys, providers, peers and budgets directory, as its own configuration schema reads them', async function () {
      const c = await container('shared-simulation');
      assert.deepEqual(
        (c.envFrom ?? []).map((s) => s.configMapRef?.name ?? s.secretRef?.name),
        ['shared-simulation', 'tempora-keys', 'tempora-providers'],
      );
      assert.deepEqual(env(c, 'DATABASE_URL')?.valueFrom, secretRef('tempora-db'), 'runs are durable: the shared PostgreSQL');
      assert.deepEqual(env(c, 'REDIS_URL')?.valueFrom, secretRef('tempora-redis'));
      assert.deepEqual(c.volumeMounts?.at(-1), BUDGETS_MOUNT);
      // The keys Secret brings SERVICE_KEY (GATEWAY_SERVICE_KEY defaults to its first) and SIMULATION_API_KEYS.
      const config = SimulationConfigSchema.parse({
        ...(await data('shared-simulation')),
        DATABASE_URL: 'postgres://db/tempora',
        SERVICE_KEY: 'k1,k2',
        SIMULATION_API_KEYS: 'ops:0123456789abcdef',
      });
      assert.equal(config.SIMULATION_BUDGETS_PATH, '/etc/tempora/simulation-budgets');
      assert.equal(config.GATEWAY_URL, 'http://shared-gateway.default.svc:8080', 'JWKS and token introspection');
      assert.deepEqual(
        config.SIMULATION_API_KEYS.map((k) => k.name),
        ['ops'],
      );
      assert.equal(
        GatewayConfigSchema.parse(await data('shared-gateway')).SIMULATION_URL,
        'http://shared-simulation.default.svc:8083',
        'the gateway routes /api/v1/simulate* there',
      );
      // Budgets are read again by the service, not rolled out: they are not in the pods' config hash.
      const hash = (await templateOf('shared-simulation')).metadata!.annotations!['tempora.dev/config-hash'];
      await applyAs(admin, {
        apiVersion: 'tempora.dev/v1alpha1',
        kind: 'SimulationBudget',
        metadata: { name: 'rolling', namespace: NS },
        spec: { gatewayRef: 'shared', scope: 'global', limitUsd: 5 },
      });
      await waitFor('the budget in the ConfigMap', async () => (await data('shared-simulation-budgets'))!['rolling.json'] !== undefined, { timeoutMs: 30_000 });
      assert.equal((await templateOf('shared-simulation')).metadata!.annotations!['tempora.dev/config-hash'], hash);
      await admin.delete(R.SimulationBudget, NS, 'rolling');
      // Without budgets the ConfigMap is empty (the API server drops an empty data), and still there for the pods to mount.
      await waitFor('the budget gone from the ConfigMap', async () => (await data('shared-simulation-budgets')) === undefined, { timeoutMs: 30_000 });
    });
  });

  describe('the conductor and billing services', function () {
    it('get their state, keys and peers; the conductor the providers, billing the payment settings, as their own configuration schemas read them', async function () {
      const sources = async (deployment: string) => ((await container(deployment)).envFrom ?? []).map((s) => s.configMapRef?.name ?? s.secretRef?.name);
      assert.deepEqual(await sources('shared-conductor'), ['shared-conductor', 'tempora-keys', 'tempora-providers'], 'its model calls the providers');
      assert.deepEqual(
        await sources('shared-billing'),
        ['shared-billing', 'tempora-keys', 'tempora-billing'],
        'Stripe and App Store settings, and no model credentials',
      );
      for (const svc of ['conductor', 'billing']) {
        const c = await container(`shared-${svc}`);
        assert.equal(c.image, `ghcr.io/tempora/${svc}:1.0.0`);
        assert.deepEqual(env(c, 'DATABASE_URL')?.valueFrom, secretRef('tempora-db'), `${svc}: its ledger and conversations are durable`);
        assert.deepEqual(env(c, 'REDIS_URL')?.valueFrom, secretRef('tempora-redis'));
      }
      // The keys Secret brings SERVICE_KEY, whose first entry is each one's GATEWAY_SERVICE_KEY.
      const conductor = ConductorConfigSchema.parse({ ...(await data('shared-conductor')), SERVICE_KEY: 'k1,k2' });
      assert.equal(conductor.PORT, 8084);
      assert.deepEqual(
        [conductor.GATEWAY_URL, conductor.GRAPH_URL, conductor.GENERATION_URL, conductor.SIMULATION_URL],
        [
          'http://shared-gateway.default.svc:8080',
          'http://shared-graph.default.svc:8082',
          'http://shared-generation.default.svc:8081',
          'http://shared-simulation.default.svc:8083',
        ],
        'the tools it calls, and the ledger and JWKS of the gateway',
      );
      assert.equal(conductor.JWKS_URL, 'http://shared-gateway.default.svc:8080/.well-known/jwks.json');
      // What the billing Secret holds (here a Stripe account) completes its configuration.
      const billing = BillingConfigSchema.parse({
        ...(await data('shared-billing')),
        SERVICE_KEY: 'k1',
        STRIPE_SECRET_KEY: 'sk_test_1',
        STRIPE_WEBHOOK_SECRET: 'whsec_1',
        CHECKOUT_SUCCESS_URL: 'https://tempora.test/paid',
        CHECKOUT_CANCEL_URL: 'https://tempora.test/cancelled',
      });
      assert.equal(billing.PORT, 8085);
      assert.equal(billing.GATEWAY_URL, 'http://shared-gateway.default.svc:8080', 'credits are granted through the gateway');
      const gateway = GatewayConfigSchema.parse(await data('shared-gateway'));
      assert.deepEqual(
        [gateway.CONDUCTOR_URL, gateway.BILLING_URL],
        ['http://shared-conductor.default.svc:8084', 'http://shared-billing.default.svc:8085'],
        'the gateway routes to them',
      );
      for (const svc of ['conductor', 'billing']) {
        const service = (await admin.get(R.Service, NS, `shared-${svc}`)).spec;
        assert.equal(service?.ports?.[0]?.port, svc === 'conductor' ? 8084 : 8085);
      }
    });

    it('more than one replica of either needs shared state', async function () {
      for (const svc of ['conductor', 'billing']) {
        await assert.rejects(
          applyAs(admin, embedded('crowded', { services: { [svc]: { replicas: 2 } } })),
          /more than one replica needs spec.database and spec.redis/,
          svc,
        );
      }
      await applyAs(admin, gateway('shared', { ingress: undefined, services: { gateway: { replicas: 2 }, billing: { replicas: 2 } } }));
      await waitFor('two billing replicas', async () => (await replicas('shared-billing')) === 2, { timeoutMs: 30_000 });
      await applyAs(admin, gateway('shared', { ingress: undefined }));
    });
  });

  describe("the gateway's signing key", function () {
    it('is created once in a Secret the gateway reads, kept, and made anew when deleted', async function () {
      const gw = await admin.get(R.TemporaGateway, NS, 'shared');
      const [secret] = await owned(R.Secret, gw);
      assert.equal(secret?.metadata.name, 'shared-signing-key');
      const pem = Buffer.from(secret!.data!.JWT_PRIVATE_KEY!, 'base64').toString();
      // The gateway's own configuration and key store take it as its signing key.
      const config = GatewayConfigSchema.parse({ JWT_PRIVATE_KEY: pem });
      const keys = new KeyStore({ configuredKey: config.JWT_PRIVATE_KEY, file: '/nonexistent/signing-keys.json', rotationMs: 86_400_000, retainMs: 60_000 });
      assert.equal(keys.jwks().keys.length, 1);
      // The keys Secret comes after it, so a JWT_PRIVATE_KEY there wins (the user's own key).
      const sources = ((await container('shared-gateway')).envFrom ?? []).map((s) => s.configMapRef?.name ?? s.secretRef?.name);
      assert.deepEqual(sources, ['shared-gateway', 'shared-signing-key', 'tempora-keys']);
      assert.ok(!((await container('shared-graph')).envFrom ?? []).some((s) => s.secretRef?.name === 'shared-signing-key'), 'only the gateway holds it');

      op.resyncAll();
      // "No write" has no event to wait on: a window long enough for the resync's reconciles is the test.
      await new Promise((r) => setTimeout(r, 1500));
      const kept = await admin.get(R.Secret, NS, 'shared-signing-key');
      assert.equal(kept.metadata.resourceVersion, secret!.metadata.resourceVersion, 'never rewritten');

      await admin.delete(R.Secret, NS, 'shared-signing-key');
      const fresh = await waitFor(
        'a new key',
        async () => {
          const s = await admin.getOrUndefined(R.Secret, NS, 'shared-signing-key');
          return s && s.metadata.uid !== secret!.metadata.uid ? s : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.notEqual(fresh.data?.JWT_PRIVATE_KEY, secret!.data?.JWT_PRIVATE_KEY);
    });
  });

  describe('the agent pool', function () {
    it("takes the generation pods' agent tasks: same Redis, same key prefix, the pool's name on the queue metric", async function () {
      const before = GenerationConfigSchema.parse(await data('shared-generation'));
      assert.equal(before.AGENT_POOL, 'in-process', 'no pool yet');
      await applyAs(admin, agentPool('pool-a', { gatewayRef: 'shared', redis: undefined, minReplicas: 1 }));
      await waitReady(R.AgentPool, 'pool-a');
      const generation = GenerationConfigSchema.parse(
        await waitFor(
          'generation switched',
          async () => {
            const d = await data('shared-generation');
            return d!.AGENT_POOL === 'redis' ? d : undefined;
          },
          { timeoutMs: 30_000 },
        ),
      );
      assert.equal(generation.AGENT_POOL_NAME, 'pool-a');
      const worker = GenerationConfigSchema.parse(await data('pool-a'));
      assert.deepEqual([worker.AGENT_POOL_NAME, worker.REDIS_KEY_PREFIX], ['pool-a', generation.REDIS_KEY_PREFIX]);
      // Neither sets a Redis of its own: both use the TemporaGateway's.
      assert.deepEqual(env(await container('shared-generation'), 'REDIS_URL')?.valueFrom, secretRef('tempora-redis'));
      assert.deepEqual(env(await container('pool-a'), 'REDIS_URL')?.valueFrom, secretRef('tempora-redis'));
      assert.deepEqual(
        ((await container('pool-a')).envFrom ?? []).map((s) => s.configMapRef?.name ?? s.secretRef?.name),
        ['pool-a', 'tempora-providers'],
      );
    });

    it('has one pool serve a TemporaGateway; the others say so, and take over when it goes', async function () {
      await applyAs(admin, agentPool('pool-b', { gatewayRef: 'shared', redis: { secretName: 'pool-b-redis' }, minReplicas: 1 }));
      await waitCondition(R.AgentPool, 'pool-b', 'Ready', 'False', 'AnotherPoolServes');
      assert.equal(await admin.getOrUndefined(R.Deployment, NS, 'pool-b'), undefined, 'no workload');
      await admin.delete(R.AgentPool, NS, 'pool-a');
      await waitReady(R.AgentPool, 'pool-b');
      await waitFor(
        'generation follows pool-b and its Redis',
        async () => {
          const d = await data('shared-generation');
          const redis = env(await container('shared-generation'), 'REDIS_URL')?.valueFrom;
          return d!.AGENT_POOL_NAME === 'pool-b' && JSON.stringify(redis) === JSON.stringify(secretRef('pool-b-redis'));
        },
        { timeoutMs: 30_000 },
      );
      await admin.delete(R.AgentPool, NS, 'pool-b');
      await waitFor('generation runs its agents itself again', async () => (await data('shared-generation'))!.AGENT_POOL === undefined, { timeoutMs: 30_000 });
    });

    it('keeps no workload while its TemporaGateway is missing or has no Redis', async function () {
      await applyAs(admin, agentPool('stray', { gatewayRef: 'nowhere', redis: undefined }));
      await waitCondition(R.AgentPool, 'stray', 'Ready', 'False', 'GatewayNotFound');
      await applyAs(admin, agentPool('stray', { gatewayRef: 'solo', redis: undefined }));
      await waitCondition(R.AgentPool, 'stray', 'Ready', 'False', 'RedisRequired');
      assert.equal(await admin.getOrUndefined(R.Deployment, NS, 'stray'), undefined);
      assert.equal((await data('solo-generation'))!.AGENT_POOL, undefined, 'the TemporaGateway keeps its agents in-process');
      await admin.delete(R.AgentPool, NS, 'stray');
    });
  });

  describe('graph workers', function () {
    it("take the TemporaGateway's database, keys and providers, and do not run without a database", async function () {
      await applyAs(admin, graphWorker('render', 'renderer', { gatewayRef: 'shared' }));
      await waitReady(R.GraphWorker, 'render');
      const c = await container('render');
      assert.deepEqual(env(c, 'DATABASE_URL')?.valueFrom, secretRef('tempora-db'));
      assert.deepEqual(env(c, 'REDIS_URL')?.valueFrom, secretRef('tempora-redis'));
      assert.deepEqual(
        (c.envFrom ?? []).map((s) => s.configMapRef?.name ?? s.secretRef?.name),
        ['render', 'tempora-keys', 'tempora-providers'],
      );
      assert.equal((await data('render'))!.REDIS_KEY_PREFIX, 'tempora:default:shared');

      await applyAs(admin, graphWorker('lonely', 'judge', { gatewayRef: 'solo' }));
      const refused = await waitCondition(R.GraphWorker, 'lonely', 'Ready', 'False', 'DatabaseRequired');
      assert.match(condition(refused, 'Degraded')!.message, /graph's PostgreSQL/);
      assert.equal(await admin.getOrUndefined(R.Deployment, NS, 'lonely'), undefined);
      await applyAs(admin, graphWorker('lonely', 'judge', { gatewayRef: 'solo', database: { secretName: 'graph-db' } }));
      await waitReady(R.GraphWorker, 'lonely');
      assert.deepEqual(env(await container('lonely'), 'DATABASE_URL')?.valueFrom, secretRef('graph-db'));
      await admin.delete(R.GraphWorker, NS, 'lonely');
    });
  });

  describe('scheduling and pulling', function () {
    // spec.pods as a platform engineer sets it for a private registry and a dedicated node pool; the
    // stand-in node (kubelet-stand-in.ts) has the labels kubernetes.io/os=linux and kubernetes.io/arch=amd64.
    const pods = {
      labels: { team: 'platform' },
      annotations: { 'example.com/owner': 'sre' },
      imagePullSecrets: [{ name: 'regcred' }],
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      tolerations: [
        { key: 'dedicated', operator: 'Equal', value: 'tempora', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 60 },
      ],
      affinity: {
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            { weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { team: 'platform' } } } },
          ],
        },
      },
      topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' }],
      priorityClassName: 'tempora-high',
    };
    const monitoring = { labels: { release: 'kube-prometheus-stack' } };
    /** The pods the controllers made for the owner, as the API server stores them. */
    const podsOf = async (owner: KubeObject) => (await admin.list(R.Pod, { labelSelector: `tempora.dev/owner-uid=${owner.metadata.uid}` }, NS)).items;
    const assertPlaced = (what: string, spec: PodSpec | undefined, labels: Record<string, string> | undefined, component: string, instance: string) => {
      assert.deepEqual(spec?.imagePullSecrets, pods.imagePullSecrets, `${what}: imagePullSecrets`);
      assert.deepEqual(spec?.nodeSelector, pods.nodeSelector, `${what}: nodeSelector`);
      assert.deepEqual(spec?.tolerations?.slice(0, 2), pods.tolerations, `${what}: tolerations`);
      assert.deepEqual(spec?.affinity, pods.affinity, `${what}: affinity`);
      assert.deepEqual(spec?.priorityClassName, 'tempora-high', `${what}: priorityClassName`);
      assert.deepEqual(
        spec?.topologySpreadConstraints,
        [
          {
            ...pods.topologySpreadConstraints[0],
            labelSelector: { matchLabels: { 'app.kubernetes.io/name': component, 'app.kubernetes.io/instance': instance } },
          },
        ],
        `${what}: a spread constraint without labelSelector spreads the component's own pods`,
      );
      assert.equal(labels?.team, 'platform', `${what}: pod label`);
    };

    before(async function () {
      // The Priority admission plugin refuses pods naming a PriorityClass that does not exist.
      await admin.request('PATCH', '/apis/scheduling.k8s.io/v1/priorityclasses/tempora-high', {
        body: { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: 'tempora-high' }, value: 1000 },
        contentType: 'application/apply-patch+yaml',
        query: { fieldManager: 'test-user', force: 'true' },
      });
    });

    it('gives every pod of every kind the pull secrets, scheduling and metadata of spec.pods; a service overrides them', async function () {
      await applyAs(admin, embedded('placed', { pods, monitoring, services: { graph: { pods: { labels: { team: 'graph' }, priorityClassName: '' } } } }));
      const gw = await waitReady(R.TemporaGateway, 'placed');
      const live = await podsOf(gw);
      for (const svc of SERVICES) {
        const template = await templateOf(`placed-${svc}`);
        const pod = live.find((p) => p.metadata.labels?.['app.kubernetes.io/name'] === svc);
        assert.ok(pod, `a pod of ${svc}`);
        if (svc === 'graph') {
          assert.deepEqual(
            [template.metadata?.labels?.team, template.spec?.priorityClassName, template.spec?.imagePullSecrets],
            ['graph', undefined, pods.imagePullSecrets],
            "the service's own pods settings over the TemporaGateway's",
          );
          continue;
        }
        assertPlaced(`${svc} template`, template.spec, template.metadata?.labels, svc, 'placed');
        assert.equal(template.metadata?.annotations?.['example.com/owner'], 'sre');
        // The pull secret reaches the pods the ReplicaSets make, not only the template.
        assertPlaced(`${svc} pod`, pod!.spec, pod!.metadata.labels, svc, 'placed');
      }
      // Every ServiceMonitor carries the labels a Prometheus selects monitors by, and names the component.
      for (const m of await owned(R.ServiceMonitor, gw)) {
        assert.equal(m.metadata.labels?.release, 'kube-prometheus-stack', m.metadata.name);
        const svc = m.metadata.labels?.['app.kubernetes.io/name'];
        assert.deepEqual(m.spec?.endpoints[0]?.relabelings, [{ action: 'replace', targetLabel: 'tempora_component', replacement: svc }]);
      }

      await applyAs(admin, agentPool('placed-pool', { gatewayRef: 'shared', redis: undefined, minReplicas: 1, pods, monitoring }));
      await applyAs(admin, graphWorker('placed-daily', 'daily', { gatewayRef: 'shared', pods }));
      const pool = await waitReady(R.AgentPool, 'placed-pool', 60_000);
      await waitReady(R.GraphWorker, 'placed-daily');
      const poolTemplate = await templateOf('placed-pool');
      assertPlaced('agent pool', poolTemplate.spec, poolTemplate.metadata?.labels, 'generation-agents', 'placed-pool');
      const [poolPod] = await podsOf(pool);
      assertPlaced('agent pool pod', poolPod!.spec, poolPod!.metadata.labels, 'generation-agents', 'placed-pool');
      const [podMonitor] = await owned(R.PodMonitor, pool);
      assert.equal(podMonitor?.metadata.labels?.release, 'kube-prometheus-stack');
      assert.deepEqual(podMonitor?.spec?.podMetricsEndpoints[0]?.relabelings, [
        { action: 'replace', targetLabel: 'tempora_component', replacement: 'agent-pool' },
      ]);
      const job = (await admin.get(R.CronJob, NS, 'placed-daily')).spec!.jobTemplate.spec!.template;
      assertPlaced('daily job', job.spec, job.metadata?.labels, 'graph-daily', 'placed-daily');

      // What the API server stored (its defaults added) is what the operator applied: no write on a resync.
      const deploymentWrites = () => counterSum(op, 'tempora_operator_api_writes_total', (l) => l.resource === 'deployments' || l.resource === 'cronjobs');
      const before = await deploymentWrites();
      op.resyncAll();
      // "No write" has no event to wait on: a window long enough for the resync's reconciles is the test.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(await deploymentWrites(), before, "no drift from the API server's defaults");
      await admin.delete(R.AgentPool, NS, 'placed-pool');
      await admin.delete(R.GraphWorker, NS, 'placed-daily');
    });

    it('leaves pods that no node matches Pending, and says why in Ready and Degraded', async function () {
      this.timeout(240_000);
      await applyAs(admin, embedded('placed', { pods: { ...pods, nodeSelector: { pool: 'gpu' } }, monitoring }));
      const stuck = await waitCondition(R.TemporaGateway, 'placed', 'Degraded', 'True', 'Unschedulable', 60_000);
      assert.match(
        condition(stuck, 'Degraded')!.message,
        /pod placed-\w+-\w+-\w+: Unschedulable: 0\/1 nodes are available: 1 node\(s\) didn't match Pod's node affinity\/selector/,
      );
      const ready = condition(stuck, 'Ready')!;
      assert.deepEqual([ready.status, ready.reason], ['False', 'Unschedulable']);
      const pending = (await podsOf(stuck)).filter((p) => p.spec?.nodeSelector?.pool === 'gpu');
      assert.ok(pending.length > 0 && pending.every((p) => p.status?.phase === 'Pending'), 'the pods wait for a node');
      // Once the Deployments are observed (status may wait for the counts to settle), Ready's message says why too.
      await waitFor(
        "Ready's message with the scheduler's",
        async () =>
          /waiting for pods: .*; pod placed-\w+-\w+-\w+: Unschedulable: .*didn't match Pod's node affinity\/selector/.test(
            condition(await admin.get(R.TemporaGateway, NS, 'placed'), 'Ready')?.message ?? '',
          ),
        { timeoutMs: COUNTS_HOLD_MS + 15_000 },
      );

      await applyAs(admin, embedded('placed', { pods, monitoring }));
      await waitReady(R.TemporaGateway, 'placed', 60_000);
      await admin.delete(R.TemporaGateway, NS, 'placed');
    });
  });

  describe('settings from the TemporaGateway', function () {
    it('tell each service how many proxies to trust, so clients are told apart behind them', async function () {
      const hops = async (gw: string) => {
        const gateway = GatewayConfigSchema.parse(await data(`${gw}-gateway`)).TRUSTED_PROXY_HOPS;
        const graph = GraphConfigSchema.parse(await data(`${gw}-graph`)).TRUSTED_PROXY_HOPS;
        const generation = GenerationConfigSchema.parse(await data(`${gw}-generation`)).TRUSTED_PROXY_HOPS;
        const simulation = SimulationConfigSchema.parse(await data(`${gw}-simulation`)).TRUSTED_PROXY_HOPS;
        const conductor = ConductorConfigSchema.parse(await data(`${gw}-conductor`)).TRUSTED_PROXY_HOPS;
        const billing = BillingConfigSchema.parse(await data(`${gw}-billing`)).TRUSTED_PROXY_HOPS;
        return [gateway, graph, generation, simulation, conductor, billing];
      };
      assert.deepEqual(await hops('shared'), [0, 1, 1, 1, 1, 1], 'no Ingress: the gateway trusts nobody, the services behind it the gateway');
      await applyAs(admin, gateway('behind'));
      await waitReady(R.TemporaGateway, 'behind');
      assert.deepEqual(await hops('behind'), [1, 2, 2, 2, 2, 2], 'behind an Ingress');
      await applyAs(admin, gateway('behind', { trustedProxies: 2 }));
      await waitFor('two proxies', async () => (await hops('behind'))[0] === 2, { timeoutMs: 30_000 });
      assert.deepEqual(await hops('behind'), [2, 3, 3, 3, 3, 3]);
      // X-Forwarded-For is believed only from the proxies' addresses: the private ranges by default, or those named.
      const trusted = async (gw: string) => [
        GatewayConfigSchema.parse(await data(`${gw}-gateway`)).TRUSTED_PROXIES,
        GraphConfigSchema.parse(await data(`${gw}-graph`)).TRUSTED_PROXIES,
      ];
      assert.deepEqual(await trusted('behind'), [PRIVATE_RANGES, PRIVATE_RANGES]);
      assert.deepEqual(await trusted('shared'), [[], PRIVATE_RANGES], 'no proxy in front: the gateway believes no one');
      await applyAs(admin, gateway('behind', { trustedProxies: 2, trustedProxyAddresses: ['10.42.0.0/16'] }));
      await waitFor('the named range', async () => (await trusted('behind'))[0]?.[0] === '10.42.0.0/16', { timeoutMs: 30_000 });
      assert.deepEqual(await trusted('behind'), [['10.42.0.0/16'], [...PRIVATE_RANGES, '10.42.0.0/16']]);
      await admin.delete(R.TemporaGateway, NS, 'behind');
    });

    it('give every pod of the platform, workers too, the OTEL_* settings of spec.tracing', async function () {
      await applyAs(admin, gateway('shared', { ingress: undefined, tracing: { endpoint: 'http://collector.monitoring:4318', samplingRatio: 0.25 } }));
      const expected = {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.monitoring:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OTEL_RESOURCE_ATTRIBUTES: 'k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.node.name=$(NODE_NAME)',
      };
      for (const deployment of ['shared-gateway', 'shared-generation', 'shared-graph', 'shared-simulation', 'shared-conductor', 'shared-billing', 'render']) {
        const c = await waitFor(
          `${deployment} traced`,
          async () => {
            const found = await container(deployment);
            return env(found, 'OTEL_EXPORTER_OTLP_ENDPOINT') ? found : undefined;
          },
          { timeoutMs: 30_000 },
        );
        for (const [name, value] of Object.entries(expected)) assert.equal(env(c, name)?.value, value, `${deployment} ${name}`);
        const names = (c.env ?? []).map((e) => e.name);
        assert.ok(names.indexOf('POD_NAME') < names.indexOf('OTEL_RESOURCE_ATTRIBUTES'), 'defined before it refers to them');
        assert.deepEqual(env(c, 'POD_NAME')?.valueFrom, { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } });
      }
      assert.equal(env(await container('solo-gateway'), 'OTEL_EXPORTER_OTLP_ENDPOINT'), undefined, 'not without spec.tracing');
      await waitReady(R.TemporaGateway, 'shared');
    });
  });

  describe('readiness', function () {
    it('is Ready only once the pods are available', async function () {
      // Pods of this tag stay as the controllers made them, waiting for a node.
      await applyAs(admin, embedded('slow', { image: { version: 'pending-1' } }));
      await waitFor('TemporaGateway slow Ready=False', async () => condition(await admin.get(R.TemporaGateway, NS, 'slow'), 'Ready')?.status === 'False', {
        timeoutMs: 30_000,
      });
      // That the Deployments are observed and their pods on their way is no news while they converge:
      // status says so once the wait for the counts to settle is over (COUNTS_HOLD_MS).
      const waiting = await waitCondition(R.TemporaGateway, 'slow', 'Ready', 'False', 'PodsUnavailable', COUNTS_HOLD_MS + 15_000);
      assert.match(condition(waiting, 'Ready')!.message, /slow-gateway 0\/1 available/);
      assert.deepEqual([condition(waiting, 'Progressing')?.status, condition(waiting, 'Progressing')?.reason], ['True', 'RollingOut']);
      assert.equal(condition(waiting, 'Degraded')?.status, 'False', 'waiting is not failing');
      await applyAs(admin, embedded('slow', { image: { version: '1.0.0' } }));
      const ready = await waitReady(R.TemporaGateway, 'slow');
      assert.match(condition(ready, 'Ready')!.message, /6\/6 pods available/);
    });

    for (const [tag, reason, message] of [
      ['crashloop', 'CrashLoopBackOff', /pod slow-\w+-\w+-\w+: CrashLoopBackOff: container \w+ keeps exiting, last exit code 1 \(Error\)/],
      ['missing', 'ImagePullBackOff', /cannot pull image ghcr.io\/tempora\/\w+:missing/],
      ['unschedulable', 'Unschedulable', /didn't match Pod's node affinity/],
    ] as const) {
      it(`shows pods that cannot start (${reason}) in status and in a Warning Event within a minute`, async function () {
        const started = Date.now();
        await applyAs(admin, embedded('slow', { image: { version: tag } }));
        const failing = await waitCondition(R.TemporaGateway, 'slow', 'Degraded', 'True', reason, 60_000);
        assert.match(condition(failing, 'Degraded')!.message, message);
        assert.equal(condition(failing, 'Ready')?.reason, reason, 'Ready says why too');
        await waitFor(
          `a Warning Event ${reason}`,
          async () => (await events('TemporaGateway', 'slow')).some((e) => e.type === 'Warning' && e.reason === reason),
          { timeoutMs: 60_000 - (Date.now() - started) },
        );
      });
    }

    it('recovers: Ready and Degraded=False once the pods run, with a Normal Event', async function () {
      await applyAs(admin, embedded('slow', { image: { version: '1.0.1' } }));
      const ready = await waitReady(R.TemporaGateway, 'slow', 60_000);
      assert.equal(condition(ready, 'Degraded')?.status, 'False');
      await waitFor('a Normal Event', async () => (await events('TemporaGateway', 'slow')).some((e) => e.type === 'Normal' && e.reason === 'Healthy'), {
        timeoutMs: 30_000,
      });
      await admin.delete(R.TemporaGateway, NS, 'slow');
    });

    it("waits for an AgentPool's minimum, and reports its available pods in two status writes", async function () {
      const statusWrites = () => counterSum(op, 'tempora_operator_api_writes_total', (l) => l.resource === 'agentpools/status');
      const before = await statusWrites();
      await applyAs(admin, agentPool('pool-c', { gatewayRef: 'shared', redis: undefined, minReplicas: 2 }));
      const pool = await waitReady(R.AgentPool, 'pool-c', 60_000);
      assert.deepEqual([pool.status?.replicas, pool.status?.availableReplicas, pool.status?.desiredReplicas], [2, 2, 2]);
      // Not Ready, then Ready: the steps of the HPA's scale from one pod to two (replicas, available and
      // desired, one at a time) wait for the counts to settle.
      assert.ok((await statusWrites()) - before <= 2, `${(await statusWrites()) - before} status writes`);
      await admin.delete(R.AgentPool, NS, 'pool-c');
    });
  });
});
