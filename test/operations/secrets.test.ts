// docs/operations.md's Secret commands with a real kubectl against a real API server
// (test/k8s/control-plane.ts): the Secrets a release holds, made as the chart and the operator make them
// (the signing key owned by its TemporaGateway, generated keys written by the operator's field manager),
// backed up with the page's command, restored with its commands into another namespace, and read back.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CRD_DIR } from '../../operator/test/cluster.ts';
import { binaryDir, ControlPlane } from '../k8s/control-plane.ts';
import { block, ROOT, runBlock, variables } from './operations-doc.ts';

const NS = 'tempora';
const RESTORED = 'tempora-restored';
const HELM_LABELS = { 'app.kubernetes.io/managed-by': 'Helm', 'app.kubernetes.io/instance': 'tempora' };
const HELM_ANNOTATIONS = { 'meta.helm.sh/release-name': 'tempora', 'meta.helm.sh/release-namespace': NS };
const URL_TEMPLATE = `postgres://tempora:{password}@tempora-postgresql.${NS}.svc:5432/tempora`;

interface Secret {
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: unknown[];
    managedFields?: Array<{ manager: string; fieldsV1?: { 'f:data'?: Record<string, unknown> } }>;
  };
  type?: string;
  data?: Record<string, string>;
}

const b64 = (value: string) => Buffer.from(value).toString('base64');

describe('operations: the Secrets backed up and restored as docs/operations.md says', function () {
  let cp: ControlPlane | undefined;
  let env: NodeJS.ProcessEnv;
  const dir = mkdtempSync(join(tmpdir(), 'tempora-secrets-'));
  const kubectl = (input: string | undefined, ...args: string[]) => {
    const run = spawnSync('kubectl', args, { env, input, encoding: 'utf8', cwd: dir });
    assert.equal(run.status, 0, `kubectl ${args.join(' ')}: ${run.stderr}${run.stdout}`);
    return run.stdout;
  };
  const secret = (namespace: string, name: string) =>
    JSON.parse(kubectl(undefined, '-n', namespace, 'get', 'secret', name, '--show-managed-fields', '-o', 'json')) as Secret;
  /** Applies an object as `manager` (server-side), as the chart (helm) or the operator writes it. */
  const applyAs = (manager: string, object: object) => kubectl(JSON.stringify(object), 'apply', '--server-side', `--field-manager=${manager}`, '-f', '-');

  before(async function () {
    this.timeout(30 * 60_000); // builds kube-apiserver and kubectl on a clean machine
    const built = spawnSync('bash', [join(ROOT, 'test', 'k8s', 'build-binaries.sh'), 'kubectl'], { stdio: ['ignore', 'inherit', 'inherit'] });
    assert.equal(built.status, 0, 'building kubectl');
    cp = await ControlPlane.started();
    env = { ...process.env, KUBECONFIG: cp.kubeconfigPath, PATH: [binaryDir(), process.env.PATH].join(':') };
    kubectl(undefined, 'apply', '--server-side', '-f', join(CRD_DIR, 'temporagateway.yaml'));
    kubectl(undefined, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/temporagateways.tempora.dev');
    kubectl(undefined, 'create', 'namespace', NS);

    // The release as the chart and the operator leave it.
    const gateway = JSON.parse(
      kubectl(
        JSON.stringify({
          apiVersion: 'tempora.dev/v1alpha1',
          kind: 'TemporaGateway',
          metadata: { name: 'tempora', namespace: NS },
          spec: { image: { version: '0.1.0' } },
        }),
        'create',
        '-f',
        '-',
        '-o',
        'json',
      ),
    ) as { metadata: { uid: string } };
    const owner = {
      apiVersion: 'tempora.dev/v1alpha1',
      kind: 'TemporaGateway',
      name: 'tempora',
      uid: gateway.metadata.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
    applyAs('tempora-operator', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'tempora-signing-key', namespace: NS, ownerReferences: [owner] },
      type: 'Opaque',
      data: { JWT_PRIVATE_KEY: b64('-----BEGIN PRIVATE KEY-----\nsigning\n-----END PRIVATE KEY-----\n') },
    });
    const generated = (name: string, generate: Record<string, string>) =>
      applyAs('helm', {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name,
          namespace: NS,
          labels: { ...HELM_LABELS, 'tempora.dev/generated-secret': 'true' },
          annotations: { ...HELM_ANNOTATIONS, 'tempora.dev/generate': JSON.stringify(generate) },
        },
        type: 'Opaque',
      });
    generated('tempora-keys', { SERVICE_KEY: '{random:48}', ADMIN_KEY: '{random:48}' });
    applyAs('tempora-operator', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'tempora-keys', namespace: NS },
      data: { SERVICE_KEY: b64('service-key-0123456789'), ADMIN_KEY: b64('admin-key-0123456789') },
    });
    generated('tempora-callback', { secret: '{random:48}' });
    applyAs('tempora-operator', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'tempora-callback', namespace: NS },
      data: { secret: b64('callback-0123456789') },
    });
    generated('tempora-postgresql', { password: '{random:32}', url: URL_TEMPLATE });
    applyAs('tempora-operator', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'tempora-postgresql', namespace: NS },
      data: { password: b64('pw0123456789'), url: b64(URL_TEMPLATE.replace('{password}', 'pw0123456789')) },
    });
    // A value given in the chart's values, written by helm: kept as it is.
    applyAs('helm', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 'tempora-providers',
        namespace: NS,
        labels: HELM_LABELS,
        annotations: { ...HELM_ANNOTATIONS, 'kubectl.kubernetes.io/last-applied-configuration': '{"data":"secret"}' },
      },
      type: 'Opaque',
      data: { GEMINI_API_KEY: b64('gemini-0123456789') },
    });
  });

  after(async function () {
    this.timeout(60_000);
    await cp?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('backs up every Secret that matters, without what the API server set, and restores them as the operator wrote them', function () {
    const names = ['tempora-signing-key', 'tempora-keys', 'tempora-callback', 'tempora-postgresql', 'tempora-providers'];
    const originals = new Map(names.map((n) => [n, secret(NS, n)]));

    // The backup, as the page gives it (tempora-billing does not exist: --ignore-not-found).
    runBlock(`${variables()}${block('> tempora-secrets.json')}`, { cwd: dir, env });
    const backup = JSON.parse(readFileSync(join(dir, 'tempora-secrets.json'), 'utf8')) as { kind: string; items: Secret[] };
    assert.equal(backup.kind, 'List');
    assert.deepEqual(backup.items.map((s) => s.metadata.name).sort(), [...names].sort());
    for (const item of backup.items) {
      assert.deepEqual(Object.keys(item.metadata).sort(), ['annotations', 'labels', 'name'], `${item.metadata.name}: only name, labels and annotations kept`);
      assert.ok(
        !('kubectl.kubernetes.io/last-applied-configuration' in (item.metadata.annotations ?? {})),
        'no last-applied configuration (it may hold the values)',
      );
      assert.deepEqual(item.data, originals.get(item.metadata.name)!.data, `${item.metadata.name}: its data`);
    }

    // The restore into another namespace, then the bundled PostgreSQL's url removed for the operator to make again.
    const restore = block('--field-manager=tempora-operator');
    assert.match(restore, /tempora-secrets\.json/);
    runBlock(`NS=${RESTORED}\n${restore}`, { cwd: dir, env });
    runBlock(`NS=${RESTORED}\nRELEASE=tempora\n${block('/data/url')}`, { cwd: dir, env });

    for (const name of names) {
      const [before, after] = [originals.get(name)!, secret(RESTORED, name)];
      const expected = name === 'tempora-postgresql' ? { password: before.data!.password } : before.data;
      assert.deepEqual(after.data, expected, `${name}: the data restored`);
      assert.equal(after.metadata.ownerReferences, undefined, `${name}: no owner that does not exist here`);
      for (const [k, v] of Object.entries(before.metadata.labels ?? {})) assert.equal(after.metadata.labels?.[k], v, `${name}: label ${k}`);
      // What the chart's lookup reads (tempora.keptValue): the keys were written by the operator's field manager.
      const operatorKeys = Object.keys((after.metadata.managedFields ?? []).find((f) => f.manager === 'tempora-operator')?.fieldsV1?.['f:data'] ?? {});
      assert.deepEqual(
        operatorKeys.sort(),
        Object.keys(expected ?? {})
          .map((k) => `f:${k}`)
          .sort(),
        `${name}: the operator's keys`,
      );
    }
    // The annotation the operator makes the url again from came back with it.
    assert.equal(JSON.parse(secret(RESTORED, 'tempora-postgresql').metadata.annotations!['tempora.dev/generate']!).url, URL_TEMPLATE);
  });
});
