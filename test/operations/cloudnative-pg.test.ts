// The CloudNativePG manifests of docs/examples/ against CloudNativePG's own CRDs (1.28.0, from the Go module
// proxy: cloudnative-pg-crds.sh), installed on a real API server (test/k8s/control-plane.ts) and sent in a
// server-side dry run with strict field validation, as `kubectl apply --dry-run=server` sends them; and
// docs/operations.md's chart command pointing the TemporaGateway at CloudNativePG's app Secret, run with a
// real helm and kubectl against the same API server.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { CRD_DIR } from '../../operator/test/cluster.ts';
import { Helm } from '../helm/helm.ts';
import { binaryDir, ControlPlane } from '../k8s/control-plane.ts';
import { block, ROOT, runBlock, variables } from './operations-doc.ts';

const EXAMPLES = join(ROOT, 'docs', 'examples');
const CNPG_EXAMPLES = ['cloudnative-pg.yaml', 'cloudnative-pg-recovery.yaml'];

describe('operations: the CloudNativePG manifests against CloudNativePG 1.28.0 CRDs', function () {
  let cp: ControlPlane | undefined;
  let helm: Helm | undefined;
  let env: NodeJS.ProcessEnv;
  const dir = mkdtempSync(join(tmpdir(), 'tempora-cnpg-'));

  const kubectl = (...args: string[]) => spawnSync('kubectl', args, { env, encoding: 'utf8', cwd: dir });
  const kubectlOk = (...args: string[]) => {
    const run = kubectl(...args);
    assert.equal(run.status, 0, `kubectl ${args.join(' ')}: ${run.stderr}${run.stdout}`);
    return run.stdout;
  };
  /** `kubectl apply --dry-run=server` (dryRun=All, fieldValidation=Strict) of a manifest; kubectl's result. */
  const dryRun = (manifest: string) => {
    const file = join(dir, 'manifest.yaml');
    writeFileSync(file, manifest);
    return kubectl('apply', '--server-side', '--dry-run=server', '--validate=strict', '-f', file);
  };

  before(async function () {
    this.timeout(30 * 60_000); // a clean machine builds kube-apiserver and kubectl, and fetches CloudNativePG's module
    const crds = spawnSync('bash', [join(ROOT, 'test', 'operations', 'cloudnative-pg-crds.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    assert.equal(crds.status, 0, 'fetching the CloudNativePG CRDs');
    const built = spawnSync('bash', [join(ROOT, 'test', 'k8s', 'build-binaries.sh'), 'kubectl'], { stdio: ['ignore', 'inherit', 'inherit'] });
    assert.equal(built.status, 0, 'building kubectl');
    helm = Helm.build();
    cp = await ControlPlane.started();
    env = { ...process.env, KUBECONFIG: cp.kubeconfigPath, PATH: [binaryDir(), dirname(helm.binary), process.env.PATH].join(':') };
    helm.env = { KUBECONFIG: cp.kubeconfigPath };
    const cnpgDir = crds.stdout.trim();
    // CloudNativePG's Cluster CRD is too large for client-side apply's last-applied annotation.
    kubectlOk('apply', '--server-side', '-f', cnpgDir, '-f', CRD_DIR);
    const names = [...readdirSync(cnpgDir).map((f) => f.replace(/^postgresql\.cnpg\.io_(\w+)\.yaml$/, '$1.postgresql.cnpg.io'))];
    kubectlOk('wait', '--for=condition=Established', '--timeout=60s', ...names.map((n) => `crd/${n}`), 'crd/temporagateways.tempora.dev');
    kubectlOk('create', 'namespace', 'tempora');
  });

  after(async function () {
    this.timeout(60_000);
    await cp?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const example of CNPG_EXAMPLES) {
    it(`accepts docs/examples/${example} in a server-side dry run`, function () {
      const run = kubectl('apply', '--server-side', '--dry-run=server', '--validate=strict', '-f', join(EXAMPLES, example));
      assert.equal(run.status, 0, `${run.stderr}${run.stdout}`);
      assert.match(run.stdout, /cluster\.postgresql\.cnpg\.io\/tempora-db\S* serverside-applied \(server dry run\)/);
    });
  }

  it('the dry run is not vacuous: a misspelt field, a wrong type and an unknown method are refused', function () {
    const [cluster, scheduled] = parseAllDocuments(readFileSync(join(EXAMPLES, 'cloudnative-pg.yaml'), 'utf8')).map((d) => d.toJS());
    const misspelt = structuredClone(cluster);
    misspelt.spec.backup.barmanObjectStore.destinationPth = misspelt.spec.backup.barmanObjectStore.destinationPath;
    delete misspelt.spec.backup.barmanObjectStore.destinationPath;
    const refused = dryRun(stringify(misspelt));
    assert.notEqual(refused.status, 0, 'a misspelt field refused');
    assert.match(refused.stderr, /destinationPth|destinationPath/);
    const wrongType = structuredClone(cluster);
    wrongType.spec.instances = 'three';
    assert.notEqual(dryRun(stringify(wrongType)).status, 0, 'instances as a string refused');
    const unknownMethod = structuredClone(scheduled);
    unknownMethod.spec.method = 'pg_dump';
    const method = dryRun(stringify(unknownMethod));
    assert.notEqual(method.status, 0, 'a backup method CloudNativePG does not have refused');
    assert.match(method.stderr, /spec\.method/);
  });

  it("points the TemporaGateway at CloudNativePG's app Secret with docs/operations.md's chart command", function () {
    this.timeout(120_000);
    runBlock(`${variables()}${block('externalDatabase.key=uri')}`, {
      cwd: ROOT,
      env: { ...env, HELM_CACHE_HOME: join(helm!.home, 'cache'), HELM_CONFIG_HOME: join(helm!.home, 'config'), HELM_DATA_HOME: join(helm!.home, 'data') },
    });
    const shown = block("jsonpath='{.spec.database}'");
    const said = runBlock(`${variables()}${shown}`, { cwd: dir, env });
    assert.deepEqual(JSON.parse(said), { secretName: 'tempora-db-app', key: 'uri' });
    assert.ok(shown.includes(`# ${said.trim()}`), `the page shows what the command prints: ${said}`);
  });
});
