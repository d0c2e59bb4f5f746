import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort } from '../../scripts/infra.ts';
import { DASHBOARDS } from '../../dashboards/src/index.ts';
import { inspect, substitute } from '../../dashboards/src/lint.ts';
import { newOperator, startCluster, applyAs, waitFor, type Cluster } from '../../operator/test/cluster.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { NS, gateway } from '../../operator/test/fixtures.ts';
import { tlsSecret } from '../../operator/test/tls-secret.ts';
import { FakeVendors } from '../../services/generation/test/providers/fake-vendors.ts';
import { startGeneration, vendorEnv, type GenerationHarness } from '../../services/generation/test/harness.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { startPlatform, type Platform } from '../support/platform.ts';
import { prometheusBinaries } from '../support/prometheus.ts';
import { readmeTour, runTour } from '../support/readme-tour.ts';

/** Grafana's variables as the dashboards' All option and a short range resolve them. */
const resolve = (expr: string) => expr.replaceAll('$__rate_interval', '1m').replaceAll(/\$\{?(job|instance)\}?/g, '.+');

/**
 * Series that every process has (prom-client's defaults, the scrape's `up`) or every service (the kit's
 * request histogram): a panel on them draws whichever job is picked, so they do not tell which jobs a
 * dashboard is about.
 */
const EVERY_PROCESS = /^(up|process_|nodejs_|http_server_request_duration_seconds)/;

/** A value as a variable puts it in `=~"…"`, as Grafana does: regex-escaped, the backslashes doubled for the PromQL string. */
const asRegexLiteral = (text: string) => text.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\\\$&');

interface QueryVariable {
  name: string;
  type: string;
  query: string;
}

/**
 * Every panel of every dashboard against a real Prometheus scraping the running platform (services, graph
 * workers, the agent-pool worker, the operator on a real control plane) after traffic that exercises what
 * the panels show: each query must return series. A panel on a metric nobody emits, a renamed label or a
 * typo in PromQL fails here.
 */
describe('dashboards on a real Prometheus scraping the platform', function () {
  this.timeout(900_000);
  let platform: Platform;
  let databaseUrl: string;
  let cluster: Cluster | undefined;
  let operator: Operator | undefined;
  let prometheus: ChildProcess | undefined;
  let prometheusUrl = '';
  let vendors: FakeVendors | undefined;
  let fallbacks: GenerationHarness | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'tempora-prometheus-'));

  before(async () => {
    const callbacks = createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()));
    await new Promise<void>((ready) => callbacks.listen(0, '127.0.0.1', ready));
    after(() => callbacks.close());

    databaseUrl = await createDatabase('panels');
    // A SimulationBudget as the operator's ConfigMap renders it, for the budget panels.
    writeFileSync(join(dir, 'budgets.json'), JSON.stringify({ panels: { scope: 'global', period: 'monthly', limitUsd: 50, perRunMaxUsd: 1, alertThresholds: [0.5, 0.9] } }));
    platform = await startPlatform({
      shared: { databaseUrl, redisUrl: process.env.REDIS_URL! },
      env: { CALLBACK_ALLOWLIST: '127.0.0.1', SIMULATION_BUDGETS_PATH: join(dir, 'budgets.json') },
    });
    cluster = await startCluster();
    operator = newOperator(cluster.operatorKubeconfig, 'panels', { port: await freePort() });
    await operator.start();
    await waitFor('the operator to lead', async () => operator!.isLeader, 20_000);

    // The platform runs offline, where no provider fails: a second generation replica on vendor stand-ins
    // whose native image model refuses, so its image chain falls back to the image vendor.
    vendors = await new FakeVendors().start();
    fallbacks = await startGeneration(vendorEnv(vendors, ['native', 'image_vendor']));

    const targets: Record<string, string[]> = { operator: [`127.0.0.1:${operator.port}`] };
    for (const [service, url] of Object.entries(platform.urls)) targets[service] = [new URL(url).host];
    for (const [worker, url] of Object.entries(platform.workers)) targets[worker] = [new URL(url).host];
    targets.generation!.push(new URL(fallbacks.url).host);
    const port = await freePort();
    writeFileSync(
      join(dir, 'prometheus.yml'),
      stringify({
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        scrape_configs: Object.entries(targets).map(([job, hosts]) => ({ job_name: job, static_configs: [{ targets: hosts }] })),
      }),
    );
    prometheusUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(prometheusBinaries().prometheus, [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
    await waitFor('Prometheus to be ready', async () => (await fetch(`${prometheusUrl}/-/ready`).catch(() => undefined))?.ok, 60_000, 250);

    await driveTraffic(platform, `http://127.0.0.1:${(callbacks.address() as { port: number }).port}/done`, cluster);
    vendors.fail('native', 'ImageGen', { kind: 'status', status: 400 });
    const fellBack = await fallbacks.post('/api/v1/timepoints/generate/sync', { query: 'The launch of Sputnik, 1957', generate_image: true });
    assert.equal(fellBack.body.models?.image?.provider, 'image_vendor', `the image chain fell back: ${JSON.stringify(fellBack.body).slice(0, 2000)}`);
    // Two minutes of scrapes at 1 s give every rate() over 1m its samples on both sides of the traffic.
    await new Promise((resolve) => setTimeout(resolve, 70_000));
  });

  after(async () => {
    prometheus?.kill('SIGTERM');
    await operator?.stop();
    await cluster?.cp.stop();
    await platform?.stop();
    await fallbacks?.stop();
    await vendors?.stop();
    if (databaseUrl) await dropDatabase(databaseUrl).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A query variable's `label_values(selector, label)` as Grafana's Prometheus data source runs it over the
   * dashboard's hour: the label's values on the series the selector matches, other variables filled in.
   */
  async function labelValues(query: string, variables: Record<string, string> = {}): Promise<string[]> {
    const [, selector, label] = /^label_values\((.+),\s*(\w+)\)$/.exec(query) ?? [];
    assert.ok(selector && label, `a label_values query: ${query}`);
    const filled = selector.replaceAll(/\$\{?(\w+)\}?/g, (_, name: string) => variables[name] ?? assert.fail(`no value for $${name} in ${query}`));
    const start = Math.floor(Date.now() / 1000) - 3600;
    const answer = (await (await fetch(`${prometheusUrl}/api/v1/label/${label}/values?match[]=${encodeURIComponent(filled)}&start=${start}`)).json()) as { status: string; data?: string[]; error?: string };
    assert.equal(answer.status, 'success', `${answer.error} in ${query}`);
    return answer.data!;
  }

  for (const dashboard of DASHBOARDS) {
    it(`${dashboard.title}: every variable's query returns values, and $job offers every job its panels draw`, async () => {
      const variables = (dashboard.templating?.list ?? []) as unknown as QueryVariable[];
      const query = (name: string) => variables.find((v) => v.name === name && v.type === 'query')?.query ?? assert.fail(`${dashboard.title}: no $${name}`);
      const jobs = await labelValues(query('job'));
      assert.ok(jobs.length > 0, `$job: ${query('job')} returns no job`);
      for (const job of jobs) assert.ok((await labelValues(query('instance'), { job: asRegexLiteral(job) })).length > 0, `$instance: ${query('instance')} returns nothing for job ${job}`);
      for (const v of variables.filter((v) => v.type === 'query' && !['job', 'instance'].includes(v.name))) assert.ok((await labelValues(v.query, { job: '.+', instance: '.+' })).length > 0, `$${v.name}: ${v.query}`);

      // Every job that has a series a panel selects can be picked, to narrow the dashboard to it.
      const metrics = new Set<string>();
      for (const panel of dashboard.panels ?? []) {
        if (!('targets' in panel)) continue;
        for (const target of (panel.targets ?? []) as unknown as Array<{ expr: string }>) for (const { metric } of inspect(substitute(target.expr)).selectors) if (!EVERY_PROCESS.test(metric)) metrics.add(metric);
      }
      const drawn = new Set<string>();
      for (const metric of metrics) for (const job of await labelValues(`label_values(${metric}, job)`)) drawn.add(job);
      assert.deepEqual([...drawn].filter((job) => !jobs.includes(job)).sort(), [], `jobs the panels draw that ${query('job')} does not offer`);
    });

    it(`${dashboard.title}: every panel's queries return series`, async () => {
      const empty: string[] = [];
      for (const panel of dashboard.panels ?? []) {
        if (!('targets' in panel)) continue;
        for (const target of (panel.targets ?? []) as unknown as Array<{ expr: string }>) {
          const answer = (await (await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(resolve(target.expr))}`)).json()) as { status: string; data?: { result: unknown[] }; error?: string };
          assert.equal(answer.status, 'success', `${panel.title}: ${answer.error} in ${target.expr}`);
          if (answer.data!.result.length === 0) empty.push(`${panel.title}: ${target.expr}`);
        }
      }
      assert.deepEqual(empty, [], 'panels without series');
    });
  }
});

/** The README tour, then what the tour does not reach: refusals, refunds, failures, callbacks, a Gateway CR. */
async function driveTraffic(platform: Platform, callbackUrl: string, cluster: Cluster): Promise<void> {
  const tour = await runTour(readmeTour(platform.urls, { stripe: platform.stripe }), tmpdir());
  assert.equal(tour.status, 0, tour.stderr.slice(-3000));

  const gw = platform.urls.gateway;
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gw}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const { access_token: token } = (await (await post('/api/v1/auth/demo', {})).json()) as { access_token: string };
  const auth = { authorization: `Bearer ${token}` };
  // A charged call the upstream refuses: its credits refunded.
  await post('/api/v1/timepoints/generate/sync', { query: 'The signing of the Magna Carta, 1215', llm_params: { temperature: 3 } }, auth);
  // An asynchronous generation whose result is POSTed to a callback.
  await post('/api/v1/timepoints/generate', { query: 'The coronation of Charlemagne, 800', callback_url: callbackUrl }, auth);
  // A payment webhook whose signature does not verify: refused, nothing granted.
  const forged = await fetch(`${gw}/api/v1/billing/webhooks/stripe`, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=00' }, body: '{"id":"evt_forged","type":"checkout.session.completed"}' });
  assert.equal(forged.status, 400);
  // Anonymous reads past the public limit: rate-limited requests.
  await Promise.all(Array.from({ length: 80 }, () => fetch(`${gw}/api/v1/graph/moments?limit=1`).then((r) => r.arrayBuffer())));
  // A simulation run, charged through the gateway, waited for.
  const run = await fetch(`${gw}/api/v1/simulate?wait=30`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify({ prompt: 'A council in Vienna weighs war with the Ottomans, 1683', mode: 'FORWARD', fidelity: 1 }) });
  assert.ok(run.status < 300, `simulation: ${run.status} ${await run.text()}`);
  // A moment waiting for moderation, for the judge to rule on.
  const graphUrl = platform.urls.graph;
  const bastille = (await (await fetch(`${graphUrl}/api/v1/moments/1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille?format=tdf`, { headers: { 'x-service-key': 'dev-service-key' } })).json()) as { payload: Record<string, unknown> };
  const pending = { ...bastille.payload, path: '/1789/july/15/1200/france/ile-de-france/paris/crowds-hold-the-bastille', event_name: 'Crowds hold the Bastille', status: 'pending', edges: [] };
  const ingested = await fetch(`${graphUrl}/ingest/tdf`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer dev-writer-token' }, body: JSON.stringify({ payload: pending }) });
  assert.equal(ingested.status, 200, await ingested.text());
  // A Gateway for the operator to reconcile, with its Ingress's certificate (the other Secrets it names are missing).
  await applyAs(cluster.admin, tlsSecret('panels-tls', NS, 'panels.tempora.test', 30).secret);
  await applyAs(cluster.admin, gateway('panels'));
}
