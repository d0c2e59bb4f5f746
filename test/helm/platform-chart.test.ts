// The platform chart charts/tempora, checked with a real helm v3: lint with every example values file,
// what it renders (custom resources the operator reads, the Secrets they name, PostgreSQL and Redis,
// alert rules and dashboards read from dashboards/ through the chart's links), values refused by
// values.schema.json and by the templates' cross-field rules, and on a real kube-apiserver
// (test/k8s/control-plane.ts) with the CRDs of crds/ and the Prometheus Operator's own CRDs: every
// rendering accepted by a server-side dry run, then helm install, upgrade, rollback and uninstall for real,
// with the operator filling the generated Secrets, their values kept across all of them and only the
// documented data left after uninstall.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '@tempora/kit/runtime';
import { parse } from 'yaml';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { GENERATE_ANNOTATION, generateValues, isGenerated, planGeneration } from '../../operator/src/reconcilers/generated-secrets.ts';
import { WORKER_PORT } from '../../operator/src/reconcilers/workload.ts';
import { applyAs, CRD_DIR, clientFor, manifests, newOperator } from '../../operator/test/cluster.ts';
import { GatewayConfigSchema } from '../../services/gateway/src/config.ts';
import { GenerationConfigSchema } from '../../services/generation/src/config.ts';
import { GraphConfigSchema } from '../../services/graph/src/config.ts';
import { SimulationConfigSchema } from '../../services/simulation/src/config.ts';
import { ControlPlane } from '../k8s/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { Helm, keyPaths, lookup, only, parseObjects, type SchemaNode, schemaPaths } from './helm.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const CHART = join(ROOT, 'charts', 'tempora');
const EXAMPLES = join(CHART, 'examples');
const FULL_VALUES = join(HERE, 'platform-values-full.yaml');
const DASHBOARDS = join(ROOT, 'dashboards', 'grafana');
const RULES = join(ROOT, 'dashboards', 'prometheus', 'tempora.rules.yaml');
const RELEASE = 'tempora';
const NAMESPACE = 'tempora';
const PROMETHEUS_RULE_API = 'monitoring.coreos.com/v1/PrometheusRule';
const TEMPORA_KINDS = ['TemporaGateway', 'GraphWorker', 'AgentPool', 'SimulationBudget'];

const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as SchemaNode;
const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
const full = parse(readFileSync(FULL_VALUES, 'utf8')) as Record<string, unknown>;
const examples = readdirSync(EXAMPLES)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

interface SecretKeyRef {
  secretName: string;
  key: string;
}
interface GatewaySpec {
  image: { registry: string; version: string; pullPolicy: string };
  logLevel: string;
  services: Record<string, { replicas?: number; maxUnavailable?: number; resources?: unknown }>;
  secrets: { keys: string; providers?: string; billing?: string };
  database?: SecretKeyRef;
  redis?: SecretKeyRef;
  generation: { callbackSecret: SecretKeyRef; models?: unknown; publicUrl?: string };
  [field: string]: unknown;
}
type Custom<S> = KubeObject & { spec: S };
/** Without data when the operator is to generate every key. */
type Secret = KubeObject & { data?: Record<string, string> };
interface PodTemplate {
  spec: {
    securityContext: Record<string, unknown>;
    containers: {
      name: string;
      image: string;
      env: { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }[];
      securityContext: Record<string, unknown>;
      volumeMounts: { name: string; mountPath: string }[];
    }[];
    volumes?: { name: string }[];
  };
}
type StatefulSet = KubeObject & {
  spec: {
    serviceName: string;
    template: PodTemplate;
    persistentVolumeClaimRetentionPolicy?: { whenDeleted: string };
    volumeClaimTemplates?: { metadata: { name: string }; spec: { storageClassName?: string; resources: { requests: { storage: string } } } }[];
  };
};

function decoded(secret: Secret): Record<string, string> {
  return Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
}

/** The keys the Secret asks the operator to generate, by the template of each. */
function toGenerate(secret: Secret): Record<string, string> {
  return JSON.parse(secret.metadata.annotations?.[GENERATE_ANNOTATION] ?? '{}') as Record<string, string>;
}

/** The rendered Secret's values once the operator has filled it, with the operator's own generation. */
function filledByOperator(secret: Secret): Record<string, string> {
  const name = secret.metadata.name;
  assert.ok(isGenerated(secret), `${name} is labelled for the operator`);
  const plan = planGeneration(secret);
  assert.deepEqual(plan.problems, [], `${name}: every key can be generated`);
  assert.deepEqual([...plan.fill].sort(), Object.keys(toGenerate(secret)).sort(), `${name}: the operator fills every key it names`);
  return decoded({ ...secret, data: { ...secret.data, ...generateValues(secret, plan) } });
}

/** The Secret keys the platform's custom resources read, as "secret/key" (a whole Secret as "secret/*"). */
function referencedSecrets(objects: KubeObject[]): string[] {
  const refs: string[] = [];
  for (const o of objects) {
    if (o.kind !== 'TemporaGateway') continue;
    const spec = (o as Custom<GatewaySpec>).spec;
    refs.push(`${spec.secrets.keys}/*`, `${spec.generation.callbackSecret.secretName}/${spec.generation.callbackSecret.key}`);
    if (spec.secrets.providers) refs.push(`${spec.secrets.providers}/*`);
    if (spec.secrets.billing) refs.push(`${spec.secrets.billing}/*`);
    if (spec.database) refs.push(`${spec.database.secretName}/${spec.database.key}`);
    if (spec.redis) refs.push(`${spec.redis.secretName}/${spec.redis.key}`);
  }
  return refs;
}

describe('helm chart tempora (the platform)', function () {
  let helm: Helm;
  const render = (...extra: string[]) => helm.template(RELEASE, CHART, NAMESPACE, ...extra);

  before(function () {
    this.timeout(40 * 60_000); // a clean machine builds helm first (about 5 minutes on 2 cores)
    helm = Helm.build();
  });

  after(function () {
    helm?.dispose();
  });

  describe('lint, values and files', function () {
    it('passes helm lint --strict with the default values, every example values file and every value set', function () {
      helm.ok('lint', CHART, '--strict', '--namespace', NAMESPACE);
      for (const f of examples) helm.ok('lint', CHART, '--strict', '--namespace', NAMESPACE, '-f', join(EXAMPLES, f));
      helm.ok('lint', CHART, '--strict', '--namespace', NAMESPACE, '-f', FULL_VALUES);
      assert.deepEqual(examples, ['kind.yaml', 'production.yaml']);
    });

    it('the values file of these tests sets every value of values.yaml', function () {
      const missing = keyPaths(defaults, schema).filter((p) => lookup(full, p) === undefined);
      assert.deepEqual(missing, [], 'platform-values-full.yaml must set every value');
    });

    it('the README documents every value the schema knows, and values.yaml has no key the schema does not', function () {
      keyPaths(defaults, schema); // fails on an undescribed key
      const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
      const undocumented = schemaPaths(schema).filter((p) => p !== 'global' && !readme.includes(`\`${p}\``));
      assert.deepEqual(undocumented, [], 'values missing from charts/tempora/README.md');
    });

    it('reads the dashboards and the rules of dashboards/ through links, not copies, beside the prometheus-adapter rules', function () {
      const files = join(CHART, 'files');
      assert.deepEqual(readdirSync(files).sort(), ['dashboards', 'prometheus-adapter-values.yaml', 'tempora.rules.yaml']);
      // Values for another chart (docs/operator.md, "Autoscaling"), which test/e2e/autoscaling.test.ts runs.
      assert.ok(lstatSync(join(files, 'prometheus-adapter-values.yaml')).isFile());
      assert.ok(lstatSync(join(files, 'dashboards')).isSymbolicLink());
      assert.equal(readlinkSync(join(files, 'dashboards')), '../../../dashboards/grafana', 'a relative link, valid in any clone');
      assert.equal(realpathSync(join(files, 'dashboards')), realpathSync(DASHBOARDS));
      assert.ok(lstatSync(join(files, 'tempora.rules.yaml')).isSymbolicLink());
      assert.equal(realpathSync(join(files, 'tempora.rules.yaml')), realpathSync(RULES));
    });

    it('helm package puts the files themselves into the chart, and the package renders like the directory', function () {
      const out = mkdtempSync(join(tmpdir(), 'tempora-platform-package-'));
      try {
        helm.ok('package', CHART, '--destination', out);
        const tgz = readdirSync(out).find((f) => f.endsWith('.tgz'))!;
        assert.equal(spawnSync('tar', ['-xzf', join(out, tgz), '-C', out]).status, 0);
        const packaged = join(out, 'tempora', 'files');
        for (const f of readdirSync(DASHBOARDS)) {
          assert.ok(!lstatSync(join(packaged, 'dashboards', f)).isSymbolicLink());
          assert.equal(readFileSync(join(packaged, 'dashboards', f), 'utf8'), readFileSync(join(DASHBOARDS, f), 'utf8'), f);
        }
        assert.equal(readFileSync(join(packaged, 'tempora.rules.yaml'), 'utf8'), readFileSync(RULES, 'utf8'));
        const adapterValues = 'prometheus-adapter-values.yaml';
        assert.equal(readFileSync(join(packaged, adapterValues), 'utf8'), readFileSync(join(CHART, 'files', adapterValues), 'utf8'));
        assert.deepEqual(readdirSync(join(out, 'tempora', 'examples')).sort(), examples);
        // Nothing is drawn at render time (the operator generates the Secrets' keys), so the bytes are the same.
        const args = ['--namespace', NAMESPACE, '--api-versions', PROMETHEUS_RULE_API];
        assert.equal(helm.ok('template', RELEASE, join(out, tgz), ...args), helm.ok('template', RELEASE, CHART, ...args));
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    });
  });

  describe('rendered with the default values', function () {
    let objects: KubeObject[];
    let gateway: Custom<GatewaySpec>;

    before(function () {
      objects = render();
      gateway = only<Custom<GatewaySpec>>(objects, 'TemporaGateway', RELEASE);
    });

    it('renders the platform: its custom resources, Secrets, PostgreSQL, Redis and the dashboards', function () {
      const dashboards = readdirSync(DASHBOARDS).map((f) => `ConfigMap/tempora-dashboard-${f.replace(/^tempora-/, '').replace(/\.json$/, '')}`);
      assert.deepEqual(
        objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
        [
          'AgentPool/tempora-agents',
          'TemporaGateway/tempora',
          'GraphWorker/tempora-daily',
          'GraphWorker/tempora-expander',
          'GraphWorker/tempora-judge',
          'GraphWorker/tempora-renderer',
          'NetworkPolicy/tempora-default-deny',
          'NetworkPolicy/tempora-gateway',
          'NetworkPolicy/tempora-metrics',
          'NetworkPolicy/tempora-operator',
          'NetworkPolicy/tempora-within',
          'Secret/tempora-callback',
          'Secret/tempora-keys',
          'Secret/tempora-postgresql',
          'Secret/tempora-redis',
          'Service/tempora-postgresql',
          'Service/tempora-redis',
          'SimulationBudget/tempora-global',
          'StatefulSet/tempora-postgresql',
          'StatefulSet/tempora-redis',
          ...dashboards,
        ].sort(),
      );
      for (const o of objects) {
        assert.equal(o.metadata.namespace, NAMESPACE, `${o.kind}/${o.metadata.name} namespace`);
        assert.equal(o.metadata.labels?.['app.kubernetes.io/instance'], RELEASE);
        assert.equal(o.metadata.labels?.['app.kubernetes.io/part-of'], 'tempora');
        assert.equal(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm');
      }
    });

    it('points the TemporaGateway at the Secrets it renders, and the workers and the pool at the TemporaGateway', function () {
      const secrets = new Map(objects.filter((o) => o.kind === 'Secret').map((s) => [s.metadata.name, s as Secret]));
      for (const ref of referencedSecrets(objects)) {
        const [name, key] = ref.split('/') as [string, string];
        const secret = secrets.get(name);
        assert.ok(secret, `${name} is rendered`);
        if (key === '*') continue;
        // Given in values, or left for the operator to generate (which it does only in labelled Secrets).
        const generated = toGenerate(secret)[key] !== undefined && isGenerated(secret);
        assert.ok(decoded(secret)[key] || generated, `${name} holds ${key} or has the operator generate it`);
      }
      assert.deepEqual(gateway.spec.database, { secretName: 'tempora-postgresql', key: 'url' });
      assert.deepEqual(gateway.spec.redis, { secretName: 'tempora-redis', key: 'url' });
      assert.deepEqual(gateway.spec.secrets, { keys: 'tempora-keys' }, 'no provider or payment credentials by default');
      assert.deepEqual(gateway.spec.image, { registry: 'ghcr.io/tempora', version: '0.1.0', pullPolicy: 'IfNotPresent' });
      for (const o of objects.filter((x) => ['GraphWorker', 'AgentPool', 'SimulationBudget'].includes(x.kind))) {
        assert.equal((o as Custom<{ gatewayRef: string }>).spec.gatewayRef, RELEASE, `${o.kind}/${o.metadata.name}`);
      }
      assert.deepEqual(
        objects
          .filter((o) => o.kind === 'GraphWorker')
          .map((o) => (o as Custom<{ role: string }>).spec.role)
          .sort(),
        ['daily', 'expander', 'judge', 'renderer'],
      );
    });

    it('leaves scheduling, pulling and monitor labels to the cluster: no spec.pods or spec.monitoring by default', function () {
      for (const o of objects.filter((x) => ['TemporaGateway', 'GraphWorker', 'AgentPool'].includes(x.kind))) {
        const spec = (o as Custom<Record<string, unknown>>).spec;
        assert.deepEqual([spec.pods, spec.monitoring], [undefined, undefined], `${o.kind}/${o.metadata.name}`);
      }
      for (const [svc, s] of Object.entries(gateway.spec.services)) assert.ok(!('pods' in s), svc);
    });

    it('generates keys and URLs the services accept, each store URL holding its own password', function () {
      // Nothing is drawn at render time: the Secrets name what the operator generates, filled here as it fills them.
      const keys = filledByOperator(only<Secret>(objects, 'Secret', 'tempora-keys'));
      const pg = filledByOperator(only<Secret>(objects, 'Secret', 'tempora-postgresql'));
      const redis = filledByOperator(only<Secret>(objects, 'Secret', 'tempora-redis'));
      const callback = filledByOperator(only<Secret>(objects, 'Secret', 'tempora-callback'));
      const env = { ...keys, DATABASE_URL: pg.url, REDIS_URL: redis.url };
      assert.deepEqual(loadConfig(GraphConfigSchema, env).WRITER_TOKENS, [{ name: 'tempora', token: keys.WRITER_TOKENS!.slice('tempora:'.length) }]);
      assert.deepEqual(loadConfig(GatewayConfigSchema, env).SERVICE_KEY, [keys.SERVICE_KEY]);
      assert.equal(loadConfig(GenerationConfigSchema, { ...env, CALLBACK_SECRET: callback['callback-secret'] }).CALLBACK_SECRET, callback['callback-secret']);
      assert.deepEqual(loadConfig(SimulationConfigSchema, env).SIMULATION_API_KEYS, [
        { name: 'tempora', key: keys.SIMULATION_API_KEYS!.slice('tempora:'.length) },
      ]);
      assert.match(keys.SERVICE_KEY!, /^[A-Za-z0-9]{48}$/);
      assert.match(keys.WRITER_TOKENS!, /^tempora:[A-Za-z0-9]{48}$/);
      assert.notEqual(keys.SERVICE_KEY, keys.ADMIN_KEY);
      const pgUrl = new URL(pg.url!);
      assert.deepEqual(
        [pgUrl.protocol, pgUrl.username, decodeURIComponent(pgUrl.password), pgUrl.host, pgUrl.pathname],
        ['postgres:', 'tempora', pg.password, 'tempora-postgresql.tempora.svc:5432', '/tempora'],
      );
      const redisUrl = new URL(redis.url!);
      assert.deepEqual([redisUrl.protocol, decodeURIComponent(redisUrl.password), redisUrl.host], ['redis:', redis.password, 'tempora-redis.tempora.svc:6379']);
    });

    it('runs PostgreSQL and Redis non-root on a read-only root, with probes, requests and a kept volume', function () {
      for (const [name, port] of [
        ['tempora-postgresql', 5432],
        ['tempora-redis', 6379],
      ] as const) {
        const sts = only<StatefulSet>(objects, 'StatefulSet', name);
        const pod = sts.spec.template.spec;
        const [c] = pod.containers as [PodTemplate['spec']['containers'][number] & Record<string, unknown>];
        assert.equal(sts.spec.serviceName, name);
        assert.deepEqual(pod.securityContext, {
          runAsNonRoot: true,
          runAsUser: 999,
          runAsGroup: 999,
          fsGroup: 999,
          seccompProfile: { type: 'RuntimeDefault' },
        });
        assert.deepEqual(c.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
        assert.ok(c.readinessProbe && c.livenessProbe, `${name} probes`);
        assert.ok((c.resources as { requests?: unknown }).requests, `${name} requests`);
        assert.deepEqual(
          (c.ports as { containerPort: number }[]).map((p) => p.containerPort),
          [port],
        );
        assert.equal(sts.spec.persistentVolumeClaimRetentionPolicy?.whenDeleted, 'Retain');
        assert.deepEqual(
          sts.spec.volumeClaimTemplates?.map((v) => v.metadata.name),
          ['data'],
        );
        // The password comes from the Secret whose URL the services read.
        const password = c.env.find((e) => e.valueFrom?.secretKeyRef)!.valueFrom!.secretKeyRef;
        assert.deepEqual(password, { name, key: 'password' });
        assert.equal(only<Secret>(objects, 'Secret', name).metadata.annotations?.['helm.sh/resource-policy'], 'keep');
        // A new chart version alone must not change what a StatefulSet cannot change or restart the server.
        for (const labels of [sts.spec.template as unknown as KubeObject, ...(sts.spec.volumeClaimTemplates ?? [])].map(
          (t) => (t as KubeObject).metadata.labels ?? {},
        )) {
          assert.equal(labels['app.kubernetes.io/version'], undefined);
          assert.equal(labels['helm.sh/chart'], undefined);
        }
      }
    });

    it('leaves the PrometheusRule out while its CRD is not served, and ships every dashboard as a labelled ConfigMap', function () {
      assert.equal(objects.filter((o) => o.kind === 'PrometheusRule').length, 0);
      const maps = objects.filter((o) => o.kind === 'ConfigMap') as (KubeObject & { data: Record<string, string> })[];
      assert.equal(maps.length, readdirSync(DASHBOARDS).length);
      for (const f of readdirSync(DASHBOARDS)) {
        const cm = maps.find((m) => m.data[f] !== undefined);
        assert.ok(cm, `a ConfigMap holds ${f}`);
        assert.equal(cm.data[f], readFileSync(join(DASHBOARDS, f), 'utf8'));
        assert.equal(cm.metadata.labels?.grafana_dashboard, '1');
      }
    });
  });

  describe('rendered with other values', function () {
    it('renders the PrometheusRule from dashboards/prometheus when the Prometheus Operator serves it', function () {
      const rule = only<Custom<{ groups: unknown }>>(render('--api-versions', PROMETHEUS_RULE_API), 'PrometheusRule');
      assert.deepEqual(rule.spec.groups, (parse(readFileSync(RULES, 'utf8')) as { groups: unknown }).groups);
      // Prometheus's own template syntax in the annotations reaches the rule untouched by Helm.
      assert.match(JSON.stringify(rule.spec.groups), /\{\{ \$labels\.job \}\}/);
      // The default runbookBaseUrl is the rule file's own base; another one (with or without its slash) moves every alert's link.
      for (const base of ['https://github.com/acme/tempora/blob/v1.2.3/docs/runbooks', 'https://github.com/acme/tempora/blob/v1.2.3/docs/runbooks/']) {
        const moved = only<Custom<{ groups: { rules: { alert?: string; annotations?: { runbook_url?: string } }[] }[] }>>(
          render('--api-versions', PROMETHEUS_RULE_API, '--set', `monitoring.prometheusRules.runbookBaseUrl=${base}`),
          'PrometheusRule',
        );
        const alerts = moved.spec.groups.flatMap((g) => g.rules).filter((r) => r.alert);
        assert.ok(alerts.length > 0);
        for (const a of alerts) assert.equal(a.annotations?.runbook_url, `https://github.com/acme/tempora/blob/v1.2.3/docs/runbooks/${a.alert}.md`, a.alert);
      }
      assert.equal(
        render('--api-versions', PROMETHEUS_RULE_API, '--set', 'monitoring.prometheusRules.enabled=false').filter((o) => o.kind === 'PrometheusRule').length,
        0,
      );
      assert.equal(render('--set', 'monitoring.dashboards.enabled=false').filter((o) => o.kind === 'ConfigMap').length, 0);
    });

    it('maps every value onto the custom resources (every value set)', function () {
      const objects = render('-f', FULL_VALUES, '--api-versions', PROMETHEUS_RULE_API);
      const gw = only<Custom<GatewaySpec>>(objects, 'TemporaGateway', 'platform');
      assert.deepEqual(gw.spec, {
        image: {
          registry: 'registry.example.com/tempora',
          version: '1.2.3',
          pullPolicy: 'Always',
          digests: {
            gateway: 'sha256:2222222222222222222222222222222222222222222222222222222222222222',
            graph: 'sha256:3333333333333333333333333333333333333333333333333333333333333333',
          },
        },
        logLevel: 'debug',
        corsDomain: 'tempora.example.com',
        trustedProxies: 2,
        trustedProxyAddresses: ['10.42.0.0/16', 'fd00:42::/64'],
        services: {
          gateway: { replicas: 3, maxUnavailable: 2, resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '1Gi' } } },
          generation: { replicas: 2, maxUnavailable: 1, resources: { requests: { cpu: '250m', memory: '384Mi' }, limits: { memory: '1536Mi' } } },
          graph: {
            replicas: 2,
            maxUnavailable: 0,
            resources: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '2Gi' } },
            pods: lookup(full, 'services.graph.pods'),
          },
          simulation: { replicas: 2, maxUnavailable: 1, resources: { requests: { cpu: '200m', memory: '256Mi' }, limits: { memory: '1Gi' } } },
          conductor: { replicas: 2, maxUnavailable: 1, resources: { requests: { cpu: '200m', memory: '256Mi' }, limits: { memory: '1Gi' } } },
          billing: { replicas: 0, maxUnavailable: 0, resources: { requests: { cpu: '20m', memory: '64Mi' }, limits: { memory: '256Mi' } } },
        },
        ingress: {
          host: 'api.tempora.example.com',
          className: 'nginx',
          tlsSecretName: 'tempora-tls',
          annotations: { 'cert-manager.io/cluster-issuer': 'letsencrypt' },
        },
        rateLimits: {
          tiers: [
            { name: 'free', requestsPerMinute: 20, dailyLimit: 200 },
            { name: 'enterprise', requestsPerMinute: 600 },
          ],
        },
        tracing: { endpoint: 'http://otel-collector.observability.svc:4318', protocol: 'http/json', samplingRatio: 0.25 },
        // Scheduling, pulling and pod metadata as given; monitor labels on the TemporaGateway, which lends them to the workers and the pool.
        pods: lookup(full, 'pods'),
        monitoring: { labels: { release: 'kube-prometheus-stack' } },
        secrets: { keys: 'platform-keys', providers: 'platform-providers', billing: 'platform-billing' },
        database: { secretName: 'platform-postgresql', key: 'url' },
        redis: { secretName: 'platform-redis', key: 'url' },
        generation: {
          callbackSecret: { secretName: 'platform-callback', key: 'hmac' },
          models: lookup(full, 'generation.models'),
          publicUrl: 'https://media.tempora.example.com',
        },
      });
      const keys = decoded(only<Secret>(objects, 'Secret', 'platform-keys'));
      assert.deepEqual(keys, {
        SERVICE_KEY: 'service-key-0123456789abcdef',
        ADMIN_KEY: 'admin-key-0123456789abcdef',
        WRITER_TOKENS: 'curator:writer-token-0123456789abcdef,importer:writer-token-fedcba9876543210',
        SIMULATION_API_KEYS: 'research:simulation-key-0123456789abcdef',
      });
      assert.deepEqual(decoded(only<Secret>(objects, 'Secret', 'platform-callback')), { hmac: 'callback-secret-0123456789abcdef0123456789abcdef' });
      assert.deepEqual(decoded(only<Secret>(objects, 'Secret', 'platform-providers')), {
        GEMINI_API_KEY: 'gemini-test-key',
        OPENROUTER_API_KEY: 'openrouter-test-key',
      });
      assert.deepEqual(decoded(only<Secret>(objects, 'Secret', 'platform-billing')), {
        STRIPE_SECRET_KEY: 'sk_test_0123456789',
        STRIPE_WEBHOOK_SECRET: 'whsec_0123456789',
      });
      assert.equal(
        decoded(only<Secret>(objects, 'Secret', 'platform-postgresql')).url,
        'postgres://tempora:pg-password-0123456789@platform-postgresql.tempora.svc:5432/tempora',
      );

      const workers = Object.fromEntries(
        objects.filter((o) => o.kind === 'GraphWorker').map((o) => [o.metadata.name, (o as Custom<Record<string, unknown>>).spec]),
      );
      assert.deepEqual(Object.keys(workers).sort(), ['platform-daily', 'platform-expander', 'platform-renderer'], 'judge is disabled');
      assert.deepEqual(workers['platform-daily'], {
        role: 'daily',
        gatewayRef: 'platform',
        image: gw.spec.image,
        dailyBudgetUsd: 1,
        schedule: '30 2 * * *',
        timeZone: 'Europe/Paris',
        concurrencyPolicy: 'Replace',
        successfulJobsHistoryLimit: 5,
        failedJobsHistoryLimit: 2,
        resources: lookup(full, 'graphWorkers.daily.resources'),
        pods: lookup(full, 'pods'),
      });
      assert.deepEqual(workers['platform-renderer'], {
        role: 'renderer',
        gatewayRef: 'platform',
        image: gw.spec.image,
        replicas: 3,
        concurrency: 4,
        dailyBudgetUsd: 25,
        resources: lookup(full, 'graphWorkers.renderer.resources'),
        pods: lookup(full, 'pods'),
      });
      const pool = only<Custom<Record<string, unknown>>>(objects, 'AgentPool', 'platform-agents');
      assert.deepEqual(pool.spec, {
        gatewayRef: 'platform',
        image: gw.spec.image,
        minReplicas: 2,
        maxReplicas: 8,
        cpuTargetPercent: 60,
        concurrency: 16,
        queueDepthTarget: 10,
        autoscaling: lookup(full, 'agentPool.autoscaling'),
        models: lookup(full, 'generation.models'),
        resources: lookup(full, 'agentPool.resources'),
        pods: lookup(full, 'pods'),
      });
      const budgets = objects.filter((o) => o.kind === 'SimulationBudget').map((o) => [o.metadata.name, (o as Custom<unknown>).spec]);
      assert.deepEqual(budgets, [
        ['platform-global', { gatewayRef: 'platform', scope: 'global', period: 'monthly', limitUsd: 500, perRunMaxUsd: 5, alertThresholds: [0.25, 0.9] }],
        ['platform-acme', { gatewayRef: 'platform', scope: 'account:acme', period: 'daily', limitUsd: 20 }],
      ]);

      const pg = only<StatefulSet>(objects, 'StatefulSet', 'platform-postgresql');
      assert.equal(pg.spec.template.spec.containers[0]!.image, 'registry.example.com/mirror/postgres:17.6-bookworm');
      assert.equal(pg.spec.persistentVolumeClaimRetentionPolicy?.whenDeleted, 'Delete');
      assert.deepEqual(
        [pg.spec.volumeClaimTemplates![0]!.spec.storageClassName, pg.spec.volumeClaimTemplates![0]!.spec.resources.requests.storage],
        ['fast-ssd', '20Gi'],
      );
      assert.equal(
        only<Secret>(objects, 'Secret', 'platform-postgresql').metadata.annotations?.['helm.sh/resource-policy'],
        undefined,
        'not kept when its volume is not',
      );
      const redis = only<StatefulSet>(objects, 'StatefulSet', 'platform-redis');
      assert.equal(redis.spec.volumeClaimTemplates, undefined, 'no volume without persistence');
      assert.ok(
        redis.spec.template.spec.volumes!.some((v) => v.name === 'data'),
        'an emptyDir instead',
      );

      const rule = only(objects, 'PrometheusRule');
      assert.equal(rule.metadata.labels?.release, 'kube-prometheus-stack');
      for (const cm of objects.filter((o) => o.kind === 'ConfigMap')) {
        assert.equal(cm.metadata.namespace, 'monitoring');
        assert.deepEqual([cm.metadata.labels?.team, cm.metadata.annotations?.grafana_folder], ['platform', 'Tempora']);
      }
    });

    it('fences the platform pods with NetworkPolicies: deny, then the platform, DNS, providers, the entry point, metrics and the operator', function () {
      type Policy = { metadata: { name: string }; spec: Record<string, any> };
      const policies = (...values: string[]) =>
        Object.fromEntries(
          render(...values)
            .filter((o) => o.kind === 'NetworkPolicy')
            .map((o) => [o.metadata.name, (o as unknown as Policy).spec]),
        );
      const platform = { matchLabels: { 'app.kubernetes.io/part-of': 'tempora' } };
      const defaults = policies();
      assert.deepEqual(
        Object.keys(defaults).sort(),
        ['default-deny', 'gateway', 'metrics', 'operator', 'within'].map((p) => `${RELEASE}-${p}`),
      );
      assert.deepEqual(defaults[`${RELEASE}-default-deny`], { podSelector: platform, policyTypes: ['Ingress', 'Egress'] });
      const dns = {
        ports: [
          { port: 53, protocol: 'UDP' },
          { port: 53, protocol: 'TCP' },
        ],
      };
      const https = { ports: [{ port: 443, protocol: 'TCP' }] };
      assert.deepEqual(defaults[`${RELEASE}-within`]!.egress, [{ to: [{ podSelector: platform }] }, dns, https]);
      assert.deepEqual(defaults[`${RELEASE}-within`]!.ingress, [{ from: [{ podSelector: platform }] }]);
      assert.deepEqual(defaults[`${RELEASE}-gateway`]!.ingress, [{ ports: [{ port: 'http', protocol: 'TCP' }] }], 'anyone may reach the entry point');
      assert.deepEqual(defaults[`${RELEASE}-metrics`]!.ingress[0].from, [{ namespaceSelector: {} }]);
      assert.deepEqual(
        defaults[`${RELEASE}-metrics`]!.ingress[0].ports,
        [
          { port: 'metrics', protocol: 'TCP' },
          { port: WORKER_PORT, protocol: 'TCP' },
        ],
        "the workers' port is the one the operator gives them",
      );
      assert.deepEqual(defaults[`${RELEASE}-operator`]!.ingress[0].from, [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'tempora-system' } },
          podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tempora-operator' } },
        },
      ]);
      // External stores are reached outside the platform's pods.
      const production = policies('-f', join(EXAMPLES, 'production.yaml'));
      assert.deepEqual(production[`${RELEASE}-within`]!.egress.slice(-2), [
        { ports: [{ port: 5432, protocol: 'TCP' }] },
        { ports: [{ port: 6379, protocol: 'TCP' }] },
      ]);
      const everyValue = policies('-f', FULL_VALUES);
      assert.deepEqual(everyValue['platform-gateway']!.ingress[0].from, [
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
      ]);
      assert.deepEqual(everyValue['platform-metrics']!.ingress[0].from, [
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
      ]);
      assert.equal(everyValue['platform-operator']!.ingress[0].from[0].namespaceSelector.matchLabels['kubernetes.io/metadata.name'], 'platform-operators');
      assert.deepEqual(everyValue['platform-within']!.egress[2], { to: [{ ipBlock: { cidr: '203.0.113.0/24' } }], ports: [{ port: 443, protocol: 'TCP' }] });
      assert.deepEqual(policies('--set', 'networkPolicy.enabled=false'), {});
    });

    it('for kind: the images the chart names (a released chart, by digest), the gateway at tempora.localhost, state in the chart own stores', function () {
      const objects = render('-f', join(EXAMPLES, 'kind.yaml'));
      const gw = only<Custom<GatewaySpec>>(objects, 'TemporaGateway');
      assert.deepEqual(gw.spec.image, { registry: 'ghcr.io/tempora', version: '0.1.0', pullPolicy: 'IfNotPresent' });
      assert.deepEqual(gw.spec.ingress, { host: 'tempora.localhost', className: 'traefik' });
      assert.equal(objects.filter((o) => o.kind === 'StatefulSet').length, 2);
    });

    it('for production: your own PostgreSQL, Redis, provider and payment Secrets, no StatefulSets, nothing generated for them', function () {
      const objects = render('-f', join(EXAMPLES, 'production.yaml'));
      const gw = only<Custom<GatewaySpec>>(objects, 'TemporaGateway');
      assert.deepEqual(
        [gw.spec.database, gw.spec.redis, gw.spec.secrets],
        [
          { secretName: 'tempora-database', key: 'url' },
          { secretName: 'tempora-redis', key: 'url' },
          { keys: 'tempora-keys', providers: 'tempora-providers', billing: 'tempora-billing' },
        ],
      );
      assert.deepEqual(
        objects.filter((o) => ['StatefulSet', 'Service'].includes(o.kind)),
        [],
      );
      assert.deepEqual(
        objects
          .filter((o) => o.kind === 'Secret')
          .map((o) => o.metadata.name)
          .sort(),
        ['tempora-callback', 'tempora-keys'],
      );
    });

    it('names existing Secrets instead of generating them', function () {
      const objects = render(
        ...[
          'secrets.keys.existingSecret=my-keys',
          'secrets.callback.existingSecret=my-callback',
          'secrets.callback.key=hmac',
          'secrets.providers.existingSecret=my-providers',
          'secrets.billing.existingSecret=my-billing',
        ].flatMap((s) => ['--set', s]),
        // A named Secret wins over values given for it.
        '--set',
        'secrets.billing.values.STRIPE_SECRET_KEY=ignored',
      );
      const gw = only<Custom<GatewaySpec>>(objects, 'TemporaGateway');
      assert.deepEqual(
        [gw.spec.secrets, gw.spec.generation.callbackSecret],
        [
          { keys: 'my-keys', providers: 'my-providers', billing: 'my-billing' },
          { secretName: 'my-callback', key: 'hmac' },
        ],
      );
      assert.deepEqual(
        objects
          .filter((o) => o.kind === 'Secret')
          .map((o) => o.metadata.name)
          .sort(),
        ['tempora-postgresql', 'tempora-redis'],
      );
    });

    it('without any database or Redis: embedded state, one replica per service, no workers, no pool', function () {
      const objects = render(
        ...['postgresql.enabled=false', 'redis.enabled=false', 'agentPool.enabled=false'].flatMap((s) => ['--set', s]),
        ...['renderer', 'expander', 'judge', 'daily'].flatMap((r) => ['--set', `graphWorkers.${r}.enabled=false`]),
      );
      const gw = only<Custom<GatewaySpec>>(objects, 'TemporaGateway');
      assert.equal(gw.spec.database, undefined);
      assert.equal(gw.spec.redis, undefined);
      assert.deepEqual(
        objects.filter((o) => ['StatefulSet', 'GraphWorker', 'AgentPool'].includes(o.kind)),
        [],
      );
    });
  });

  describe('refusals', function () {
    const schemaRefusals: [string, string[], RegExp][] = [
      ['a misspelt top-level value', ['--set', 'ingres.enabled=true'], /additional properties 'ingres' not allowed|ingres/],
      ['a misspelt nested value', ['--set', 'services.gateway.replica=2'], /\/services\/gateway/],
      ['a service the TemporaGateway does not know', ['--set', 'services.notary.replicas=1'], /\/services/],
      ['replicas that are not a number', ['--set', 'services.graph.replicas=two'], /\/services\/graph\/replicas/],
      ['an unknown pull policy', ['--set', 'image.pullPolicy=Sometimes'], /\/image\/pullPolicy/],
      ['a digest for no image of ours', ['--set-string', `image.digests.postgres=sha256:${'0'.repeat(64)}`], /\/image\/digests/],
      ['a digest that is no sha256', ['--set-string', 'image.digests.gateway=latest'], /\/image\/digests/],
      ['an image version with a space', ['--set-string', 'image.version=1.0 beta'], /\/image\/version/],
      ['a log level the CRD does not allow', ['--set', 'logLevel=silent'], /\/logLevel/],
      ['a CORS domain that is no domain', ['--set', 'corsDomain=localhost'], /\/corsDomain/],
      ['an ingress host with a scheme', ['--set', 'ingress.host=https://tempora.example.com'], /\/ingress\/host/],
      [
        'an unknown rate-limit tier',
        ['--set', 'rateLimits.tiers[0].name=gold', '--set', 'rateLimits.tiers[0].requestsPerMinute=5'],
        /\/rateLimits\/tiers\/0\/name/,
      ],
      ['a tracing endpoint that is no URL', ['--set', 'tracing.endpoint=collector:4318'], /\/tracing\/endpoint/],
      ['a sampling ratio above 1', ['--set', 'tracing.samplingRatio=2'], /\/tracing\/samplingRatio/],
      ['a short service key', ['--set', 'secrets.keys.serviceKey=short'], /\/secrets\/keys\/serviceKey/],
      ['writer tokens without names', ['--set', 'secrets.keys.writerTokens=justatokenthatislongenough'], /\/secrets\/keys\/writerTokens/],
      ['a provider variable that is no variable name', ['--set', 'secrets.providers.values.gemini-key=x'], /invalid propertyName 'gemini-key'/],
      ['a password that would break the URL', ['--set', 'postgresql.password=p@ss/word:0123456789'], /\/postgresql\/password/],
      ['a volume size that is no quantity', ['--set', 'postgresql.persistence.size=lots'], /\/postgresql\/persistence\/size/],
      ['a memory limit that is no quantity', ['--set', 'redis.resources.limits.memory=lots'], /\/redis\/resources\/limits\/memory/],
      // The CRDs take any name under resources; without the schema's names the operator's Deployment would be refused later.
      [
        'a misspelt resource name',
        ['--set', 'services.graph.resources.requests.memroy=1Gi'],
        /at '\/services\/graph\/resources\/requests': additional properties 'memroy' not allowed/,
      ],
      [
        'a resource name that is no container resource',
        ['--set', 'agentPool.resources.limits.storage=1Gi'],
        /at '\/agentPool\/resources\/limits': additional properties 'storage' not allowed/,
      ],
      [
        'a kubernetes.io/ resource name, which is no extended resource',
        ['--set', 'services.graph.resources.limits.kubernetes\\.io/gpu=1'],
        /at '\/services\/graph\/resources\/limits\/kubernetes\.io~1gpu': false schema/,
      ],
      [
        'an extended resource without its domain',
        ['--set', 'graphWorkers.renderer.resources.limits.gpu=1'],
        /at '\/graphWorkers\/renderer\/resources\/limits': additional properties 'gpu' not allowed/,
      ],
      ['an unknown worker role', ['--set', 'graphWorkers.painter.enabled=true'], /\/graphWorkers/],
      ['a schedule on a Deployment worker', ['--set', 'graphWorkers.renderer.schedule=0 4 * * *'], /\/graphWorkers\/renderer/],
      ['worker concurrency 0', ['--set', 'graphWorkers.judge.concurrency=0'], /\/graphWorkers\/judge\/concurrency/],
      [
        'a budget scope the simulation service does not know',
        ['--set', 'simulationBudgets[0].name=x', '--set', 'simulationBudgets[0].scope=user:1', '--set', 'simulationBudgets[0].limitUsd=1'],
        /\/simulationBudgets\/0\/scope/,
      ],
      [
        'a negative budget',
        ['--set', 'simulationBudgets[0].name=x', '--set', 'simulationBudgets[0].scope=global', '--set', 'simulationBudgets[0].limitUsd=-1'],
        /\/simulationBudgets\/0\/limitUsd/,
      ],
      [
        'an alert threshold of 0',
        [
          '--set',
          'simulationBudgets[0].name=x',
          '--set',
          'simulationBudgets[0].scope=global',
          '--set',
          'simulationBudgets[0].limitUsd=1',
          '--set',
          'simulationBudgets[0].alertThresholds[0]=0',
        ],
        /\/simulationBudgets\/0\/alertThresholds\/0/,
      ],
      ['trusted proxies as a string', ['--set-string', 'trustedProxies=one'], /\/trustedProxies/],
      [
        'dashboard labels that are not strings',
        ['--set', 'monitoring.dashboards.labels.grafana_dashboard=1'],
        /\/monitoring\/dashboards\/labels\/grafana_dashboard/,
      ],
      // Pod and monitor labels never take over the operator's, which select its pods and children.
      ["a pod label that is the operator's", ['--set', 'pods.labels.app\\.kubernetes\\.io/name=other'], /invalid propertyName 'app.kubernetes.io\/name'/],
      [
        "a service's pod label under tempora.dev/",
        ['--set', 'services.graph.pods.labels.tempora\\.dev/gateway=other'],
        /invalid propertyName 'tempora.dev\/gateway'/,
      ],
      [
        "a monitor label that is the operator's",
        ['--set', 'monitoring.monitors.labels.app\\.kubernetes\\.io/managed-by=me'],
        /invalid propertyName 'app.kubernetes.io\/managed-by'/,
      ],
      ['a pod label key that is no qualified name', ['--set', 'pods.labels.not a key=x'], /invalid propertyName 'not a key'/],
      ['a pod annotation under tempora.dev/', ['--set', 'pods.annotations.tempora\\.dev/config-hash=x'], /invalid propertyName 'tempora.dev\/config-hash'/],
      [
        'a toleration operator Kubernetes does not know',
        ['--set', 'pods.tolerations[0].key=k', '--set', 'pods.tolerations[0].operator=Sometimes'],
        /\/pods\/tolerations\/0\/operator/,
      ],
      [
        'a spread constraint without whenUnsatisfiable',
        ['--set', 'pods.topologySpreadConstraints[0].maxSkew=1', '--set', 'pods.topologySpreadConstraints[0].topologyKey=zone'],
        /\/pods\/topologySpreadConstraints\/0/,
      ],
      ['a pull secret that is no name', ['--set', 'pods.imagePullSecrets[0].name=Not_A_Name'], /\/pods\/imagePullSecrets\/0\/name/],
      ['a misspelt affinity', ['--set', 'pods.affinity.nodeAfinity.x=1'], /at '\/pods\/affinity': additional properties 'nodeAfinity' not allowed/],
    ];
    for (const [what, args, path] of schemaRefusals) {
      it(`values.schema.json refuses ${what}`, function () {
        const r = helm.run('template', RELEASE, CHART, '--namespace', NAMESPACE, ...args);
        assert.notEqual(r.status, 0, `helm template ${args.join(' ')} should fail`);
        assert.match(r.stderr, /values don't meet the specifications of the schema/);
        assert.match(r.stderr, path);
      });
    }

    const templateRefusals: [string, string[], RegExp][] = [
      [
        'two replicas without shared state',
        [
          '--set',
          'postgresql.enabled=false',
          '--set',
          'services.gateway.replicas=2',
          '--set',
          'agentPool.enabled=false',
          ...['renderer', 'expander', 'judge', 'daily'].flatMap((r) => ['--set', `graphWorkers.${r}.enabled=false`]),
        ],
        /services\.gateway\.replicas=2 needs a database and a Redis/,
      ],
      ['graph workers without a database', ['--set', 'postgresql.enabled=false'], /graphWorkers\.\w+ needs a database/],
      ['an agent pool without Redis', ['--set', 'redis.enabled=false'], /agentPool needs a Redis/],
      [
        'the chart database and an external one',
        ['--set', 'externalDatabase.existingSecret=db'],
        /postgresql\.enabled and externalDatabase\.existingSecret both name a database/,
      ],
      [
        'the chart Redis and an external one',
        ['--set', 'externalRedis.existingSecret=r'],
        /redis\.enabled and externalRedis\.existingSecret both name a Redis/,
      ],
      ['an Ingress without a host', ['--set', 'ingress.enabled=true', '--set', 'ingress.host='], /ingress\.enabled needs ingress\.host/],
      [
        'a pool whose maximum is below its minimum',
        ['--set', 'agentPool.minReplicas=4', '--set', 'agentPool.maxReplicas=2'],
        /agentPool\.maxReplicas \(2\) must be at least agentPool\.minReplicas \(4\)/,
      ],
      [
        'a default model preset that is not among the presets',
        [
          '--set',
          'generation.models.presets[0].name=balanced',
          '--set',
          'generation.models.presets[0].provider=gemini',
          '--set',
          'generation.models.presets[0].model=gemini-2.5-flash',
          '--set',
          'generation.models.policy.default=hd',
        ],
        /generation\.models\.policy\.default "hd" must name one of generation\.models\.presets \(balanced\)/,
      ],
      [
        'two budgets of one name',
        [
          '--set',
          'simulationBudgets[1].name=global',
          '--set',
          'simulationBudgets[1].scope=global',
          '--set',
          'simulationBudgets[1].limitUsd=1',
          '--set',
          'simulationBudgets[0].name=global',
          '--set',
          'simulationBudgets[0].scope=global',
          '--set',
          'simulationBudgets[0].limitUsd=1',
        ],
        /the name "global" appears twice/,
      ],
      [
        'a per-run maximum above the limit',
        [
          '--set',
          'simulationBudgets[0].name=global',
          '--set',
          'simulationBudgets[0].scope=global',
          '--set',
          'simulationBudgets[0].limitUsd=10',
          '--set',
          'simulationBudgets[0].perRunMaxUsd=50',
        ],
        /perRunMaxUsd \(50\) cannot exceed limitUsd \(10\)/,
      ],
      ['a name too long for the objects derived from it', ['--set', `fullnameOverride=${'t'.repeat(40)}x`], /fullnameOverride/],
    ];
    for (const [what, args, message] of templateRefusals) {
      it(`the templates refuse ${what}`, function () {
        const r = helm.run('template', RELEASE, CHART, '--namespace', NAMESPACE, ...args);
        assert.notEqual(r.status, 0, `helm template ${args.join(' ')} should fail`);
        assert.match(r.stderr, message);
      });
    }

    it('refuses a release name too long for the objects derived from it', function () {
      const r = helm.run('template', 'a-release-name-of-more-than-forty-characters', CHART, '--namespace', NAMESPACE);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /has more than 40 characters; set a shorter fullnameOverride/);
    });

    it('lint reports a refusal too', function () {
      const r = helm.run('lint', CHART, '--strict', '--set', 'logLevel=verbose');
      assert.notEqual(r.status, 0);
      assert.match(r.stdout + r.stderr, /\/logLevel/);
    });

    it('lint and template refuse a misspelt resource name with the schema message, and take the names Kubernetes knows', function () {
      const misspelt = ['--set', 'services.graph.resources.requests.memroy=1Gi'];
      for (const command of [
        ['lint', CHART, '--strict'],
        ['template', RELEASE, CHART],
      ]) {
        const r = helm.run(...command, '--namespace', NAMESPACE, ...misspelt);
        assert.notEqual(r.status, 0, `helm ${command[0]} should fail`);
        assert.match(r.stdout + r.stderr, /values don't meet the specifications of the schema/);
        assert.match(r.stdout + r.stderr, /at '\/services\/graph\/resources\/requests': additional properties 'memroy' not allowed/);
      }
      // Standard, huge pages and extended names reach the TemporaGateway as given (an escaped dot stays in the key).
      const gw = only<Custom<GatewaySpec>>(
        render(
          ...[
            'requests.ephemeral-storage=1Gi',
            'requests.hugepages-2Mi=2Mi',
            'limits.hugepages-2Mi=2Mi',
            'requests.nvidia\\.com/gpu=1',
            'limits.nvidia\\.com/gpu=1',
          ].flatMap((v) => ['--set', `services.graph.resources.${v}`]),
        ),
        'TemporaGateway',
      );
      assert.deepEqual(gw.spec.services.graph!.resources, {
        requests: { cpu: '100m', memory: '256Mi', 'ephemeral-storage': '1Gi', 'hugepages-2Mi': '2Mi', 'nvidia.com/gpu': 1 },
        limits: { memory: '1Gi', 'hugepages-2Mi': '2Mi', 'nvidia.com/gpu': 1 },
      });
    });
  });

  describe('on a real kube-apiserver', function () {
    let cp: ControlPlane | undefined;
    let admin: KubeClient;
    const plurals = new Map<string, string>();

    /** The object's URL path, its resource's plural read from the API server's discovery. */
    async function pathOf(o: KubeObject): Promise<string> {
      const groupVersion = o.apiVersion;
      if (!plurals.has(`${groupVersion}/${o.kind}`)) {
        const base = groupVersion.includes('/') ? `/apis/${groupVersion}` : `/api/${groupVersion}`;
        const list = await admin.request<{ resources: { name: string; kind: string; namespaced: boolean }[] }>('GET', base);
        for (const r of list.resources) if (!r.name.includes('/')) plurals.set(`${groupVersion}/${r.kind}`, `${base}|${r.name}|${r.namespaced}`);
      }
      const entry = plurals.get(`${groupVersion}/${o.kind}`);
      assert.ok(entry, `the API server serves no ${o.kind} in ${groupVersion}`);
      const [base, plural, namespaced] = entry.split('|');
      return `${base}${namespaced === 'true' ? `/namespaces/${o.metadata.namespace ?? NAMESPACE}` : ''}/${plural}/${o.metadata.name}`;
    }

    async function dryRun(o: KubeObject): Promise<KubeObject> {
      return admin.request<KubeObject>('PATCH', await pathOf(o), {
        body: o,
        contentType: 'application/apply-patch+yaml',
        query: { fieldManager: 'helm', force: 'true', dryRun: 'All' },
      });
    }

    async function get(o: KubeObject): Promise<KubeObject | undefined> {
      return admin.request<KubeObject>('GET', await pathOf(o)).catch((err: unknown) => {
        if (/404|NotFound/.test(String(err))) return undefined;
        throw err;
      });
    }

    async function crdsEstablished(names: string[]): Promise<void> {
      for (const name of names) {
        await waitFor(
          `CRD ${name} established`,
          async () => {
            const crd = await admin.request<KubeObject>('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
            return ((crd.status?.conditions ?? []) as { type: string; status: string }[]).some((c) => c.type === 'Established' && c.status === 'True');
          },
          { timeoutMs: 30_000 },
        );
      }
    }

    before(async function () {
      this.timeout(30 * 60_000); // builds kube-apiserver on a clean machine (about 6 minutes)
      cp = await ControlPlane.started();
      admin = clientFor(cp.kubeconfigPath);
      helm.env = { KUBECONFIG: cp.kubeconfigPath };
      for (const name of [NAMESPACE, 'monitoring', 'dry-run']) {
        await applyAs(admin, {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name, labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } },
        });
      }
    });

    after(async function () {
      this.timeout(60_000);
      helm.env = {};
      await cp?.stop();
    });

    it('refuses to install before the operator and its CRDs, and says what is missing', function () {
      const r = helm.run('install', RELEASE, CHART, '--namespace', NAMESPACE);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /no matches for kind "TemporaGateway" in version "tempora\.dev\/v1alpha1"/);
      assert.match(helm.run('list', '--namespace', NAMESPACE, '--all', '--short').stdout, /^\s*$/, 'no release left behind');
    });

    describe('with the CRDs of crds/ and the Prometheus Operator', function () {
      before(async function () {
        this.timeout(10 * 60_000); // downloads the Prometheus Operator module on a clean machine
        const promCrds = spawnSync('bash', [join(HERE, 'prometheus-operator-crds.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
        if (promCrds.status !== 0) throw new Error('fetching the Prometheus Operator CRDs failed');
        const promDir = promCrds.stdout.trim();
        const crds = [
          ...readdirSync(CRD_DIR)
            .filter((f) => f.endsWith('.yaml'))
            .flatMap((f) => manifests(join(CRD_DIR, f))),
          // The Prometheus Operator's real schemas, so that the rules and the operator's monitors are validated.
          ...['prometheusrules', 'servicemonitors', 'podmonitors'].flatMap((p) => manifests(join(promDir, `monitoring.coreos.com_${p}.yaml`))),
        ];
        for (const crd of crds) await applyAs(admin, crd, 'test-setup');
        await crdsEstablished(crds.map((c) => c.metadata.name));
      });

      it('accepts every object of every rendering in a server-side dry run: defaults, each example, every value set', async function () {
        this.timeout(120_000);
        const renderings: [string, string[]][] = [
          ['defaults', []],
          ...examples.map((f): [string, string[]] => [f, ['-f', join(EXAMPLES, f)]]),
          ['every value set', ['-f', FULL_VALUES]],
        ];
        for (const [what, args] of renderings) {
          const objects = helm.template(RELEASE, CHART, 'dry-run', '--api-versions', PROMETHEUS_RULE_API, ...args);
          for (const o of objects) {
            await dryRun(o).catch((err: unknown) => assert.fail(`${what}: ${o.kind}/${o.metadata.name} refused: ${String(err)}`));
          }
        }
      });

      it('the dry run is not vacuous: the CRDs refuse what the operator could not run', async function () {
        const [gw] = helm
          .template(
            RELEASE,
            CHART,
            'dry-run',
            '--set',
            'postgresql.enabled=false',
            '--set',
            'agentPool.enabled=false',
            ...['renderer', 'expander', 'judge', 'daily'].flatMap((r) => ['--set', `graphWorkers.${r}.enabled=false`]),
          )
          .filter((o) => o.kind === 'TemporaGateway') as Custom<GatewaySpec>[];
        gw!.spec.services.gateway!.replicas = 3;
        await assert.rejects(dryRun(gw!), /more than one replica needs spec\.database and spec\.redis/);
        const rule = only<Custom<{ groups: { rules: Record<string, unknown>[] }[] }>>(
          helm.template(RELEASE, CHART, 'dry-run', '--api-versions', PROMETHEUS_RULE_API),
          'PrometheusRule',
        );
        rule.spec.groups[0]!.rules[0]!.for = 'two minutes';
        await assert.rejects(dryRun(rule), /spec\.groups\[0\]\.rules\[0\]\.for/);
      });

      it('the schema takes exactly the container resource names the API server takes', async function () {
        this.timeout(120_000);
        const domain244 = ['a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63), 'd'.repeat(52)].join('.');
        // [name, a quantity the API server takes for it (huge pages in multiples of their size, extended resources whole)]
        const names: [string, string][] = [
          ['cpu', '1'],
          ['memory', '64Mi'],
          ['ephemeral-storage', '1Gi'],
          ['hugepages-2Mi', '2Mi'],
          ['hugepages-1Gi', '1Gi'],
          ['nvidia.com/gpu', '1'],
          ['example.com/foo_bar.Baz-1', '1'],
          ['vendor/device', '1'],
          [`${domain244}/x`, '1'],
          [`example.com/${'n'.repeat(63)}`, '1'],
          ['memroy', '1Gi'],
          ['storage', '1Gi'],
          ['pods', '1'],
          ['gpu', '1'],
          ['hugepages-', '1'],
          ['hugepages-big', '1'],
          ['Example.com/gpu', '1'],
          ['example.com/', '1'],
          ['example.com/-gpu', '1'],
          ['example..com/gpu', '1'],
          ['requests.example.com/gpu', '1'],
          [`${domain244}d/x`, '1'],
          [`example.com/${'n'.repeat(64)}`, '1'],
        ];
        const dir = mkdtempSync(join(tmpdir(), 'tempora-resource-names-'));
        try {
          for (const [name, quantity] of names) {
            // memory beside every name: huge pages need it; requests equal to limits, as extended resources and huge pages need.
            const resources = { requests: { memory: '64Mi', [name]: quantity }, limits: { memory: '64Mi', [name]: quantity } };
            const file = join(dir, 'values.json');
            writeFileSync(file, JSON.stringify({ services: { graph: { resources } } }));
            const schemaTakes = helm.run('template', RELEASE, CHART, '--namespace', NAMESPACE, '-f', file).status === 0;
            const deployment = {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              metadata: { name: 'resource-names', namespace: 'dry-run' },
              spec: {
                selector: { matchLabels: { app: 'resource-names' } },
                template: { metadata: { labels: { app: 'resource-names' } }, spec: { containers: [{ name: 'c', image: 'example.com/c:1', resources }] } },
              },
            } as KubeObject;
            const apiTakes = await dryRun(deployment).then(
              () => true,
              (err: unknown) => {
                assert.match(String(err), /resources\.(requests|limits)/, `${name}: refused for its resources, not for something else`);
                return false;
              },
            );
            assert.equal(
              schemaTakes,
              apiTakes,
              `${name}: the schema ${schemaTakes ? 'takes' : 'refuses'} it, the API server ${apiTakes ? 'takes' : 'refuses'} it`,
            );
          }
          // Taken by the API server's validation, yet no resource: kubernetes.io/ names are Kubernetes' own, none is a container's.
          writeFileSync(join(dir, 'values.json'), JSON.stringify({ services: { graph: { resources: { limits: { 'kubernetes.io/gpu': 1 } } } } }));
          assert.match(
            helm.run('template', RELEASE, CHART, '--namespace', NAMESPACE, '-f', join(dir, 'values.json')).stderr,
            /at '\/services\/graph\/resources\/limits\/kubernetes\.io~1gpu': false schema/,
          );
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });

      describe('helm install, upgrade, rollback and uninstall', function () {
        const kept = ['tempora-postgresql', 'tempora-redis'];
        let secretsAtInstall: Map<string, Record<string, string>>;
        let op: Operator | undefined;

        // The operator fills the Secrets the chart leaves to it; without it they would hold nothing to compare.
        before(async function () {
          op = newOperator(cp!.kubeconfigPath, 'platform-chart', { leaderElection: false });
          await op.start();
        });

        after(async function () {
          this.timeout(60_000);
          await op?.stop();
        });

        /** The chart's Secrets (not the operator's children, such as the signing key), once the operator has filled every key they name. */
        async function secretsNow(): Promise<Map<string, Record<string, string>>> {
          const query = { labelSelector: `app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/managed-by=Helm` };
          const secrets = await waitFor(
            'the operator to fill the Secrets',
            async () => {
              const list = await admin.request<{ items: Secret[] }>('GET', `/api/v1/namespaces/${NAMESPACE}/secrets`, { query });
              return list.items.every((s) => planGeneration(s).fill.length === 0) ? list.items : undefined;
            },
            { timeoutMs: 30_000 },
          );
          return new Map(secrets.map((s) => [s.metadata.name, decoded(s)]));
        }

        async function gatewaySpec(): Promise<GatewaySpec> {
          return (
            (await admin.request<KubeObject>('GET', `/apis/tempora.dev/v1alpha1/namespaces/${NAMESPACE}/temporagateways/${RELEASE}`)) as Custom<GatewaySpec>
          ).spec;
        }

        /** Our objects in the namespace, by kind/name: everything labelled with the release, and the pods. */
        async function ours(): Promise<string[]> {
          const found: string[] = [];
          const query = { labelSelector: `app.kubernetes.io/instance=${RELEASE}` };
          const paths: [string, string][] = [
            ['Secret', `/api/v1/namespaces/${NAMESPACE}/secrets`],
            ['ConfigMap', `/api/v1/namespaces/${NAMESPACE}/configmaps`],
            ['Service', `/api/v1/namespaces/${NAMESPACE}/services`],
            ['PersistentVolumeClaim', `/api/v1/namespaces/${NAMESPACE}/persistentvolumeclaims`],
            ['Pod', `/api/v1/namespaces/${NAMESPACE}/pods`],
            ['StatefulSet', `/apis/apps/v1/namespaces/${NAMESPACE}/statefulsets`],
            ...TEMPORA_KINDS.map((k): [string, string] => [k, `/apis/tempora.dev/v1alpha1/namespaces/${NAMESPACE}/${k.toLowerCase()}s`]),
          ];
          for (const [kind, path] of paths) {
            const list = await admin.request<{ items: KubeObject[] }>('GET', path, { query });
            found.push(...list.items.map((o) => `${kind}/${o.metadata.name}`));
          }
          return found.sort();
        }

        it('installs: the objects exist, the stores pods are admitted under the restricted Pod Security Standard, NOTES say how to sign in', async function () {
          this.timeout(120_000);
          const out = helm.ok('install', RELEASE, CHART, '--namespace', NAMESPACE);
          assert.match(out, /STATUS: deployed/);
          assert.match(out, /kubectl -n tempora port-forward service\/tempora-gateway 8080:8080/);
          assert.match(out, /\/api\/v1\/auth\/demo/);
          assert.match(out, /kubectl -n tempora get secret tempora-keys -o jsonpath='\{\.data\.ADMIN_KEY\}'/);
          assert.match(out, /PostgreSQL and Redis run from this chart/);
          for (const o of parseObjects(helm.ok('get', 'manifest', RELEASE, '--namespace', NAMESPACE)))
            assert.ok(await get(o), `${o.kind}/${o.metadata.name} exists`);
          secretsAtInstall = await secretsNow();
          assert.deepEqual(
            Object.fromEntries([...secretsAtInstall].map(([name, data]) => [name, Object.keys(data).sort()])),
            {
              'tempora-callback': ['callback-secret'],
              'tempora-keys': ['ADMIN_KEY', 'SERVICE_KEY', 'SIMULATION_API_KEYS', 'WRITER_TOKENS'],
              'tempora-postgresql': ['password', 'url', 'username'],
              'tempora-redis': ['password', 'url'],
            },
            'every Secret filled by the operator',
          );
          // kube-controller-manager's StatefulSet controller makes the pods (no kubelet runs them here) and
          // their volume claims; a pod refused by admission would never appear.
          for (const sts of kept) {
            await waitFor(`pod ${sts}-0`, () => get({ apiVersion: 'v1', kind: 'Pod', metadata: { name: `${sts}-0`, namespace: NAMESPACE } }), {
              timeoutMs: 60_000,
              intervalMs: 250,
            });
            assert.ok(await get({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: `data-${sts}-0`, namespace: NAMESPACE } }));
          }
        });

        it('upgrades to a changed value: the custom resources follow, no Secret value changes', async function () {
          this.timeout(120_000);
          helm.ok('upgrade', RELEASE, CHART, '--namespace', NAMESPACE, '--set', 'logLevel=debug', '--set', 'agentPool.maxReplicas=3');
          assert.equal((await gatewaySpec()).logLevel, 'debug');
          assert.deepEqual(await secretsNow(), secretsAtInstall);
          // What the operator generated stays out of every revision's manifest, so that a rollback cannot remove it.
          const keys = only<Secret>(parseObjects(helm.ok('get', 'manifest', RELEASE, '--namespace', NAMESPACE)), 'Secret', 'tempora-keys');
          assert.deepEqual(
            [keys.data, Object.keys(toGenerate(keys)).sort()],
            [undefined, ['ADMIN_KEY', 'SERVICE_KEY', 'SIMULATION_API_KEYS', 'WRITER_TOKENS']],
          );
        });

        it('rolls back to the first revision: the value is back, the Secrets still unchanged', async function () {
          this.timeout(120_000);
          helm.ok('rollback', RELEASE, '1', '--namespace', NAMESPACE);
          assert.equal((await gatewaySpec()).logLevel, 'info');
          assert.deepEqual(await secretsNow(), secretsAtInstall);
          assert.match(helm.ok('history', RELEASE, '--namespace', NAMESPACE), /3\s.*deployed\s+tempora-0\.1\.0.*Rollback to 1/);
        });

        it('uninstalls: nothing of ours is left but the data stores volumes and the Secrets that open them', async function () {
          this.timeout(120_000);
          helm.ok('uninstall', RELEASE, '--namespace', NAMESPACE);
          const expected = [...kept.map((s) => `PersistentVolumeClaim/data-${s}-0`), ...kept.map((s) => `Secret/${s}`)].sort();
          // The garbage collector deletes the StatefulSets' pods after helm deletes their owners.
          await waitFor('only the kept objects', async () => JSON.stringify(await ours()) === JSON.stringify(expected), {
            timeoutMs: 60_000,
            intervalMs: 250,
          }).catch(async () => assert.deepEqual(await ours(), expected));
          assert.equal((await admin.request<{ items: unknown[] }>('GET', '/apis/monitoring.coreos.com/v1/namespaces/tempora/prometheusrules')).items.length, 0);
        });

        it('a new install under the same name adopts the kept Secrets, so the kept data opens with its password', async function () {
          this.timeout(120_000);
          helm.ok('install', RELEASE, CHART, '--namespace', NAMESPACE);
          const now = await secretsNow();
          for (const s of kept) assert.deepEqual(now.get(s), secretsAtInstall.get(s), s);
          assert.notDeepEqual(now.get('tempora-keys'), secretsAtInstall.get('tempora-keys'), 'the rest is generated anew');
          helm.ok('uninstall', RELEASE, '--namespace', NAMESPACE);
        });
      });
    });
  });
});
