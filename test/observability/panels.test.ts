import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { PROMETHEUS_DIR } from '../../dashboards/src/build.ts';
import { COMPONENT_LABEL, type Component } from '../../dashboards/src/components.ts';
import { DASHBOARDS } from '../../dashboards/src/index.ts';
import { inspect, substitute } from '../../dashboards/src/lint.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { applyAs, type Cluster, newOperator, startCluster } from '../../operator/test/cluster.ts';
import { gateway, NS } from '../../operator/test/fixtures.ts';
import { tlsSecret } from '../../operator/test/tls-secret.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { announced, type Platform, startPlatform } from '../support/platform.ts';
import { prometheusBinaries } from '../support/prometheus.ts';
import { waitFor } from '../support/wait.ts';

interface QueryVariable {
  name: string;
  type: string;
  query: string;
  allValue?: string;
}

/** Grafana's variables as a dashboard's All options and a short range resolve them: each to its allValue. */
function resolver(dashboard: (typeof DASHBOARDS)[number]): (expr: string) => string {
  const all = new Map(((dashboard.templating?.list ?? []) as unknown as QueryVariable[]).filter((v) => v.allValue).map((v) => [v.name, v.allValue!]));
  return (expr) => expr.replaceAll('$__rate_interval', '1m').replaceAll(/\$\{?(\w+)\}?/g, (text, name: string) => all.get(name) ?? text);
}

/** The workloads a Tempora shares its Prometheus with: their jobs, and label values no Tempora series has. */
const FOREIGN_JOBS = ['other-team', 'kube-scheduler'];
const FOREIGN_VALUES = new Set([...FOREIGN_JOBS, '/checkout', 'certificates', 'APIServiceRegistrationController']);

/**
 * Series that every process has (prom-client's defaults, the scrape's `up`) or every service (the kit's
 * request histogram): a panel on them draws whichever job is picked, so they do not tell which jobs a
 * dashboard is about.
 */
const EVERY_PROCESS = /^(up|process_|nodejs_|http_server_request_duration_seconds)/;

/** A value as a variable puts it in `=~"…"`, as Grafana does: regex-escaped, the backslashes doubled for the PromQL string. */
const asRegexLiteral = (text: string) => text.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\\\$&');

/**
 * Every panel of every dashboard against a real Prometheus scraping the running platform (services, graph
 * workers, the agent-pool worker, the operator on a real control plane), each target labelled
 * `tempora_component` as the operator's monitors label it, after a short smoke traffic: each query must
 * return series, so a panel on a metric nobody emits, a counter not exported until first used, a renamed
 * label or a typo in PromQL fails here. Beside it Prometheus scrapes another team's exporter (the
 * platform's metric names, failing) and a kube-scheduler it cannot reach, with the platform's rules loaded:
 * no variable offers them, no panel draws them and no alert is raised on them.
 */
describe('dashboards on a real Prometheus scraping the platform', function () {
  this.timeout(900_000);
  let platform: Platform;
  let databaseUrl: string;
  let cluster: Cluster | undefined;
  let operator: Operator | undefined;
  let prometheus: ChildProcess | undefined;
  let prometheusUrl = '';
  const dir = mkdtempSync(join(tmpdir(), 'tempora-prometheus-'));

  before(async () => {
    databaseUrl = await createDatabase('panels');
    // A SimulationBudget as the operator's ConfigMap renders it, for the budget panels.
    writeFileSync(
      join(dir, 'budgets.json'),
      JSON.stringify({ panels: { scope: 'global', period: 'monthly', limitUsd: 50, perRunMaxUsd: 1, alertThresholds: [0.5, 0.9] } }),
    );
    platform = await startPlatform({
      shared: { databaseUrl, redisUrl: process.env.REDIS_URL! },
      env: { SIMULATION_BUDGETS_PATH: join(dir, 'budgets.json') },
    });
    cluster = await startCluster();
    operator = newOperator(cluster.operatorKubeconfig, 'panels');
    await operator.start();
    await waitFor('the operator to lead', async () => operator!.isLeader, { timeoutMs: 20_000 });

    // Another team's exporter, with the platform's metric names, going wrong on every scrape.
    let scrapes = 0;
    const other = createServer((_req, res) => {
      scrapes++;
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(foreignMetrics(scrapes));
    });
    await new Promise<void>((ready) => other.listen(0, '127.0.0.1', ready));
    after(() => other.close());
    // A kube-scheduler it cannot reach: a port held here that hangs up on every connection (a port nobody
    // listens on could be taken by another process before the scrape).
    const unreachable = createNetServer((socket) => socket.destroy());
    await new Promise<void>((ready) => unreachable.listen(0, '127.0.0.1', ready));
    after(() => unreachable.close());

    const targets: Array<{ job: string; host: string; component: Component }> = [
      { job: 'operator', host: `127.0.0.1:${operator.port}`, component: 'operator' },
    ];
    for (const [service, url] of Object.entries(platform.metricsUrls)) targets.push({ job: service, host: new URL(url).host, component: service as Component });
    for (const [worker, url] of Object.entries(platform.workers))
      targets.push({ job: worker, host: new URL(url).host, component: worker.startsWith('graph-') ? 'graph-worker' : 'agent-pool' });
    writeFileSync(
      join(dir, 'prometheus.yml'),
      stringify({
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        rule_files: [join(PROMETHEUS_DIR, 'tempora.rules.yaml')],
        scrape_configs: [
          // The operator's monitors add the label with a relabeling, as these do.
          ...targets.map(({ job, host, component }) => ({
            job_name: job,
            static_configs: [{ targets: [host] }],
            relabel_configs: [{ target_label: COMPONENT_LABEL, replacement: component }],
          })),
          { job_name: 'other-team', static_configs: [{ targets: [`127.0.0.1:${(other.address() as { port: number }).port}`] }] },
          { job_name: 'kube-scheduler', static_configs: [{ targets: [`127.0.0.1:${(unreachable.address() as { port: number }).port}`] }] },
        ],
      }),
    );
    prometheus = spawn(
      prometheusBinaries().prometheus,
      [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, '--web.listen-address=127.0.0.1:0'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    // It logs the address it bound: `msg="Listening on" address=127.0.0.1:43853`.
    prometheusUrl = `http://${await announced(prometheus, (line) => /msg="Listening on" address=(\S+)/.exec(line)?.[1])}`;
    await waitFor('Prometheus to be ready', async () => (await fetch(`${prometheusUrl}/-/ready`).catch(() => undefined))?.ok, {
      timeoutMs: 60_000,
      intervalMs: 250,
    });

    await smokeTraffic(platform, cluster);
    // Seventy seconds of scrapes at 1 s give every rate() over 1m its samples on both sides of the traffic.
    await new Promise((resolve) => setTimeout(resolve, 70_000));
  });

  after(async () => {
    prometheus?.kill('SIGTERM');
    await operator?.stop();
    await cluster?.cp.stop();
    await platform?.stop();
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
    const answer = (await (await fetch(`${prometheusUrl}/api/v1/label/${label}/values?match[]=${encodeURIComponent(filled)}&start=${start}`)).json()) as {
      status: string;
      data?: string[];
      error?: string;
    };
    assert.equal(answer.status, 'success', `${answer.error} in ${query}`);
    return answer.data!;
  }

  for (const dashboard of DASHBOARDS) {
    it(`${dashboard.title}: every variable's query returns values, and $job offers every job its panels draw`, async () => {
      const variables = (dashboard.templating?.list ?? []) as unknown as QueryVariable[];
      const query = (name: string) => variables.find((v) => v.name === name && v.type === 'query')?.query ?? assert.fail(`${dashboard.title}: no $${name}`);
      const all = variables.find((v) => v.name === 'component')?.allValue ?? assert.fail(`${dashboard.title}: no $component with an All`);
      const components = await labelValues(query('component'));
      assert.deepEqual(components.sort(), all.split('|').sort(), `$component offers every component of the dashboard that is scraped, and nothing else`);
      const jobs = await labelValues(query('job'), { component: all });
      for (const job of FOREIGN_JOBS) assert.ok(!jobs.includes(job), `$job offers ${job}, not Tempora`);
      assert.ok(jobs.length > 0, `$job: ${query('job')} returns no job`);
      for (const job of jobs)
        assert.ok(
          (await labelValues(query('instance'), { component: all, job: asRegexLiteral(job) })).length > 0,
          `$instance: ${query('instance')} returns nothing for job ${job}`,
        );
      for (const v of variables.filter((v) => v.type === 'query' && !['component', 'job', 'instance'].includes(v.name)))
        assert.ok((await labelValues(v.query, { component: all, job: '.+', instance: '.+' })).length > 0, `$${v.name}: ${v.query}`);

      // Every job that has a series a panel selects can be picked, to narrow the dashboard to it.
      const metrics = new Set<string>();
      for (const panel of dashboard.panels ?? []) {
        if (!('targets' in panel)) continue;
        for (const target of (panel.targets ?? []) as unknown as Array<{ expr: string }>)
          for (const { metric } of inspect(substitute(target.expr)).selectors) if (!EVERY_PROCESS.test(metric)) metrics.add(metric);
      }
      const drawn = new Set<string>();
      for (const metric of metrics) for (const job of await labelValues(`label_values(${metric}{${COMPONENT_LABEL}=~"${all}"}, job)`)) drawn.add(job);
      assert.deepEqual([...drawn].filter((job) => !jobs.includes(job)).sort(), [], `jobs the panels draw that ${query('job')} does not offer`);
    });

    it(`${dashboard.title}: every panel's queries return series, none of another workload`, async () => {
      const resolve = resolver(dashboard);
      const empty: string[] = [];
      const leaked: string[] = [];
      for (const panel of dashboard.panels ?? []) {
        if (!('targets' in panel)) continue;
        for (const target of (panel.targets ?? []) as unknown as Array<{ expr: string }>) {
          const answer = (await (await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(resolve(target.expr))}`)).json()) as {
            status: string;
            data?: { result: unknown[] };
            error?: string;
          };
          assert.equal(answer.status, 'success', `${panel.title}: ${answer.error} in ${target.expr}`);
          if (answer.data!.result.length === 0) empty.push(`${panel.title}: ${target.expr}`);
          for (const { metric } of answer.data!.result as Array<{ metric: Record<string, string> }>)
            if (Object.values(metric).some((v) => FOREIGN_VALUES.has(v))) leaked.push(`${panel.title}: ${JSON.stringify(metric)}`);
        }
      }
      assert.deepEqual(empty, [], 'panels without series');
      assert.deepEqual(leaked, [], 'series of other workloads');
    });
  }

  it('the rules see every component and raise nothing on the other workloads', async () => {
    const answer = (await (await fetch(`${prometheusUrl}/api/v1/query?query=ALERTS`)).json()) as {
      data: { result: Array<{ metric: Record<string, string> }> };
    };
    const alerts = answer.data.result.map((r) => r.metric);
    assert.deepEqual(
      alerts.filter((a) => a.alertname === 'TemporaComponentAbsent'),
      [],
      'every component scraped, with its label',
    );
    assert.deepEqual(
      alerts.filter(
        (a) =>
          Object.values(a).some((v) => FOREIGN_VALUES.has(v)) ||
          [
            'TemporaTargetDown',
            'TemporaOperatorReconcileErrors',
            'TemporaOperatorWorkQueueStuck',
            'TemporaErrorBudgetBurn',
            'TemporaRateLimiterMemoryFallback',
          ].includes(a.alertname!),
      ),
      [],
      'alerts on other workloads',
    );
    // The other team's series are there, so the silence above is the rules', not an empty scrape.
    const theirs = (await (
      await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent('controller_runtime_reconcile_errors_total{job="other-team"}')}`)
    ).json()) as { data: { result: unknown[] } };
    assert.equal(theirs.data.result.length, 1);
  });
});

/** Another team's exporter at its `scrape`th scrape: an operator failing, a queue stuck, a service answering 5xx slowly. */
function foreignMetrics(scrape: number): string {
  return [
    `controller_runtime_reconcile_errors_total{controller="certificates"} ${scrape}`,
    'workqueue_depth{name="APIServiceRegistrationController"} 3',
    'workqueue_work_duration_seconds_count{name="APIServiceRegistrationController"} 9',
    `http_server_request_duration_seconds_count{route="/checkout",status="500",method="POST"} ${scrape * 5}`,
    'http_server_request_duration_seconds_bucket{route="/checkout",status="500",method="POST",le="1"} 0',
    `http_server_request_duration_seconds_bucket{route="/checkout",status="500",method="POST",le="+Inf"} ${scrape * 5}`,
    'rate_limiter_memory_fallback 1',
    `process_cpu_seconds_total ${scrape}`,
    'process_resident_memory_bytes 1000000',
    'nodejs_eventloop_lag_p99_seconds 0.5',
    '',
  ].join('\n');
}

/**
 * A smoke test's worth of traffic, what a person trying the platform does first: a sign-in, a read of the
 * graph, one paid generation, one paid simulation, one conductor message and billing's packs, all through
 * the gateway; and the TemporaGateway the operator reconciles, with its Ingress certificate. Every other series
 * the panels draw (refusals, refunds, fallbacks, verdicts, …) must be there at zero already.
 */
async function smokeTraffic(platform: Platform, cluster: Cluster): Promise<void> {
  const gw = platform.urls.gateway;
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${gw}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    assert.ok(response.status < 300, `${method} ${path}: ${response.status} ${text.slice(0, 500)}`);
    return JSON.parse(text || '{}') as Record<string, unknown>;
  };
  const { access_token: token } = (await call('POST', '/api/v1/auth/demo', {})) as { access_token: string };
  const auth = { authorization: `Bearer ${token}` };
  await call('GET', '/api/v1/graph/moments?limit=3');
  await call('POST', '/api/v1/timepoints/generate/sync', { query: 'The storming of the Bastille, 1789' }, auth);
  await call('POST', '/api/v1/simulate?wait=30', { prompt: 'A council in Vienna weighs war with the Ottomans, 1683', mode: 'FORWARD', fidelity: 1 }, auth);
  await call('POST', '/api/v1/conductor/messages', { content: 'What led from the Bastille to Waterloo?' }, auth);
  await call('GET', '/api/v1/billing/packs', undefined, auth);
  await applyAs(cluster.admin, tlsSecret('panels-tls', NS, 'panels.tempora.test', 30).secret);
  await applyAs(cluster.admin, gateway('panels'));
}
