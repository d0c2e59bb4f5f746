// The operator chart installs and upgrades the CRDs of crds/ as templates (crds.enabled, crds.keep), checked
// with a real helm against a real kube-apiserver (test/k8s/control-plane.ts): chart 0.1.0 as packaged (test/helm/fixtures),
// which had them in Helm's crds/ directory, installed; the upgrade to the working tree refused until the
// commands charts/tempora-operator/README.md gives ("Upgrading from chart 0.1.0") have run, run with a real
// kubectl, and then upgrading them; a further upgrade over a changed CRD applying the change; uninstall
// keeping them, or with crds.keep=false deleting them; crds.enabled=false rendering none.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { isNotFound, type KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import { applyAs, CRD_DIR, clientFor, manifests } from '../../operator/test/cluster.ts';
import { binaryDir, ControlPlane, K8S_VERSION } from '../k8s/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { Helm, parseObjects } from './helm.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const CHART = join(ROOT, 'charts', 'tempora-operator');
/**
 * Chart 0.1.0 as it was released, whose CRDs were in Helm's crds/: `helm package` of charts/tempora-operator
 * at c42752a, the last commit of main with it. Kept as the package, so that no git history is needed.
 */
const PREVIOUS = join(HERE, 'fixtures', 'tempora-operator-0.1.0.tgz');
const RELEASE = 'tempora-operator';
const NAMESPACE = 'tempora-system';
const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const KEEP = 'helm.sh/resource-policy';

interface Crd extends KubeObject {
  spec: {
    names: { kind: string; plural: string; shortNames?: string[] };
    versions: { name: string; additionalPrinterColumns?: { name: string; jsonPath: string }[]; schema: { openAPIV3Schema: Schema } }[];
  };
}
interface Schema {
  description?: string;
  properties?: Record<string, Schema>;
}

const specProperties = (c: Crd) => c.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!.properties!;
const gatewayRefDescription = (c: Crd) => specProperties(c).gatewayRef!.description;

/** The CRDs of crds/, by name. */
const sources = new Map(
  readdirSync(CRD_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => manifests(join(CRD_DIR, f)) as Crd[])
    .map((c) => [c.metadata.name, c]),
);

/** The shell block under a `### ` heading of the chart README. */
function readmeBlock(heading: string): string {
  const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
  const section = readme.split(/^### /m).find((s) => s.startsWith(heading));
  assert.ok(section, `README.md has a section "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  assert.ok(block, `the section "${heading}" has a shell block`);
  return block[1]!;
}

/** Every field of `expected` is in `actual` with the same value (the API server adds defaults of its own). */
function assertContains(actual: unknown, expected: unknown, path: string): void {
  if (expected !== null && typeof expected === 'object') {
    assert.ok(actual !== null && typeof actual === 'object', `${path} is an object`);
    if (Array.isArray(expected)) {
      assert.ok(Array.isArray(actual) && actual.length === expected.length, `${path} has ${expected.length} items`);
      expected.forEach((x, i) => assertContains((actual as unknown[])[i], x, `${path}[${i}]`));
    } else for (const [k, v] of Object.entries(expected)) assertContains((actual as Record<string, unknown>)[k], v, `${path}.${k}`);
  } else assert.equal(actual, expected, path);
}

describe('helm chart tempora-operator: CRDs installed and upgraded with the release', function () {
  let helm: Helm;

  before(function () {
    this.timeout(40 * 60_000); // a clean machine builds helm first (about 5 minutes on 2 cores)
    helm = Helm.build();
  });

  after(() => helm?.dispose());

  const render = (chart: string, ...extra: string[]) => helm.ok('template', RELEASE, chart, '--namespace', NAMESPACE, '--kube-version', K8S_VERSION, ...extra);
  const crdsOf = (objects: KubeObject[]) => objects.filter((o): o is Crd => o.kind === 'CustomResourceDefinition');

  describe('rendered', function () {
    it('renders every CRD of crds/ unchanged but for the release labels and the keep annotation, and nothing else of crds/', function () {
      const crds = crdsOf(parseObjects(render(CHART)));
      assert.deepEqual(crds.map((c) => c.metadata.name).sort(), [...sources.keys()].sort());
      for (const crd of crds) {
        const source = sources.get(crd.metadata.name)!;
        assert.deepEqual(crd.metadata.annotations, { [KEEP]: 'keep' });
        assert.equal(crd.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm');
        assert.equal(crd.metadata.labels?.['app.kubernetes.io/instance'], RELEASE);
        for (const [k, v] of Object.entries(source.metadata.labels ?? {}))
          assert.equal(crd.metadata.labels?.[k], v, `${crd.metadata.name}: its own label ${k}`);
        const bare = structuredClone(crd);
        delete bare.metadata.annotations;
        bare.metadata.labels = source.metadata.labels;
        assert.deepEqual(bare, source, `${crd.metadata.name} as in crds/`);
      }
    });

    it('crds.keep=false: the same CRDs without the keep annotation', function () {
      const crds = crdsOf(parseObjects(render(CHART, '--set', 'crds.keep=false')));
      assert.equal(crds.length, sources.size);
      for (const crd of crds) assert.equal(crd.metadata.annotations, undefined, crd.metadata.name);
    });

    it('crds.enabled=false: no CRD, and the rest as with them', function () {
      const without = parseObjects(render(CHART, '--set', 'crds.enabled=false'));
      assert.deepEqual(crdsOf(without), []);
      const rest = parseObjects(render(CHART)).filter((o) => o.kind !== 'CustomResourceDefinition');
      assert.deepEqual(without, rest);
    });

    it('refuses crds values of the wrong type or misspelt', function () {
      for (const args of [
        ['--set-string', 'crds.enabled=yes'],
        ['--set-string', 'crds.keep=no'],
        ['--set', 'crds.install=true'],
      ]) {
        const r = helm.run('template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', K8S_VERSION, ...args);
        assert.notEqual(r.status, 0, args.join(' '));
        assert.match(r.stderr, /values don't meet the specifications of the schema[\s\S]*\/crds|crds[\s\S]*not allowed/);
      }
    });

    it('renders the same bytes twice (GitOps: helm template at every sync)', function () {
      for (const args of [[], ['-f', join(HERE, 'values-full.yaml')], ['--set', 'crds.keep=false']])
        assert.equal(render(CHART, ...args), render(CHART, ...args));
    });
  });

  describe('helm install, upgrade and uninstall on a real kube-apiserver', function () {
    let cp: ControlPlane | undefined;
    let admin: KubeClient;
    let work: string;
    let previousChart: string;
    let kubectlEnv: NodeJS.ProcessEnv;

    const getCrd = (name: string) => admin.request<Crd>('GET', `${CRD_PATH}/${name}`);
    async function crdGone(name: string): Promise<boolean> {
      try {
        await getCrd(name);
        return false;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    }
    /** Waits for the API server to serve the CRD (its names accepted, Established). */
    function established(name: string): Promise<Crd> {
      return waitFor(
        `CRD ${name} established`,
        async () => {
          const crd = await getCrd(name);
          const conditions = (crd.status?.conditions ?? []) as { type: string; status: string; message: string }[];
          const names = conditions.find((c) => c.type === 'NamesAccepted');
          if (names?.status === 'False') throw new Error(`names not accepted: ${names.message}`);
          return conditions.some((c) => c.type === 'Established' && c.status === 'True') ? crd : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    }
    const graphWorker = (name: string, spec: Record<string, unknown> = {}): KubeObject => ({
      apiVersion: 'tempora.dev/v1alpha1',
      kind: 'GraphWorker',
      metadata: { name, namespace: NAMESPACE },
      spec: { role: 'renderer', image: { version: '1.0.0' }, ...spec },
    });
    /** Creates as `kubectl create` does: a field the schema does not declare is refused, not dropped. */
    const createGraphWorker = (o: KubeObject) =>
      admin.request<KubeObject>('POST', `/apis/tempora.dev/v1alpha1/namespaces/${NAMESPACE}/graphworkers`, { body: o, query: { fieldValidation: 'Strict' } });
    const getGraphWorker = (name: string) =>
      admin.request<KubeObject & { spec: Record<string, unknown> }>('GET', `/apis/tempora.dev/v1alpha1/namespaces/${NAMESPACE}/graphworkers/${name}`);

    /** Asserts the CRDs of crds/ are served with their content from crds/, owned by the release, kept or not. */
    async function assertInstalled(keep: boolean): Promise<void> {
      for (const [name, source] of sources) {
        const live = await established(name);
        assertContains(live.spec, source.spec, name);
        assert.equal(live.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm', `${name} managed by Helm`);
        assert.equal(live.metadata.annotations?.['meta.helm.sh/release-name'], RELEASE, name);
        assert.equal(live.metadata.annotations?.['meta.helm.sh/release-namespace'], NAMESPACE, name);
        assert.equal(live.metadata.annotations?.[KEEP], keep ? 'keep' : undefined, `${name} keep annotation`);
      }
    }

    before(async function () {
      this.timeout(30 * 60_000); // builds kube-apiserver and kubectl on a clean machine
      const built = spawnSync('bash', [join(ROOT, 'test', 'k8s', 'build-binaries.sh'), 'kubectl'], { stdio: ['ignore', 'inherit', 'inherit'] });
      if (built.status !== 0) throw new Error('building kubectl failed');
      work = mkdtempSync(join(tmpdir(), 'tempora-crd-upgrade-'));
      execFileSync('tar', ['-xzf', PREVIOUS, '-C', work]);
      previousChart = join(work, 'tempora-operator');
      assert.match(readFileSync(join(previousChart, 'Chart.yaml'), 'utf8'), /^version: 0\.1\.0$/m);
      cp = await ControlPlane.started();
      admin = clientFor(cp.kubeconfigPath);
      helm.env = { KUBECONFIG: cp.kubeconfigPath };
      kubectlEnv = { ...process.env, KUBECONFIG: cp.kubeconfigPath, PATH: [binaryDir(), process.env.PATH].join(':') };
    });

    after(async function () {
      this.timeout(60_000);
      await cp?.stop();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it('installs chart 0.1.0: its CRDs from Helm crds/, not owned by the release, and a GraphWorker', async function () {
      this.timeout(120_000);
      helm.ok('install', RELEASE, previousChart, '-n', NAMESPACE, '--create-namespace');
      const old = await established('gateways.tempora.dev');
      assert.equal(old.metadata.labels?.['app.kubernetes.io/managed-by'], undefined);
      assert.equal(old.metadata.annotations?.['meta.helm.sh/release-name'], undefined);
      assert.equal(await crdGone('temporagateways.tempora.dev'), true);
      const graphworkers = await established('graphworkers.tempora.dev');
      // A description this release's CRD changes, so that the upgrade can be seen.
      assert.notEqual(gatewayRefDescription(graphworkers), gatewayRefDescription(sources.get('graphworkers.tempora.dev')!));
      await applyAs(admin, graphWorker('kept'), 'test-user', 'graphworkers');
    });

    it('refuses the upgrade before the README commands: the CRDs lack the release ownership', function () {
      this.timeout(120_000);
      const r = helm.run('upgrade', RELEASE, CHART, '-n', NAMESPACE);
      assert.notEqual(r.status, 0, 'helm upgrade should fail');
      assert.match(
        r.stderr,
        /CustomResourceDefinition "\w+\.tempora\.dev" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata/,
      );
    });

    it('upgrades to the working tree after the README commands: every CRD of crds/ served, upgraded, owned, kept', async function () {
      this.timeout(120_000);
      const commands = readmeBlock('Upgrading from chart 0.1.0');
      // The commands name the release's name and namespace this test uses, and each CRD both charts have.
      assert.match(commands, new RegExp(`meta\\.helm\\.sh/release-name=${RELEASE} meta\\.helm\\.sh/release-namespace=${NAMESPACE}`));
      const previous = new Set(crdsOf(parseObjects(render(previousChart, '--include-crds'))).map((c) => c.metadata.name));
      for (const name of [...sources.keys()].filter((n) => previous.has(n))) assert.equal(commands.split(name).length - 1, 2, `labels and annotates ${name}`);
      const run = spawnSync('bash', ['-euo', 'pipefail', '-c', commands], { encoding: 'utf8', env: kubectlEnv });
      assert.equal(run.status, 0, `the README commands failed:\n${run.stdout}${run.stderr}`);

      helm.ok('upgrade', RELEASE, CHART, '-n', NAMESPACE);
      await assertInstalled(true);
      assert.equal(
        gatewayRefDescription(await getCrd('graphworkers.tempora.dev')),
        gatewayRefDescription(sources.get('graphworkers.tempora.dev')!),
        'the changed description',
      );
      const manifest = crdsOf(parseObjects(helm.ok('get', 'manifest', RELEASE, '-n', NAMESPACE))).map((c) => c.metadata.name);
      assert.deepEqual(manifest.sort(), [...sources.keys()].sort(), 'the release owns every CRD');
      // The custom resources are untouched, and the old kind is left for the migration (docs/operator.md).
      assert.equal((await getGraphWorker('kept')).spec.role, 'renderer');
      assert.equal((await getCrd('gateways.tempora.dev')).metadata.name, 'gateways.tempora.dev');
    });

    it('applies a changed CRD on a further upgrade: a new field and printer column', async function () {
      this.timeout(120_000);
      // Before: the API server refuses the field the schema lacks.
      await assert.rejects(createGraphWorker(graphWorker('noted', { note: 'hello' })), /unknown field "spec\.note"/);

      const changed = join(work, 'changed');
      cpSync(CHART, changed, { recursive: true });
      // cpSync copies the links (made absolute): replace each by the file, so that nothing writes through to crds/.
      for (const f of readdirSync(join(changed, 'files', 'crds'))) {
        const link = join(changed, 'files', 'crds', f);
        const text = readFileSync(link, 'utf8');
        rmSync(link);
        writeFileSync(link, text);
      }
      const file = join(changed, 'files', 'crds', 'graphworker.yaml');
      assert.ok(!lstatSync(file).isSymbolicLink());
      const crd = manifests(file)[0] as Crd;
      const version = crd.spec.versions[0]!;
      specProperties(crd).note = { type: 'string', description: 'added by the test' } as Schema;
      version.additionalPrinterColumns = [
        ...(version.additionalPrinterColumns ?? []),
        { name: 'Note', jsonPath: '.spec.note', type: 'string' } as { name: string; jsonPath: string },
      ];
      writeFileSync(file, stringify(crd));
      helm.ok('upgrade', RELEASE, changed, '-n', NAMESPACE);

      const live = await waitFor(
        'the changed GraphWorker CRD',
        async () => {
          const c = await established('graphworkers.tempora.dev');
          return specProperties(c).note ? c : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.ok(live.spec.versions[0]!.additionalPrinterColumns!.some((c) => c.name === 'Note' && c.jsonPath === '.spec.note'));
      await waitFor('spec.note accepted', () => createGraphWorker(graphWorker('noted', { note: 'hello' })), { timeoutMs: 30_000 });
      assert.equal((await getGraphWorker('noted')).spec.note, 'hello');
      // And back: the working tree's CRDs again.
      helm.ok('upgrade', RELEASE, CHART, '-n', NAMESPACE);
      await waitFor('the note field removed again', async () => !specProperties(await getCrd('graphworkers.tempora.dev')).note, { timeoutMs: 30_000 });
      await assertInstalled(true);
    });

    it('an upgrade with crds.enabled=false leaves the kept CRDs', async function () {
      this.timeout(120_000);
      helm.ok('upgrade', RELEASE, CHART, '-n', NAMESPACE, '--set', 'crds.enabled=false');
      assert.deepEqual(crdsOf(parseObjects(helm.ok('get', 'manifest', RELEASE, '-n', NAMESPACE))), []);
      for (const name of sources.keys()) await established(name);
      helm.ok('upgrade', RELEASE, CHART, '-n', NAMESPACE);
      await assertInstalled(true);
    });

    it('helm uninstall leaves the CRDs and the custom resources; with crds.keep=false it deletes them', async function () {
      this.timeout(180_000);
      helm.ok('uninstall', RELEASE, '-n', NAMESPACE);
      for (const name of sources.keys()) await established(name);
      assert.equal((await getGraphWorker('kept')).metadata.name, 'kept');

      // Installed again under the same name and namespace: Helm takes the kept CRDs over.
      helm.ok('install', RELEASE, CHART, '-n', NAMESPACE);
      await assertInstalled(true);
      // The README's way to let uninstall delete them: an upgrade to crds.keep=false first.
      helm.ok('upgrade', RELEASE, CHART, '-n', NAMESPACE, '--set', 'crds.keep=false');
      await assertInstalled(false);
      helm.ok('uninstall', RELEASE, '-n', NAMESPACE);
      for (const name of sources.keys()) await waitFor(`CRD ${name} deleted`, () => crdGone(name), { timeoutMs: 60_000, intervalMs: 250 });
    });
  });
});
