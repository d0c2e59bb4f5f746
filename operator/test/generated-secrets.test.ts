// Secrets whose keys the operator generates (reconcilers/generated-secrets.ts), on a real control plane with
// the operator running under its own RBAC: the platform chart's Secrets rendered by a real `helm template`
// and applied as GitOps tools do (server-side apply, and kubectl's client-side three-way merge), the
// keys filled once, every later apply of the same manifests leaving them as they are, a key someone gave
// never replaced, `helm upgrade` keeping what the operator made, and a TemporaGateway naming such a Secret.
// Tests run in order on one cluster.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Helm, parseObjects } from '../../test/helm/helm.ts';
import { binaryDir, K8S_VERSION } from '../../test/k8s/control-plane.ts';
import { waitFor } from '../../test/support/wait.ts';
import { isConflict, KubeClient } from '../src/kube/client.ts';
import { EventRecorder } from '../src/kube/events.ts';
import type { KubeObject, Secret } from '../src/kube/object.ts';
import * as R from '../src/kube/resources.ts';
import { createLogger } from '../src/log.ts';
import { GENERATED_SECRETS, type Operator } from '../src/operator.ts';
import { problemsOf, SECRET_RECHECK_MS } from '../src/reconcilers/gateway-secrets.ts';
import { GENERATE_ANNOTATION, GENERATED_SECRET_LABEL, GeneratedSecrets, planGeneration } from '../src/reconcilers/generated-secrets.ts';
import { applyAs, condition, counterSum, type OperatorCluster, startOperatorCluster, stopOperatorCluster, waitReady } from './cluster.ts';
import { fieldsAt, gateway, NS } from './fixtures.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHART = join(ROOT, 'charts', 'tempora');
const RELEASE = 'tempora';
/** What each of the chart's Secrets holds once the operator has filled it (default values). */
const FILLED: Record<string, string[]> = {
  'tempora-keys': ['ADMIN_KEY', 'SERVICE_KEY', 'SIMULATION_API_KEYS', 'WRITER_TOKENS'],
  'tempora-callback': ['callback-secret'],
  'tempora-postgresql': ['password', 'url', 'username'],
  'tempora-redis': ['password', 'url'],
};

type Data = Record<string, string>;
const decode = (data: Data | undefined): Data => Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
const encode = (data: Data): Data => Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]));

describe('Secrets the operator generates, applied as GitOps tools apply them', function () {
  this.timeout(120_000);
  let cluster: OperatorCluster;
  let admin: KubeClient;
  let op: Operator;
  let helm: Helm;
  let kubectlBinary: string;
  const dir = mkdtempSync(join(tmpdir(), 'tempora-generated-'));

  before(async function () {
    this.timeout(1_800_000);
    helm = Helm.build();
    const built = spawnSync('bash', [join(ROOT, 'test', 'k8s', 'build-binaries.sh'), 'kubectl'], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (built.status !== 0) throw new Error('building kubectl failed');
    kubectlBinary = join(binaryDir(), 'kubectl');
    cluster = await startOperatorCluster('generated');
    ({ admin, op } = cluster);
    helm.env = { KUBECONFIG: cluster.cp.kubeconfigPath };
  });

  after(async function () {
    this.timeout(60_000);
    await stopOperatorCluster(cluster ?? {});
    helm?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  function kubectl(...args: string[]): string {
    const r = spawnSync(kubectlBinary, ['--kubeconfig', cluster.cp.kubeconfigPath, ...args], { encoding: 'utf8' });
    assert.equal(r.status, 0, `kubectl ${args.join(' ')} failed:\n${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  /** The platform chart's Secrets as `helm template` renders them for `namespace` (no cluster access). */
  function renderSecrets(namespace: string, ...extra: string[]): { text: string; objects: KubeObject[] } {
    const text = helm.ok(
      'template',
      RELEASE,
      CHART,
      '--namespace',
      namespace,
      '--kube-version',
      K8S_VERSION,
      '--show-only',
      'templates/secrets.yaml',
      '--show-only',
      'templates/postgresql.yaml',
      '--show-only',
      'templates/redis.yaml',
      ...extra,
    );
    const objects = parseObjects(text).filter((o) => o.kind === 'Secret');
    return { text: objects.map((o) => JSON.stringify(o)).join('\n'), objects };
  }

  async function createNamespace(name: string): Promise<void> {
    await applyAs(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  }

  async function dataOf(namespace: string, name: string): Promise<Data> {
    return decode((await admin.get(R.Secret, namespace, name)).data);
  }

  async function allData(namespace: string): Promise<Map<string, Data>> {
    return new Map(await Promise.all(Object.keys(FILLED).map(async (name) => [name, await dataOf(namespace, name)] as const)));
  }

  /** Waits until every Secret of the chart holds every key it should. */
  function filled(namespace: string): Promise<Map<string, Data>> {
    return waitFor(
      `the Secrets of ${namespace} filled`,
      async () => {
        const all = await allData(namespace);
        return [...all].every(([name, data]) => JSON.stringify(Object.keys(data).sort()) === JSON.stringify(FILLED[name])) ? all : undefined;
      },
      { timeoutMs: 30_000 },
    );
  }

  /** Waits until the operator has had nothing to do for a second. */
  async function settled(): Promise<void> {
    let quietSince = Date.now();
    await waitFor(
      'the operator to settle',
      async () => {
        if (!op.idle()) quietSince = Date.now();
        return Date.now() - quietSince > 1000;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
  }

  const secretPatches = () => counterSum(op, 'tempora_operator_api_writes_total', (l) => l.resource === 'secrets' && l.verb === 'patch');

  describe('applied server-side (Argo CD with ServerSideApply, Flux)', function () {
    const ns = 'gitops-ssa';
    let first: Map<string, Data>;

    it('fills each generated key once: random keys of the length asked, the URLs composed from their passwords', async function () {
      await createNamespace(ns);
      const { objects } = renderSecrets(ns);
      assert.deepEqual(objects.map((o) => o.metadata.name).sort(), Object.keys(FILLED).sort());
      for (const o of objects) await applyAs(admin, o, 'argocd-controller');
      first = await filled(ns);
      const keys = first.get('tempora-keys')!;
      assert.match(keys.SERVICE_KEY!, /^[A-Za-z0-9]{48}$/);
      assert.match(keys.ADMIN_KEY!, /^[A-Za-z0-9]{48}$/);
      assert.notEqual(keys.SERVICE_KEY, keys.ADMIN_KEY);
      assert.match(keys.WRITER_TOKENS!, /^tempora:[A-Za-z0-9]{48}$/);
      assert.match(keys.SIMULATION_API_KEYS!, /^tempora:[A-Za-z0-9]{48}$/);
      assert.match(first.get('tempora-callback')!['callback-secret']!, /^[A-Za-z0-9]{64}$/);
      const pg = first.get('tempora-postgresql')!;
      assert.match(pg.password!, /^[A-Za-z0-9]{32}$/);
      assert.equal(pg.username, 'tempora', 'a rendered key is left as it is');
      assert.equal(pg.url, `postgres://tempora:${pg.password}@tempora-postgresql.${ns}.svc:5432/tempora`);
      const redis = first.get('tempora-redis')!;
      assert.equal(redis.url, `redis://:${redis.password}@tempora-redis.${ns}.svc:6379/0`);
      assert.notEqual(redis.password, pg.password);
      // The filled keys belong to the operator's field manager, the rest to the tool that applied them.
      const managers = (await admin.get(R.Secret, ns, 'tempora-keys')).metadata.managedFields ?? [];
      assert.deepEqual(
        Object.keys(fieldsAt(managers.find((m) => m.manager === 'tempora-operator')?.fieldsV1, 'f:data') ?? {})
          .filter((f) => f.startsWith('f:'))
          .sort(),
        FILLED['tempora-keys']!.map((k) => `f:${k}`),
      );
      await waitFor(
        'a Generated Event',
        async () => {
          const events = await admin.list(R.Event, { fieldSelector: 'involvedObject.name=tempora-keys,involvedObject.kind=Secret' }, ns);
          return events.items.some((e) => e.reason === 'Generated' && e.message === 'generated ADMIN_KEY, SERVICE_KEY, SIMULATION_API_KEYS, WRITER_TOKENS');
        },
        { timeoutMs: 30_000 },
      );
    });

    it('a second rendering is the same manifest, and applying it again server-side changes no key and makes no write', async function () {
      await settled();
      const patches = await secretPatches();
      const again = renderSecrets(ns);
      assert.equal(again.text, renderSecrets(ns).text);
      for (const o of again.objects) await applyAs(admin, o, 'argocd-controller');
      await settled();
      assert.deepEqual(await allData(ns), first);
      assert.equal(await secretPatches(), patches, 'the operator wrote nothing');
    });

    it('a client-side kubectl apply of the same manifests over them changes no key', async function () {
      const file = join(dir, 'ssa.yaml');
      writeFileSync(file, renderSecrets(ns).text);
      kubectl('apply', '-f', file);
      kubectl('apply', '-f', file);
      await settled();
      assert.deepEqual(await allData(ns), first);
    });
  });

  describe('applied client-side (kubectl apply, Argo CD by default): a three-way merge', function () {
    const ns = 'gitops-csa';
    let first: Map<string, Data>;

    it('the filled keys are not in the last applied configuration, and a re-apply does not remove them', async function () {
      await createNamespace(ns);
      const file = join(dir, 'csa.yaml');
      writeFileSync(file, renderSecrets(ns).text);
      kubectl('apply', '-f', file);
      first = await filled(ns);
      const live = await admin.get(R.Secret, ns, 'tempora-postgresql');
      const lastApplied: Secret = JSON.parse(live.metadata.annotations!['kubectl.kubernetes.io/last-applied-configuration']!);
      assert.deepEqual(Object.keys(decode(lastApplied.data)), ['username'], 'the manifest holds no generated key');
      writeFileSync(file, renderSecrets(ns).text);
      kubectl('apply', '-f', file);
      await settled();
      assert.deepEqual(await allData(ns), first);
      // And switching to server-side apply (Argo CD's ServerSideApply=true on an existing application).
      kubectl('apply', '--server-side', '--force-conflicts', '--field-manager', 'argocd-controller', '-f', file);
      await settled();
      assert.deepEqual(await allData(ns), first);
    });
  });

  describe('never replaces a key that exists', function () {
    const ns = 'gitops-given';

    it('values given in the chart are rendered, and only the others generated', async function () {
      await createNamespace(ns);
      const { objects } = renderSecrets(
        ns,
        '--set',
        'secrets.keys.serviceKey=given-service-key-0123456789',
        '--set',
        'postgresql.password=given-password-0123456789',
      );
      const pg = objects.find((o) => o.metadata.name === 'tempora-postgresql')!;
      assert.equal(pg.metadata.annotations?.[GENERATE_ANNOTATION], undefined, 'nothing to generate for PostgreSQL');
      assert.equal(pg.metadata.labels?.[GENERATED_SECRET_LABEL], undefined, 'so the operator does not watch it');
      for (const o of objects) await applyAs(admin, o, 'flux');
      const all = await filled(ns);
      assert.equal(all.get('tempora-keys')!.SERVICE_KEY, 'given-service-key-0123456789');
      assert.match(all.get('tempora-keys')!.ADMIN_KEY!, /^[A-Za-z0-9]{48}$/);
      assert.deepEqual(all.get('tempora-postgresql'), {
        username: 'tempora',
        password: 'given-password-0123456789',
        url: `postgres://tempora:given-password-0123456789@tempora-postgresql.${ns}.svc:5432/tempora`,
      });
    });

    it('a key changed by hand stays as it is; a key deleted is made anew; the composed URL follows a password written first', async function () {
      const name = 'tempora-redis';
      await admin.request('PATCH', R.objectPath(R.Secret, ns, name), {
        body: { data: encode({ password: 'rotated-by-hand-0123456789' }) },
        contentType: 'application/merge-patch+json',
      });
      await settled();
      const rotated = await dataOf(ns, name);
      assert.equal(rotated.password, 'rotated-by-hand-0123456789');
      assert.notEqual(rotated.url, `redis://:rotated-by-hand-0123456789@tempora-redis.${ns}.svc:6379/0`, 'the URL is not rewritten either');
      await admin.request('PATCH', R.objectPath(R.Secret, ns, name), { body: { data: { url: null } }, contentType: 'application/merge-patch+json' });
      await waitFor('the URL made anew', async () => (await dataOf(ns, name)).url === `redis://:rotated-by-hand-0123456789@tempora-redis.${ns}.svc:6379/0`, {
        timeoutMs: 30_000,
      });
      assert.equal((await dataOf(ns, name)).password, 'rotated-by-hand-0123456789');
    });

    it('a Secret the user writes with some of the keys: those are kept, the others filled', async function () {
      await applyAs(admin, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: 'mixed',
          namespace: ns,
          labels: { [GENERATED_SECRET_LABEL]: 'true' },
          annotations: { [GENERATE_ANNOTATION]: JSON.stringify({ a: '{random:16}', b: '{random:16}', c: 'x-{a}-{b}' }) },
        },
        data: encode({ a: 'mine' }),
      });
      const data = await waitFor(
        'b and c',
        async () => {
          const d = await dataOf(ns, 'mixed');
          return d.b && d.c ? d : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.equal(data.a, 'mine');
      assert.equal(data.c, `x-mine-${data.b}`);
    });

    it('a key written between its read and its write: the write is refused and the key kept', async function () {
      const secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'raced', namespace: ns, annotations: { [GENERATE_ANNOTATION]: '{"k":"{random:16}"}' } },
      };
      await applyAs(admin, secret);
      // Someone writes k right after the reconciler's read (unlabelled: the running operator leaves it alone).
      class Racing extends KubeClient {
        override async getOrUndefined<T extends KubeObject>(r: R.ResourceType<T>, namespace: string, name: string): Promise<T | undefined> {
          const read = await super.getOrUndefined(r, namespace, name);
          await admin.request('PATCH', R.objectPath(R.Secret, namespace, name), {
            body: { data: encode({ k: 'theirs' }) },
            contentType: 'application/merge-patch+json',
          });
          return read;
        }
      }
      const log = createLogger('silent');
      const client = new Racing(admin.connection);
      const ctx = { client, log, events: new EventRecorder(client, log, 'test') };
      const cached = await admin.get(R.Secret, ns, 'raced');
      await assert.rejects(new GeneratedSecrets().reconcile(cached, ctx), (err) => isConflict(err));
      assert.deepEqual(await dataOf(ns, 'raced'), { k: 'theirs' });
    });
  });

  describe('what the operator watches, and what it cannot generate', function () {
    const ns = 'gitops-edge';

    it('watches only labelled Secrets: an annotation alone generates nothing; the label then does', async function () {
      await createNamespace(ns);
      const secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'unlabelled', namespace: ns, annotations: { [GENERATE_ANNOTATION]: '{"k":"{random:16}"}' } },
      };
      await applyAs(admin, secret);
      await applyAs(admin, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'other', namespace: ns } });
      await settled();
      assert.deepEqual(await dataOf(ns, 'unlabelled'), {});
      const cached = op.informers
        .get(GENERATED_SECRETS)!
        .list()
        .map((s) => `${s.metadata.namespace}/${s.metadata.name}`);
      assert.ok(!cached.includes(`${ns}/unlabelled`) && !cached.includes(`${ns}/other`), 'unlabelled Secrets are not even listed');
      assert.ok(
        op.informers
          .get(GENERATED_SECRETS)!
          .list()
          .every((s) => Object.values(s.data ?? {}).every((v) => v === '')),
        'the cache keeps key names, not values',
      );
      await applyAs(admin, { ...secret, metadata: { ...secret.metadata, labels: { [GENERATED_SECRET_LABEL]: 'true' } } });
      await waitFor('k filled', async () => /^[A-Za-z0-9]{16}$/.test((await dataOf(ns, 'unlabelled')).k ?? ''), { timeoutMs: 30_000 });
    });

    it('a template it cannot make: a Warning Event once, and the keys it can make are made', async function () {
      const templates = { ok: '{random:20}', short: '{random:4}', odd: '{not a key}', orphan: '{nowhere}', loop1: '{loop2}', loop2: '{loop1}' };
      await applyAs(admin, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: 'bad',
          namespace: ns,
          labels: { [GENERATED_SECRET_LABEL]: 'true' },
          annotations: { [GENERATE_ANNOTATION]: JSON.stringify(templates) },
        },
      });
      await waitFor('ok filled', async () => (await dataOf(ns, 'bad')).ok, { timeoutMs: 30_000 });
      const warnings = () => admin.list(R.Event, { fieldSelector: 'involvedObject.name=bad,involvedObject.kind=Secret,type=Warning' }, ns);
      const warning = await waitFor('a Warning Event', async () => (await warnings()).items[0], { timeoutMs: 30_000 });
      assert.equal(warning.reason, 'GenerationFailed');
      assert.equal(
        warning.message,
        'cannot generate short: {random:4} asks for 4 characters; from 16 to 1024 are made; odd: {not a key} is neither {random:N} nor {<key>}; orphan: needs nowhere, which the Secret neither holds nor can generate first; loop1: needs loop2, which the Secret neither holds nor can generate first; loop2: needs loop1, which the Secret neither holds nor can generate first',
      );
      op.resyncAll();
      await settled();
      assert.equal((await warnings()).items.length, 1, 'told once for this version of the Secret');
      assert.deepEqual(Object.keys(await dataOf(ns, 'bad')), ['ok']);

      await applyAs(admin, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'not-json', namespace: ns, labels: { [GENERATED_SECRET_LABEL]: 'true' }, annotations: { [GENERATE_ANNOTATION]: 'k=16' } },
      });
      await waitFor(
        'a Warning for the annotation',
        async () => {
          const events = await admin.list(R.Event, { fieldSelector: 'involvedObject.name=not-json,involvedObject.kind=Secret,type=Warning' }, ns);
          return events.items.some((e) => e.message === `cannot generate the annotation ${GENERATE_ANNOTATION} is not a JSON object of templates (strings)`);
        },
        { timeoutMs: 30_000 },
      );
    });

    it('an immutable Secret is not written, and says why', async function () {
      await applyAs(admin, {
        apiVersion: 'v1',
        kind: 'Secret',
        immutable: true,
        metadata: {
          name: 'frozen',
          namespace: ns,
          labels: { [GENERATED_SECRET_LABEL]: 'true' },
          annotations: { [GENERATE_ANNOTATION]: '{"k":"{random:16}"}' },
        },
      });
      await waitFor(
        'a Warning Event',
        async () => {
          const events = await admin.list(R.Event, { fieldSelector: 'involvedObject.name=frozen,involvedObject.kind=Secret,type=Warning' }, ns);
          return events.items.some((e) => e.message === 'cannot generate k: the Secret is immutable');
        },
        { timeoutMs: 30_000 },
      );
      assert.deepEqual(await dataOf(ns, 'frozen'), {});
    });
  });

  describe("a TemporaGateway's report of such a Secret", function () {
    const labelled = (data: Data, templates: Data, label = true): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 's',
        namespace: NS,
        labels: label ? { [GENERATED_SECRET_LABEL]: 'true' } : {},
        annotations: { [GENERATE_ANNOTATION]: JSON.stringify(templates) },
      },
      data: encode(data),
    });
    const refs = [{ field: 'spec.database', secret: 's', keys: ['url'] }];

    it('keys awaiting generation are reported as awaited, not as missing; keys that cannot be made, as such', function () {
      assert.deepEqual(problemsOf('s', refs, labelled({}, { password: '{random:16}', url: 'db://{password}' })), [
        "Secret s (spec.database) awaits the operator's generation of password, url",
      ]);
      assert.deepEqual(problemsOf('s', refs, labelled({ password: 'p' }, { password: '{random:16}', url: 'db://{password}' })), [
        "Secret s (spec.database) awaits the operator's generation of url",
      ]);
      assert.deepEqual(problemsOf('s', refs, labelled({ password: 'p', url: 'u' }, { password: '{random:16}', url: 'db://{password}' })), []);
      assert.deepEqual(problemsOf('s', refs, labelled({}, { url: 'db://{password}' })), [
        'Secret s (spec.database): cannot generate url: needs password, which the Secret neither holds nor can generate first',
        'Secret s (spec.database) has no url',
      ]);
      assert.deepEqual(problemsOf('s', refs, labelled({}, { url: '{random:16}' }, false)), [
        `Secret s (spec.database) asks for url in ${GENERATE_ANNOTATION} but lacks the label ${GENERATED_SECRET_LABEL}=true, so nothing generates them`,
      ]);
      assert.deepEqual(planGeneration(labelled({}, { b: '{a}', a: '{random:16}' })).fill, ['a', 'b'], 'a key after those it names');
    });

    it('a TemporaGateway whose Secret is labelled late: Degraded says why, and clears as soon as the operator fills it', async function () {
      this.timeout(SECRET_RECHECK_MS);
      const { ingress: _none, ...spec } = gateway('gen', {
        database: { secretName: 'gen-db', key: 'url' },
        redis: undefined,
        services: undefined,
        secrets: { keys: 'gen-db' },
      }).spec!;
      const secret = labelled({}, { password: '{random:32}', url: 'postgres://tempora:{password}@db:5432/tempora' }, false);
      secret.metadata.name = 'gen-db';
      await applyAs(admin, secret);
      await applyAs(admin, { ...gateway('gen'), spec });
      const degraded = async () => condition(await admin.get(R.TemporaGateway, NS, 'gen'), 'Degraded');
      await waitFor(
        'Degraded for the unlabelled Secret',
        async () => /asks for password, url in tempora.dev\/generate but lacks the label/.test((await degraded())?.message ?? ''),
        { timeoutMs: 30_000 },
      );
      // Labelled now: the operator fills it, and that reconciles the TemporaGateway at once, not at its next minute's check.
      const labelledAt = Date.now();
      await applyAs(admin, { ...secret, metadata: { ...secret.metadata, labels: { [GENERATED_SECRET_LABEL]: 'true' } } });
      await waitReady(admin, R.TemporaGateway, NS, 'gen', SECRET_RECHECK_MS - 15_000);
      assert.equal((await degraded())?.status, 'False');
      assert.ok(Date.now() - labelledAt < SECRET_RECHECK_MS - 15_000);
      assert.match((await dataOf(NS, 'gen-db')).url!, /^postgres:\/\/tempora:[A-Za-z0-9]{32}@db:5432\/tempora$/);
    });
  });

  describe('helm install and upgrade (lookup works there)', function () {
    const ns = 'helm-release';

    it('keeps what the operator generated, and a value once given and then removed from values, across upgrades', async function () {
      await createNamespace(ns);
      // A release whose manifest held the password, as every release of the chart's earlier versions did.
      helm.ok('install', RELEASE, CHART, '--namespace', ns, '--set', 'postgresql.password=given-password-0123456789');
      const installed = await filled(ns);
      assert.equal(installed.get('tempora-postgresql')!.password, 'given-password-0123456789');
      helm.ok('upgrade', RELEASE, CHART, '--namespace', ns);
      await settled();
      assert.deepEqual(await allData(ns), installed, 'the upgrade renders the live values: nothing removed, nothing regenerated');
      helm.ok('upgrade', RELEASE, CHART, '--namespace', ns, '--set', 'logLevel=debug');
      await settled();
      assert.deepEqual(await allData(ns), installed);
      helm.ok('uninstall', RELEASE, '--namespace', ns);
    });
  });
});
