// The Secrets a TemporaGateway names, against a real control plane: the certificate's expiry and the missing
// Secrets as the operator's /metrics serves them (what TemporaCertificateExpiringSoon and
// TemporaSecretMissing read), and the TemporaGateway's Degraded condition. Tests run in order on one cluster.
import assert from 'node:assert/strict';
import { waitFor } from '../../test/support/wait.ts';
import type { KubeClient } from '../src/kube/client.ts';
import * as R from '../src/kube/resources.ts';
import type { Operator } from '../src/operator.ts';
import { SECRET_RECHECK_MS } from '../src/reconcilers/gateway-secrets.ts';
import { applyAs, condition, type OperatorCluster, startOperatorCluster, stopOperatorCluster, waitReady } from './cluster.ts';
import { gateway, NS } from './fixtures.ts';
import { tlsSecret } from './tls-secret.ts';

const EXPIRY = 'tempora_operator_certificate_expiry_timestamp_seconds';
const MISSING = 'tempora_operator_secret_missing';

describe("a TemporaGateway's Secrets on a real control plane", function () {
  this.timeout(120_000);
  let cluster: OperatorCluster;
  let admin: KubeClient;
  let op: Operator;

  before(async function () {
    this.timeout(1_800_000);
    cluster = await startOperatorCluster('secrets');
    ({ admin, op } = cluster);
  });

  after(async function () {
    this.timeout(60_000);
    await stopOperatorCluster(cluster);
  });

  /** The series of `metric` for TemporaGateway `gw` in the operator's /metrics, by Secret. */
  async function scrape(metric: string, gw: string): Promise<Map<string, number>> {
    const text = await (await fetch(`http://127.0.0.1:${op.port}/metrics`)).text();
    const series = new Map<string, number>();
    for (const [, labels, value] of text.matchAll(new RegExp(`^${metric}\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
      const parsed = Object.fromEntries([...labels!.matchAll(/(\w+)="([^"]*)"/g)].map(([, k, v]) => [k, v]));
      if (parsed.namespace === NS && parsed.gateway === gw) series.set(parsed.secret!, Number(value));
    }
    return series;
  }

  const degraded = async (name: string) => condition(await admin.get(R.TemporaGateway, NS, name), 'Degraded');
  const secretsOf = { keys: 'certs-keys', providers: undefined, billing: undefined };

  it("exports the expiry of the Ingress's certificate, read from its TLS Secret", async function () {
    const tls = tlsSecret('certs-tls', NS, 'certs.tempora.test', 10);
    await applyAs(admin, tls.secret);
    await applyAs(admin, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'certs-keys', namespace: NS },
      data: { SERVICE_KEY: Buffer.from('a-service-key-0123456789').toString('base64') },
    });
    await applyAs(admin, gateway('certs', { database: undefined, redis: undefined, services: undefined, secrets: secretsOf }));
    const expiry = await waitFor('the expiry series', async () => (await scrape(EXPIRY, 'certs')).get('certs-tls'), { timeoutMs: 30_000 });
    assert.equal(expiry, tls.notAfter.getTime() / 1000, "the certificate's notAfter, in seconds");
    assert.ok(expiry - Date.now() / 1000 > 9 * 86400 && expiry - Date.now() / 1000 <= 10 * 86400, 'ten days from now');
    assert.deepEqual([...(await scrape(MISSING, 'certs'))].sort(), [
      ['certs-keys', 0],
      ['certs-tls', 0],
    ]);
    const ready = await waitReady(admin, R.TemporaGateway, NS, 'certs');
    assert.equal(condition(ready, 'Degraded')?.status, 'False');
  });

  it('a missing Secret: 1 in its series and Degraded (SecretMissing), both cleared within a minute of its creation', async function () {
    this.timeout(SECRET_RECHECK_MS + 60_000);
    await applyAs(
      admin,
      gateway('certs', {
        database: undefined,
        services: undefined,
        secrets: { ...secretsOf, providers: 'certs-providers' },
        redis: { secretName: 'certs-keys', key: 'REDIS_URL' },
      }),
    );
    await waitFor('certs-providers missing', async () => (await scrape(MISSING, 'certs')).get('certs-providers') === 1, { timeoutMs: 30_000 });
    assert.equal((await scrape(MISSING, 'certs')).get('certs-keys'), 1, 'a key the pods read one by one is missing');
    const failing = await waitFor(
      'Degraded SecretMissing',
      async () => {
        const c = await degraded('certs');
        return c?.status === 'True' && c.reason === 'SecretMissing' ? c : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(
      failing.message,
      'Secret certs-keys (spec.secrets.keys, spec.redis) has no REDIS_URL; Secret certs-providers (spec.secrets.providers) does not exist',
    );
    // Recorded right after the status it reports, so it may trail the condition by a moment.
    await waitFor(
      'a Warning Event',
      async () => {
        const events = await admin.list(R.Event, { fieldSelector: 'involvedObject.name=certs,involvedObject.kind=TemporaGateway' }, NS);
        return events.items.some((e) => e.type === 'Warning' && e.reason === 'SecretMissing');
      },
      { timeoutMs: 30_000 },
    );
    assert.ok((await scrape(EXPIRY, 'certs')).has('certs-tls'), 'the certificate is still read');

    // No watch tells of the new Secrets, and once the rollout is over no child's event reconciles the
    // TemporaGateway either: it is looked at again because one is missing.
    await waitReady(admin, R.TemporaGateway, NS, 'certs');
    let quietSince = Date.now();
    await waitFor(
      'the operator to settle',
      async () => {
        if (!op.idle()) quietSince = Date.now();
        return Date.now() - quietSince > 2000;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    await applyAs(admin, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'certs-providers', namespace: NS }, data: {} });
    await applyAs(admin, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'certs-keys', namespace: NS },
      data: { REDIS_URL: Buffer.from('redis://redis:6379').toString('base64') },
    });
    await waitFor(
      'every Secret there',
      async () => [...(await scrape(MISSING, 'certs')).values()].every((v) => v === 0) && (await degraded('certs'))?.status === 'False',
      { timeoutMs: SECRET_RECHECK_MS + 15_000, intervalMs: 500 },
    );
  });

  it('a TLS Secret without a certificate: missing, and no expiry series', async function () {
    await applyAs(admin, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'certs-tls', namespace: NS },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': Buffer.from('not a certificate').toString('base64'), 'tls.key': Buffer.from('not a key').toString('base64') },
    });
    // A Secret's change reconciles nothing by itself; the periodic resync does.
    op.resyncAll();
    await waitFor('certs-tls missing', async () => (await scrape(MISSING, 'certs')).get('certs-tls') === 1, { timeoutMs: 30_000 });
    assert.equal((await scrape(EXPIRY, 'certs')).has('certs-tls'), false);
    assert.match((await degraded('certs'))?.message ?? '', /Secret certs-tls \(spec.ingress.tlsSecretName\): tls.crt holds no PEM certificate/);

    await admin.delete(R.Secret, NS, 'certs-tls');
    op.resyncAll();
    await waitFor(
      'certs-tls gone',
      async () => /Secret certs-tls \(spec.ingress.tlsSecretName\) does not exist/.test((await degraded('certs'))?.message ?? ''),
      { timeoutMs: 30_000 },
    );
    assert.equal((await scrape(MISSING, 'certs')).get('certs-tls'), 1);
  });

  it("drops a TemporaGateway's series with the reference, and with the TemporaGateway", async function () {
    const { ingress: _dropped, ...withoutIngress } = gateway('certs', { database: undefined, redis: undefined, services: undefined, secrets: secretsOf }).spec!;
    await applyAs(admin, { ...gateway('certs'), spec: withoutIngress });
    await waitFor('no series for certs-tls', async () => !(await scrape(MISSING, 'certs')).has('certs-tls'), { timeoutMs: 30_000 });
    assert.deepEqual([...(await scrape(MISSING, 'certs'))], [['certs-keys', 0]]);
    await admin.delete(R.TemporaGateway, NS, 'certs');
    await waitFor('no series for the TemporaGateway', async () => (await scrape(MISSING, 'certs')).size === 0, { timeoutMs: 30_000 });
  });
});
