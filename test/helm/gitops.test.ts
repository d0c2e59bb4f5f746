// The platform chart under GitOps: Argo CD (and any pipeline like it) renders with `helm template` (no
// cluster, so no lookup) at every sync and apply what comes out. Two renderings must therefore be the same
// bytes, and nothing in them may be drawn at render time: a generated credential is left out of the
// manifest and named in its Secret's tempora.dev/generate annotation, for the operator to fill once
// (operator/test/generated-secrets.test.ts applies these manifests to a real API server, twice).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import { GENERATE_ANNOTATION, GENERATED_SECRET_LABEL, planGeneration } from '../../operator/src/reconcilers/generated-secrets.ts';
import { K8S_VERSION } from '../k8s/control-plane.ts';
import { Helm, parseObjects } from './helm.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const CHART = join(HERE, '..', '..', 'charts', 'tempora');
const TEMPLATES = join(CHART, 'templates');
const NAMESPACE = 'tempora';
/** Sprig and Helm functions whose result differs from one rendering to the next. */
const NONDETERMINISTIC = [
  'randAlphaNum',
  'randAlpha',
  'randNumeric',
  'randAscii',
  'randBytes',
  'randInt',
  'uuidv4',
  'now',
  'genCA',
  'genCAWithKey',
  'genPrivateKey',
  'genSelfSignedCert',
  'genSelfSignedCertWithKey',
  'genSignedCert',
  'genSignedCertWithKey',
  'htpasswd',
  'bcrypt',
  'encryptAES',
  'shuffle',
];

type Secret = KubeObject & { data?: Record<string, string> };
const decoded = (s: Secret) => Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));

describe('helm chart tempora under GitOps (helm template at every sync)', function () {
  this.timeout(120_000);
  let helm: Helm;
  const renderings: [string, string[]][] = [
    ['the default values', []],
    ['the values file setting every value', ['-f', join(HERE, 'platform-values-full.yaml')]],
    ...readdirSync(join(CHART, 'examples')).map((f): [string, string[]] => [`examples/${f}`, ['-f', join(CHART, 'examples', f)]]),
    ['the default values with the Prometheus Operator served', ['--api-versions', 'monitoring.coreos.com/v1/PrometheusRule']],
  ];

  before(function () {
    this.timeout(1_800_000);
    helm = Helm.build();
  });

  after(() => helm?.dispose());

  const render = (args: string[]) => helm.ok('template', 'tempora', CHART, '--namespace', NAMESPACE, '--kube-version', K8S_VERSION, ...args);

  for (const [what, args] of renderings) {
    it(`renders the same bytes twice with ${what}`, function () {
      const first = render(args);
      assert.ok(first.includes('kind: TemporaGateway'), 'the platform is rendered');
      assert.equal(render(args), first);
    });
  }

  it('no template calls a function whose result changes between renderings', function () {
    const calls = readdirSync(TEMPLATES).flatMap((f) => {
      const text = readFileSync(join(TEMPLATES, f), 'utf8');
      return NONDETERMINISTIC.filter((fn) => new RegExp(`\\b${fn}\\b`).test(text)).map((fn) => `${f}: ${fn}`);
    });
    assert.deepEqual(calls, []);
  });

  it('with the default values, the Secrets hold no credential: each is named for the operator to generate', function () {
    const secrets = parseObjects(render([])).filter((o): o is Secret => o.kind === 'Secret');
    const byName = new Map(secrets.map((s) => [s.metadata.name, s]));
    assert.deepEqual(
      Object.fromEntries([...byName].map(([name, s]) => [name, decoded(s)])),
      { 'tempora-postgresql': { username: 'tempora' }, 'tempora-redis': {}, 'tempora-keys': {}, 'tempora-callback': {} },
      'only what is not secret is rendered',
    );
    const generate = (name: string) => JSON.parse(byName.get(name)!.metadata.annotations![GENERATE_ANNOTATION]!) as Record<string, string>;
    assert.deepEqual(generate('tempora-keys'), {
      ADMIN_KEY: '{random:48}',
      SERVICE_KEY: '{random:48}',
      SIMULATION_API_KEYS: 'tempora:{random:48}',
      WRITER_TOKENS: 'tempora:{random:48}',
    });
    assert.deepEqual(generate('tempora-callback'), { 'callback-secret': '{random:64}' });
    assert.deepEqual(generate('tempora-postgresql'), {
      password: '{random:32}',
      url: 'postgres://tempora:{password}@tempora-postgresql.tempora.svc:5432/tempora',
    });
    assert.deepEqual(generate('tempora-redis'), { password: '{random:32}', url: 'redis://:{password}@tempora-redis.tempora.svc:6379/0' });
    for (const s of secrets) {
      assert.equal(s.metadata.labels?.[GENERATED_SECRET_LABEL], 'true', `${s.metadata.name} is watched by the operator`);
      assert.deepEqual(planGeneration(s).problems, [], `${s.metadata.name}: the operator can make every key`);
    }
    // The kept stores' Secrets keep their other annotation.
    assert.equal(byName.get('tempora-postgresql')!.metadata.annotations!['helm.sh/resource-policy'], 'keep');
  });

  it('every credential given in values is rendered as given, and then nothing is left to generate', function () {
    const secrets = parseObjects(render(['-f', join(HERE, 'platform-values-full.yaml')])).filter((o): o is Secret => o.kind === 'Secret');
    assert.deepEqual(Object.fromEntries(secrets.map((s) => [s.metadata.name, decoded(s)])), {
      'platform-postgresql': {
        username: 'tempora',
        password: 'pg-password-0123456789',
        url: 'postgres://tempora:pg-password-0123456789@platform-postgresql.tempora.svc:5432/tempora',
      },
      'platform-redis': { password: 'redis-password-0123456789', url: 'redis://:redis-password-0123456789@platform-redis.tempora.svc:6379/0' },
      'platform-keys': {
        ADMIN_KEY: 'admin-key-0123456789abcdef',
        SERVICE_KEY: 'service-key-0123456789abcdef',
        SIMULATION_API_KEYS: 'research:simulation-key-0123456789abcdef',
        WRITER_TOKENS: 'curator:writer-token-0123456789abcdef,importer:writer-token-fedcba9876543210',
      },
      'platform-callback': { hmac: 'callback-secret-0123456789abcdef0123456789abcdef' },
      'platform-providers': { GEMINI_API_KEY: 'gemini-test-key', OPENROUTER_API_KEY: 'openrouter-test-key' },
      'platform-billing': { STRIPE_SECRET_KEY: 'sk_test_0123456789', STRIPE_WEBHOOK_SECRET: 'whsec_0123456789' },
    });
    for (const s of secrets) {
      assert.equal(s.metadata.labels?.[GENERATED_SECRET_LABEL], undefined, `${s.metadata.name}: nothing for the operator`);
      assert.equal(s.metadata.annotations?.[GENERATE_ANNOTATION], undefined, s.metadata.name);
    }
  });

  it('values given for some keys: those rendered, only the others named for generation', function () {
    const secrets = parseObjects(
      render(['--set', 'secrets.keys.adminKey=admin-key-0123456789abcdef', '--set', 'redis.password=redis-password-0123456789']),
    ).filter((o): o is Secret => o.kind === 'Secret');
    const keys = secrets.find((s) => s.metadata.name === 'tempora-keys')!;
    assert.deepEqual(decoded(keys), { ADMIN_KEY: 'admin-key-0123456789abcdef' });
    assert.deepEqual(Object.keys(JSON.parse(keys.metadata.annotations![GENERATE_ANNOTATION]!)), ['SERVICE_KEY', 'SIMULATION_API_KEYS', 'WRITER_TOKENS']);
    const redis = secrets.find((s) => s.metadata.name === 'tempora-redis')!;
    assert.equal(redis.metadata.annotations?.[GENERATE_ANNOTATION], undefined);
    assert.equal(decoded(redis).url, 'redis://:redis-password-0123456789@tempora-redis.tempora.svc:6379/0');
  });
});
