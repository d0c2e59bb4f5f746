// The Helm chart charts/tempora-operator, checked with a real helm v3 (built once from the Go module
// proxy by build-helm.sh and cached per version): lint, what it renders with the default values and with
// every value set, values refused by values.schema.json, the CRDs it renders (from symlinks to crds/;
// crd-upgrade.test.ts installs and upgrades them with helm), and
// the rendered objects applied to a real kube-apiserver (test/k8s/control-plane.ts), whose validation,
// Pod Security admission and RBAC authorizer judge them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { loadConfig } from '../../operator/src/config.ts';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import { applyAs, CRD_DIR, clientFor, manifests, SERVICE_MONITOR_CRD } from '../../operator/test/cluster.ts';
import { ControlPlane, K8S_VERSION } from '../k8s/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { Helm, keyPaths, lookup, only, type Run, type SchemaNode } from './helm.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const CHART = join(ROOT, 'charts', 'tempora-operator');
const FULL_VALUES = join(HERE, 'values-full.yaml');
const RELEASE = 'tempora-operator';
const NAMESPACE = 'tempora-system';
const FULL_NAMESPACE = 'tempora-ops';
const WATCHED = 'tempora-watched';

const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Values;
const FULL_ARGS = ['-f', FULL_VALUES];
const full = parse(readFileSync(FULL_VALUES, 'utf8')) as Values;
const appVersion = (parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string }).appVersion;

interface Values {
  image: { repository: string; tag: string; digest: string; pullPolicy: string };
  imagePullSecrets: { name: string }[];
  replicaCount: number;
  leaderElection: boolean;
  watchNamespace: string;
  logLevel: string;
  workersPerController: number;
  resyncSeconds: number;
  resources: Record<string, unknown>;
  metrics: { port: number; serviceMonitor: boolean; serviceMonitorLabels: Record<string, string> };
  podAnnotations: Record<string, string>;
  nodeSelector: Record<string, string>;
  tolerations: unknown[];
  affinity: Record<string, unknown>;
  crds: { enabled: boolean; keep: boolean };
}

// The few parts of the rendered objects the assertions read.
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}
interface Probe {
  httpGet: { path: string; port: number | string };
}
interface Container {
  name: string;
  image: string;
  imagePullPolicy: string;
  env: EnvVar[];
  ports: { name: string; containerPort: number; protocol: string }[];
  livenessProbe: Probe;
  readinessProbe: Probe;
  resources: Record<string, unknown>;
  securityContext: Record<string, unknown> & { capabilities?: { drop?: string[]; add?: string[] } };
}
interface PodSpec {
  serviceAccountName: string;
  securityContext: Record<string, unknown> & { seccompProfile?: { type: string } };
  containers: Container[];
  imagePullSecrets?: { name: string }[];
  nodeSelector?: Record<string, string>;
  tolerations?: unknown[];
  affinity?: unknown;
  terminationGracePeriodSeconds?: number;
}
interface Deployment extends KubeObject {
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec };
  };
}
interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
}

let helmCli: Helm;

function helm(...args: string[]): Run {
  return helmCli.run(...args);
}

function helmOk(...args: string[]): string {
  return helmCli.ok(...args);
}

/** `helm template` of the chart, parsed; `extra` are further flags (values files, --set). */
function render(namespace: string, ...extra: string[]): KubeObject[] {
  return helmCli.template(RELEASE, CHART, namespace, ...extra);
}

/** Rules as a set of single permissions, so that two spellings of the same grant compare equal. */
function permissions(rules: Rule[]): string[] {
  const out = new Set<string>();
  for (const r of rules)
    for (const g of r.apiGroups ?? [''])
      for (const res of r.resources ?? []) for (const v of r.verbs) for (const n of r.resourceNames ?? ['*']) out.add(`${g}|${res}|${v}|${n}`);
  return [...out].sort();
}

function rbacSource(): { clusterRole: Rule[]; leaderRole: Rule[] } {
  const rbac = manifests(join(CRD_DIR, 'rbac', 'operator.yaml'));
  return {
    clusterRole: only<KubeObject & { rules: Rule[] }>(rbac, 'ClusterRole').rules,
    leaderRole: only<KubeObject & { rules: Rule[] }>(rbac, 'Role').rules,
  };
}

function env(c: Container): Map<string, EnvVar> {
  return new Map(c.env.map((e) => [e.name, e]));
}

/** The container's environment as the kubelet would give it, fed to the operator's own validation. */
function operatorEnvironment(d: Deployment, podName: string): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const e of d.spec.template.spec.containers[0]!.env) {
    const path = e.valueFrom?.fieldRef?.fieldPath;
    out[e.name] = path === 'metadata.name' ? podName : path === 'metadata.namespace' ? d.metadata.namespace : e.value;
  }
  return out;
}

const CRD_NAMES = ['agentpools.tempora.dev', 'graphworkers.tempora.dev', 'simulationbudgets.tempora.dev', 'temporagateways.tempora.dev'];
const CLUSTER_SCOPED = ['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition'];

const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as SchemaNode;

describe('helm chart tempora-operator', function () {
  before(function () {
    this.timeout(40 * 60_000); // a clean machine builds helm first (about 5 minutes on 2 cores)
    helmCli = Helm.build();
  });

  after(function () {
    helmCli?.dispose();
  });

  describe('lint and packaging', function () {
    it('passes helm lint --strict with the default values and with every value set', function () {
      helmOk('lint', CHART, '--strict', '--namespace', NAMESPACE);
      helmOk('lint', CHART, '--strict', '--namespace', FULL_NAMESPACE, ...FULL_ARGS);
    });

    it('the values file of these tests sets every value of values.yaml', function () {
      const missing = keyPaths(defaults, schema).filter((p) => lookup(full, p) === undefined);
      assert.deepEqual(missing, [], 'values-full.yaml must set every value');
    });

    it('the README documents every value', function () {
      const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
      const undocumented = keyPaths(defaults, schema).filter((p) => !readme.includes(`\`${p}\``));
      assert.deepEqual(undocumented, [], 'values missing from charts/tempora-operator/README.md');
    });

    it('carries the CRDs of crds/ as symlinks under files/crds, one per CRD file, and no Helm crds/ directory', function () {
      const crdFiles = readdirSync(CRD_DIR)
        .filter((f) => f.endsWith('.yaml'))
        .sort();
      const chartCrds = join(CHART, 'files', 'crds');
      assert.deepEqual(readdirSync(chartCrds).sort(), crdFiles);
      for (const f of crdFiles) {
        assert.ok(lstatSync(join(chartCrds, f)).isSymbolicLink(), `charts/tempora-operator/files/crds/${f} should be a symlink, not a copy`);
        assert.equal(realpathSync(join(chartCrds, f)), realpathSync(join(CRD_DIR, f)));
      }
      // Helm installs a crds/ directory once and never upgrades it; the templates would then meet CRDs they do not own.
      assert.equal(existsSync(join(CHART, 'crds')), false, 'charts/tempora-operator/crds must not exist');
    });

    it('helm package resolves the symlinks into the CRDs themselves', function () {
      const out = mkdtempSync(join(tmpdir(), 'tempora-helm-package-'));
      try {
        helmOk('package', CHART, '--destination', out);
        const tgz = readdirSync(out).find((f) => f.endsWith('.tgz'));
        assert.ok(tgz, 'helm package wrote no archive');
        const listed = spawnSync('tar', ['-tzf', join(out, tgz)], { encoding: 'utf8' });
        const entries = listed.stdout.split('\n');
        assert.deepEqual(
          entries.filter((l) => l.startsWith('tempora-operator/crds/')),
          [],
          'no Helm crds/ directory in the package',
        );
        const crdEntries = entries.filter((l) => l.startsWith('tempora-operator/files/crds/')).sort();
        assert.deepEqual(
          crdEntries,
          readdirSync(CRD_DIR)
            .filter((f) => f.endsWith('.yaml'))
            .sort()
            .map((f) => `tempora-operator/files/crds/${f}`),
        );
        assert.equal(spawnSync('tar', ['-xzf', join(out, tgz), '-C', out]).status, 0);
        const packaged = join(out, 'tempora-operator', 'files', 'crds');
        for (const f of readdirSync(packaged)) {
          assert.ok(!lstatSync(join(packaged, f)).isSymbolicLink(), `${f} is a symlink in the package`);
          assert.equal(readFileSync(join(packaged, f), 'utf8'), readFileSync(join(CRD_DIR, f), 'utf8'), f);
        }
        // The packaged chart renders like the directory, CRDs included.
        const fromPackage = helmOk('template', RELEASE, join(out, tgz), '--namespace', NAMESPACE, '--kube-version', K8S_VERSION);
        const fromDir = helmOk('template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', K8S_VERSION);
        assert.match(fromDir, /kind: CustomResourceDefinition/);
        assert.equal(fromPackage, fromDir);
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    });
  });

  describe('rendered with the default values', function () {
    let objects: KubeObject[];
    let deployment: Deployment;
    let container: Container;

    before(function () {
      objects = render(NAMESPACE);
      deployment = only<Deployment>(objects, 'Deployment', 'tempora-operator');
      container = deployment.spec.template.spec.containers[0]!;
    });

    it('renders exactly the operator objects and its CRDs, all labelled and the namespaced ones in the release namespace', function () {
      assert.deepEqual(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
        'ClusterRole/tempora-operator',
        'ClusterRoleBinding/tempora-operator',
        ...CRD_NAMES.map((n) => `CustomResourceDefinition/${n}`),
        'Deployment/tempora-operator',
        'PodDisruptionBudget/tempora-operator',
        'Role/tempora-operator-leader-election',
        'RoleBinding/tempora-operator-leader-election',
        'Service/tempora-operator-metrics',
        'ServiceAccount/tempora-operator',
      ]);
      for (const o of objects) {
        assert.equal(o.metadata.namespace, CLUSTER_SCOPED.includes(o.kind) ? undefined : NAMESPACE, `${o.kind} namespace`);
        assert.equal(o.metadata.labels?.['app.kubernetes.io/name'], 'tempora-operator');
        assert.equal(o.metadata.labels?.['app.kubernetes.io/instance'], RELEASE);
        assert.equal(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm');
        // The operator watches its children by managed-by=tempora-operator; its own objects must not match.
        assert.notEqual(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'tempora-operator');
      }
    });

    it('runs the chart appVersion image with the values resources, as the operator service account', function () {
      assert.equal(deployment.spec.replicas, defaults.replicaCount);
      assert.equal(container.image, `${defaults.image.repository}:${appVersion}`);
      assert.equal(container.imagePullPolicy, defaults.image.pullPolicy);
      assert.deepEqual(container.resources, defaults.resources);
      assert.equal(deployment.spec.template.spec.serviceAccountName, only(objects, 'ServiceAccount').metadata.name);
      assert.deepEqual(deployment.spec.selector.matchLabels, {
        'app.kubernetes.io/name': 'tempora-operator',
        'app.kubernetes.io/instance': RELEASE,
      });
      for (const [k, v] of Object.entries(deployment.spec.selector.matchLabels)) assert.equal(deployment.spec.template.metadata.labels[k], v);
      assert.equal(deployment.spec.template.spec.imagePullSecrets, undefined);
      assert.equal(deployment.spec.template.spec.nodeSelector, undefined);
      assert.equal(deployment.spec.template.spec.tolerations, undefined);
      assert.equal(deployment.spec.template.spec.affinity, undefined);
      assert.equal(deployment.spec.template.metadata.annotations, undefined);
    });

    it('runs non-root with a read-only root filesystem, no privilege escalation and no capabilities', function () {
      const pod = deployment.spec.template.spec.securityContext;
      assert.equal(pod.runAsNonRoot, true);
      assert.ok(typeof pod.runAsUser === 'number' && pod.runAsUser > 0, 'runAsUser is a non-root uid');
      assert.equal(pod.seccompProfile?.type, 'RuntimeDefault');
      const c = container.securityContext;
      assert.equal(c.readOnlyRootFilesystem, true);
      assert.equal(c.allowPrivilegeEscalation, false);
      assert.deepEqual(c.capabilities?.drop, ['ALL']);
      assert.equal(c.capabilities?.add, undefined);
      assert.notEqual(c.privileged, true);
    });

    it('probes /healthz and /readyz on the metrics port 8090', function () {
      const metrics = container.ports.find((p) => p.name === 'metrics');
      assert.deepEqual(metrics, { name: 'metrics', containerPort: 8090, protocol: 'TCP' });
      const portOf = (p: Probe) =>
        typeof p.httpGet.port === 'number' ? p.httpGet.port : container.ports.find((x) => x.name === p.httpGet.port)?.containerPort;
      assert.equal(container.livenessProbe.httpGet.path, '/healthz');
      assert.equal(portOf(container.livenessProbe), 8090);
      assert.equal(container.readinessProbe.httpGet.path, '/readyz');
      assert.equal(portOf(container.readinessProbe), 8090);
    });

    it('configures the operator through an environment its own validation accepts, leader election on', function () {
      const e = env(container);
      assert.equal(e.get('OPERATOR_PORT')?.value, '8090');
      assert.equal(e.get('LEADER_ELECTION')?.value, 'true');
      assert.equal(e.get('LEADER_ELECTION_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath, 'metadata.namespace');
      assert.equal(e.get('POD_NAME')?.valueFrom?.fieldRef?.fieldPath, 'metadata.name');
      assert.equal(e.has('WATCH_NAMESPACE'), false, 'no WATCH_NAMESPACE: every namespace');
      const config = loadConfig(operatorEnvironment(deployment, 'tempora-operator-abc'));
      assert.deepEqual(
        { ...config },
        {
          kubeconfig: undefined,
          port: 8090,
          watchNamespace: undefined,
          leaderElection: true,
          leaderElectionNamespace: NAMESPACE,
          leaderElectionId: 'tempora-operator',
          identity: 'tempora-operator-abc',
          workers: defaults.workersPerController,
          resyncMs: defaults.resyncSeconds * 1000,
          logLevel: defaults.logLevel,
          // Not set by the chart: the operator's defaults (in-cluster Service DNS, a budget report every 30 s).
          serviceUrlTemplate: 'http://{service}.{namespace}.svc:{port}',
          budgetPollMs: 30_000,
        },
      );
    });

    it('exposes the metrics port through a Service and keeps one replica up with a PodDisruptionBudget', function () {
      const svc = only(objects, 'Service') as KubeObject & {
        spec: { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string }[] };
      };
      assert.deepEqual(svc.spec.selector, deployment.spec.selector.matchLabels);
      assert.deepEqual(
        svc.spec.ports.map((p) => [p.name, p.port, p.targetPort]),
        [['metrics', 8090, 'metrics']],
      );
      const pdb = only(objects, 'PodDisruptionBudget') as KubeObject & { spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } } };
      assert.equal(pdb.spec.maxUnavailable, 1);
      assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
      assert.equal(
        objects.some((o) => o.kind === 'ServiceMonitor'),
        false,
      );
    });

    it('grants the service account exactly the rules of crds/rbac: cluster-wide kinds, its own Lease in its namespace', function () {
      const source = rbacSource();
      const sa = only(objects, 'ServiceAccount');
      const subject = [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: NAMESPACE }];

      const clusterRole = only<KubeObject & { rules: Rule[] }>(objects, 'ClusterRole');
      assert.deepEqual(permissions(clusterRole.rules), permissions(source.clusterRole));
      const binding = only<KubeObject & { roleRef: unknown; subjects: unknown }>(objects, 'ClusterRoleBinding');
      assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole.metadata.name });
      assert.deepEqual(binding.subjects, subject);

      const leaderRole = only<KubeObject & { rules: Rule[] }>(objects, 'Role');
      assert.deepEqual(permissions(leaderRole.rules), permissions(source.leaderRole));
      assert.equal(leaderRole.metadata.namespace, NAMESPACE, 'the Lease lives in the release namespace (LEADER_ELECTION_NAMESPACE)');
      // The one Lease it may update is the one the operator takes (LEADER_ELECTION_ID's default).
      assert.ok(permissions(leaderRole.rules).includes('coordination.k8s.io|leases|update|tempora-operator'));
      const leaderBinding = only<KubeObject & { roleRef: unknown; subjects: unknown }>(objects, 'RoleBinding');
      assert.deepEqual(leaderBinding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: leaderRole.metadata.name });
      assert.deepEqual(leaderBinding.subjects, subject);

      // Least privilege: no wildcards, Secrets read, created (the signing keys) and patched (the keys a
      // generated Secret asks for, added conditionally so none is replaced), never updated or deleted; no
      // writes to its own custom resources.
      for (const p of permissions([...clusterRole.rules, ...leaderRole.rules])) {
        assert.ok(!p.split('|').slice(0, 3).includes('*'), `wildcard grant ${p}`);
        assert.ok(!/\|secrets\|(update|delete|deletecollection)\|/.test(p), `grant on secrets ${p}`);
        assert.ok(
          !/^tempora\.dev\|(temporagateways|graphworkers|agentpools|simulationbudgets)\|(create|update|patch|delete)/.test(p),
          `writes its own kinds: ${p}`,
        );
      }
    });

    it('renders the four CRDs of crds/ unchanged but for labels and the keep annotation, and only CRDs', function () {
      const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
      const expected = new Map(
        readdirSync(CRD_DIR)
          .filter((f) => f.endsWith('.yaml'))
          .flatMap((f) => manifests(join(CRD_DIR, f)))
          .map((c) => [c.metadata.name, c]),
      );
      assert.deepEqual(crds.map((c) => c.metadata.name).sort(), [...expected.keys()].sort());
      for (const crd of crds) {
        assert.equal(crd.metadata.annotations?.['helm.sh/resource-policy'], 'keep', crd.metadata.name);
        assert.deepEqual({ ...crd, metadata: { name: crd.metadata.name } }, { ...expected.get(crd.metadata.name)!, metadata: { name: crd.metadata.name } });
      }
      // Nothing from crds/rbac comes along (the templates own the RBAC), and --include-crds has no crds/ to add.
      assert.equal(render(NAMESPACE, '--include-crds').length, objects.length);
      // crds.enabled=false: the same objects but the CRDs.
      assert.deepEqual(
        render(NAMESPACE, '--set', 'crds.enabled=false'),
        objects.filter((o) => o.kind !== 'CustomResourceDefinition'),
      );
    });

    it('with one replica: no PodDisruptionBudget, leader election still on (rolling updates overlap)', function () {
      const one = render(NAMESPACE, '--set', 'replicaCount=1');
      assert.equal(
        one.some((o) => o.kind === 'PodDisruptionBudget'),
        false,
      );
      const d = only<Deployment>(one, 'Deployment');
      assert.equal(d.spec.replicas, 1);
      assert.equal(env(d.spec.template.spec.containers[0]!).get('LEADER_ELECTION')?.value, 'true');
      const off = only<Deployment>(render(NAMESPACE, '--set', 'replicaCount=1', '--set', 'leaderElection=false'), 'Deployment');
      assert.equal(loadConfig(operatorEnvironment(off, 'p')).leaderElection, false);
    });
  });

  describe('rendered with every value set', function () {
    let objects: KubeObject[];
    let deployment: Deployment;
    let container: Container;

    before(function () {
      objects = render(FULL_NAMESPACE, ...FULL_ARGS);
      deployment = only<Deployment>(objects, 'Deployment', 'tempora-operator');
      container = deployment.spec.template.spec.containers[0]!;
    });

    it('renders a Role in the watched namespace instead of a ClusterRole, and a ServiceMonitor', function () {
      assert.deepEqual(objects.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`).sort(), [
        ...CRD_NAMES.map((n) => `CustomResourceDefinition/undefined/${n}`),
        `Deployment/${FULL_NAMESPACE}/tempora-operator`,
        `PodDisruptionBudget/${FULL_NAMESPACE}/tempora-operator`,
        `Role/${FULL_NAMESPACE}/tempora-operator-leader-election`,
        `Role/${WATCHED}/tempora-operator`,
        `RoleBinding/${FULL_NAMESPACE}/tempora-operator-leader-election`,
        `RoleBinding/${WATCHED}/tempora-operator`,
        `Service/${FULL_NAMESPACE}/tempora-operator-metrics`,
        `ServiceAccount/${FULL_NAMESPACE}/tempora-operator`,
        `ServiceMonitor/${FULL_NAMESPACE}/tempora-operator`,
      ]);
      const role = only<KubeObject & { rules: Rule[] }>(objects, 'Role', 'tempora-operator');
      assert.deepEqual(permissions(role.rules), permissions(rbacSource().clusterRole));
      const binding = only<KubeObject & { roleRef: unknown; subjects: unknown }>(objects, 'RoleBinding', 'tempora-operator');
      assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tempora-operator' });
      assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'tempora-operator', namespace: FULL_NAMESPACE }]);
    });

    it('applies every value to the Deployment', function () {
      const pod = deployment.spec.template.spec;
      assert.equal(deployment.spec.replicas, full.replicaCount);
      assert.equal(container.image, `${full.image.repository}:${full.image.tag}@${full.image.digest}`);
      assert.equal(container.imagePullPolicy, full.image.pullPolicy);
      assert.deepEqual(pod.imagePullSecrets, full.imagePullSecrets);
      assert.deepEqual(container.resources, full.resources);
      assert.deepEqual(deployment.spec.template.metadata.annotations, full.podAnnotations);
      assert.deepEqual(pod.nodeSelector, full.nodeSelector);
      assert.deepEqual(pod.tolerations, full.tolerations);
      assert.deepEqual(pod.affinity, full.affinity);
      assert.deepEqual(container.ports, [{ name: 'metrics', containerPort: full.metrics.port, protocol: 'TCP' }]);
      assert.equal(container.livenessProbe.httpGet.port, 'metrics');
      assert.equal(container.readinessProbe.httpGet.port, 'metrics');
      const config = loadConfig(operatorEnvironment(deployment, 'pod-1'));
      assert.deepEqual(
        {
          port: config.port,
          watchNamespace: config.watchNamespace,
          leaderElection: config.leaderElection,
          leaderElectionNamespace: config.leaderElectionNamespace,
          workers: config.workers,
          resyncMs: config.resyncMs,
          logLevel: config.logLevel,
        },
        {
          port: full.metrics.port,
          watchNamespace: WATCHED,
          leaderElection: true,
          leaderElectionNamespace: FULL_NAMESPACE,
          workers: full.workersPerController,
          resyncMs: full.resyncSeconds * 1000,
          logLevel: full.logLevel,
        },
      );
    });

    it('points the Service and the ServiceMonitor at the metrics port, with the extra labels', function () {
      const svc = only(objects, 'Service') as KubeObject & { spec: { ports: { port: number; targetPort: string }[] } };
      assert.deepEqual(
        svc.spec.ports.map((p) => [p.port, p.targetPort]),
        [[full.metrics.port, 'metrics']],
      );
      const sm = only(objects, 'ServiceMonitor') as KubeObject & {
        spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] };
      };
      for (const [k, v] of Object.entries(full.metrics.serviceMonitorLabels)) assert.equal(sm.metadata.labels?.[k], v);
      for (const [k, v] of Object.entries(sm.spec.selector.matchLabels))
        assert.equal(svc.metadata.labels?.[k], v, `the ServiceMonitor selects the Service by ${k}`);
      assert.deepEqual(
        sm.spec.endpoints.map((e) => [e.port, e.path]),
        [['metrics', '/metrics']],
      );
      // Like every monitor the operator makes, it labels its target with the platform's component.
      assert.deepEqual((sm.spec.endpoints[0] as { relabelings?: unknown }).relabelings, [
        { action: 'replace', targetLabel: 'tempora_component', replacement: 'operator' },
      ]);
    });
  });

  describe('values.schema.json', function () {
    const refused: [string, string[], RegExp][] = [
      ['a replica count that is not a number', ['--set', 'replicaCount=two'], /\/replicaCount/],
      ['a negative replica count', ['--set', 'replicaCount=-1'], /\/replicaCount/],
      ['an unknown pull policy', ['--set', 'image.pullPolicy=Sometimes'], /\/image\/pullPolicy/],
      ['an empty image repository', ['--set', 'image.repository='], /\/image\/repository/],
      ['a tag with a space', ['--set-string', 'image.tag=1.0 beta'], /\/image\/tag/],
      ['a digest that is no sha256', ['--set-string', 'image.digest=latest'], /\/image\/digest/],
      ['an unknown log level', ['--set', 'logLevel=verbose'], /\/logLevel/],
      ['zero workers', ['--set', 'workersPerController=0'], /\/workersPerController/],
      ['a negative resync', ['--set', 'resyncSeconds=-5'], /\/resyncSeconds/],
      ['a port out of range', ['--set', 'metrics.port=70000'], /\/metrics\/port/],
      ['a watch namespace that is no namespace name', ['--set', 'watchNamespace=Not_A_Namespace'], /\/watchNamespace/],
      ['a memory limit that is no quantity', ['--set', 'resources.limits.memory=lots'], /\/resources\/limits\/memory/],
      ['serviceMonitor as a string', ['--set-string', 'metrics.serviceMonitor=yes'], /\/metrics\/serviceMonitor/],
      ['a misspelt value (replicas)', ['--set', 'replicas=3'], /replicas/],
      ['leader election off with two replicas', ['--set', 'leaderElection=false'], /\/leaderElection/],
      ['a non-string node selector', ['--set', 'nodeSelector.zone=1'], /\/nodeSelector\/zone/],
      ['crds.enabled as a string', ['--set-string', 'crds.enabled=yes'], /\/crds\/enabled/],
      ['crds.keep as a string', ['--set-string', 'crds.keep=no'], /\/crds\/keep/],
    ];
    for (const [what, args, path] of refused) {
      it(`refuses ${what}`, function () {
        const r = helm('template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', K8S_VERSION, ...args);
        assert.notEqual(r.status, 0, `helm template ${args.join(' ')} should fail`);
        assert.match(r.stderr, /values don't meet the specifications of the schema/);
        assert.match(r.stderr, path);
      });
    }

    it('lint reports the same refusal', function () {
      const r = helm('lint', CHART, '--strict', '--set', 'logLevel=verbose');
      assert.notEqual(r.status, 0);
      assert.match(r.stdout + r.stderr, /\/logLevel/);
    });

    it('accepts numeric quantities and an empty tag', function () {
      const d = only<Deployment>(render(NAMESPACE, '--set', 'resources.limits.cpu=2', '--set', 'image.tag='), 'Deployment');
      assert.equal(d.spec.template.spec.containers[0]!.image, `${defaults.image.repository}:${appVersion}`);
    });
  });

  describe('applied to a real kube-apiserver', function () {
    let cp: ControlPlane | undefined;
    let admin: KubeClient;
    const applied: KubeObject[] = [];

    async function get(o: KubeObject): Promise<KubeObject> {
      const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
      const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
      const plural =
        { PodDisruptionBudget: 'poddisruptionbudgets', CustomResourceDefinition: 'customresourcedefinitions' }[o.kind] ?? `${o.kind.toLowerCase()}s`;
      const ns = o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : '';
      return admin.request<KubeObject>('GET', `${base}${ns}/${plural}/${o.metadata.name}`);
    }

    async function can(user: string, namespace: string, verb: string, group: string, resource: string, name?: string): Promise<boolean> {
      const sa = user.split(':');
      const review = await admin.request<{ status: { allowed: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user,
            groups: ['system:serviceaccounts', `system:serviceaccounts:${sa[2]}`, 'system:authenticated'],
            resourceAttributes: { namespace, verb, group, resource, ...(name ? { name } : {}) },
          },
        },
      });
      return review.status.allowed;
    }

    async function install(objects: KubeObject[]): Promise<void> {
      // CRDs first (helm installs crds/ before the templates), then the rest once they are served.
      const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
      for (const o of crds) applied.push(await applyAs(admin, o, 'helm'));
      for (const o of crds) {
        await waitFor(
          `CRD ${o.metadata.name} established`,
          async () => {
            const conditions = ((await get(o)).status?.conditions ?? []) as { type: string; status: string }[];
            return conditions.some((c) => c.type === 'Established' && c.status === 'True');
          },
          { timeoutMs: 30_000 },
        );
      }
      for (const o of objects.filter((x) => x.kind !== 'CustomResourceDefinition')) applied.push(await applyAs(admin, o, 'helm'));
    }

    async function podsOf(d: Deployment): Promise<KubeObject[]> {
      const selector = Object.entries(d.spec.selector.matchLabels)
        .map(([k, v]) => `${k}=${v}`)
        .join(',');
      const list = await admin.request<{ items: KubeObject[] }>('GET', `/api/v1/namespaces/${d.metadata.namespace}/pods`, {
        query: { labelSelector: selector },
      });
      return list.items;
    }

    before(async function () {
      this.timeout(30 * 60_000); // builds kube-apiserver on a clean machine (about 6 minutes)
      cp = await ControlPlane.started();
      admin = clientFor(cp.kubeconfigPath);
      // The strictest Pod Security Standard, enforced: pods the Deployment's ReplicaSet creates are refused
      // unless the pod template is non-root, without privilege escalation or capabilities, with seccomp.
      for (const name of [NAMESPACE, FULL_NAMESPACE, WATCHED]) {
        await applyAs(admin, {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name, labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } },
        });
      }
      // Stands in for the Prometheus Operator's CRD, so that the ServiceMonitor can be applied.
      await install([SERVICE_MONITOR_CRD]);
    });

    after(async function () {
      this.timeout(60_000);
      await cp?.stop();
    });

    it('accepts every object rendered with the default values, CRDs included', async function () {
      this.timeout(120_000);
      const objects = render(NAMESPACE);
      await install(objects);
      for (const o of objects) {
        const live = await get(o);
        assert.equal(live.metadata.name, o.metadata.name);
      }
      for (const crd of objects.filter((o) => o.kind === 'CustomResourceDefinition')) {
        const live = await get(crd);
        const conditions = (live.status?.conditions ?? []) as { type: string; status: string }[];
        assert.ok(!conditions.some((c) => c.type === 'NonStructuralSchema' && c.status === 'True'), `${crd.metadata.name} schema is structural`);
      }
    });

    it('accepts every object rendered with every value set', async function () {
      this.timeout(120_000);
      const objects = render(FULL_NAMESPACE, ...FULL_ARGS);
      await install(objects);
      for (const o of objects) assert.equal((await get(o)).metadata.name, o.metadata.name);
    });

    it('creates the operator pods under the restricted Pod Security Standard', async function () {
      this.timeout(120_000);
      for (const [namespace, replicas] of [
        [NAMESPACE, defaults.replicaCount],
        [FULL_NAMESPACE, full.replicaCount],
      ] as const) {
        const d = (await get({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'tempora-operator', namespace } })) as Deployment;
        await waitFor(
          `${replicas} operator pods in ${namespace}`,
          async () => {
            const pods = await podsOf(d);
            if (pods.length === replicas) return true;
            // A pod refused by admission shows up as ReplicaFailure on the ReplicaSet; fail with its message.
            const rsList = await admin.request<{ items: KubeObject[] }>('GET', `/apis/apps/v1/namespaces/${namespace}/replicasets`);
            for (const rs of rsList.items) {
              const failure = ((rs.status?.conditions ?? []) as { type: string; message: string }[]).find((c) => c.type === 'ReplicaFailure');
              if (failure) throw new assert.AssertionError({ message: `pods refused: ${failure.message}` });
            }
            return false;
          },
          { timeoutMs: 60_000, intervalMs: 250 },
        );
        const pods = await podsOf(d);
        for (const pod of pods) assert.equal((pod.spec as unknown as PodSpec).serviceAccountName, 'tempora-operator');
      }
      // The namespaces do enforce it: the same pod template without its security contexts is refused.
      const d = only<Deployment>(render(NAMESPACE), 'Deployment');
      const spec = structuredClone(d.spec.template.spec) as unknown as Record<string, unknown> & { containers: Record<string, unknown>[] };
      delete spec.securityContext;
      delete spec.containers[0]!.securityContext;
      await assert.rejects(
        admin.request('POST', `/api/v1/namespaces/${NAMESPACE}/pods`, {
          body: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'without-security-context' }, spec },
        }),
        /violates PodSecurity "restricted/,
      );
    });

    it('authorizes the service account for what the operator does and nothing more', async function () {
      const user = `system:serviceaccount:${NAMESPACE}:tempora-operator`;
      // Cluster-wide (default values): its kinds in any namespace, children anywhere, its Lease at home.
      assert.equal(await can(user, 'any', 'watch', 'tempora.dev', 'temporagateways'), true);
      assert.equal(await can(user, 'any', 'patch', 'tempora.dev', 'temporagateways/status'), true);
      assert.equal(await can(user, 'any', 'create', 'apps', 'deployments'), true);
      assert.equal(await can(user, 'any', 'delete', 'networking.k8s.io', 'ingresses'), true);
      assert.equal(await can(user, 'any', 'create', '', 'events'), true);
      assert.equal(await can(user, NAMESPACE, 'update', 'coordination.k8s.io', 'leases', 'tempora-operator'), true);
      assert.equal(await can(user, NAMESPACE, 'create', 'coordination.k8s.io', 'leases'), true);
      // ... and not more.
      assert.equal(await can(user, NAMESPACE, 'update', 'coordination.k8s.io', 'leases', 'someone-else'), false);
      assert.equal(await can(user, 'other', 'create', 'coordination.k8s.io', 'leases'), false);
      assert.equal(await can(user, 'any', 'create', 'tempora.dev', 'temporagateways'), false);
      assert.equal(await can(user, 'any', 'patch', '', 'secrets'), true, 'fills the keys a generated Secret asks for');
      assert.equal(await can(user, 'any', 'update', '', 'secrets'), false);
      assert.equal(await can(user, 'any', 'delete', '', 'secrets'), false);
      assert.equal(await can(user, 'any', 'update', 'apps', 'deployments'), false);
      assert.equal(await can(user, 'any', 'create', '', 'pods'), false);

      // One watched namespace (every value set): the same rules, only there.
      const scoped = `system:serviceaccount:${FULL_NAMESPACE}:tempora-operator`;
      assert.equal(await can(scoped, WATCHED, 'list', 'tempora.dev', 'agentpools'), true);
      assert.equal(await can(scoped, WATCHED, 'create', 'autoscaling', 'horizontalpodautoscalers'), true);
      assert.equal(await can(scoped, FULL_NAMESPACE, 'update', 'coordination.k8s.io', 'leases', 'tempora-operator'), true);
      assert.equal(await can(scoped, 'elsewhere', 'list', 'tempora.dev', 'agentpools'), false);
      assert.equal(await can(scoped, 'elsewhere', 'create', 'apps', 'deployments'), false);
      assert.equal(await can(scoped, FULL_NAMESPACE, 'create', 'apps', 'deployments'), false);
    });

    it('refuses a rendering the API server would not accept (the check is not vacuous)', async function () {
      const [deployment] = render(NAMESPACE).filter((o) => o.kind === 'Deployment') as Deployment[];
      const broken = structuredClone(deployment!);
      broken.metadata.name = 'tempora-operator-broken';
      broken.spec.template.spec.containers[0]!.ports[0]!.containerPort = 70000;
      await assert.rejects(applyAs(admin, broken, 'helm'), /containerPort|65535|Invalid/);
    });
  });
});
