import assert from 'node:assert/strict';
import type { WorkerServer } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { FakeGeneration } from '../../../test/support/stand-ins/generation.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { VERSION } from '../src/version.ts';
import { WorkerConfigSchema, type WorkerRole } from '../src/workers/config.ts';
import { type StartedWorker, serveWorker, startWorker } from '../src/workers/runtime.ts';
import { at, record } from './fixtures.ts';
import { type GraphHarness, SERVICE_KEY, startGraph, writer } from './harness.ts';

const logger = createLogger('graph-worker', process.env.WORKER_TEST_LOG ?? 'silent');

/** The worker processes' /health and /metrics, run as `node src/worker.ts <role>` runs them, in process. */
describe('graph worker endpoints', function () {
  this.timeout(60_000);
  let api: GraphHarness;
  const generation = new FakeGeneration();
  const running: Array<{ worker: StartedWorker; endpoints: WorkerServer | undefined }> = [];

  before(async () => {
    api = await startGraph();
    await generation.start();
  });
  after(async () => {
    for (const { worker, endpoints } of running) {
      await endpoints?.close();
      await worker.stop(100);
      await worker.close();
    }
    await generation.stop();
    await api?.stop();
  });

  const start = async (role: WorkerRole) => {
    const config = loadConfig(WorkerConfigSchema, {
      DATABASE_URL: api.databaseUrl,
      GENERATION_URL: generation.url,
      SERVICE_KEY,
      WORKER_POLL_MS: '50',
      WORKER_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
    });
    const worker = await startWorker(role, config, logger);
    const endpoints = await serveWorker(role, config, worker);
    running.push({ worker, endpoints });
    return endpoints;
  };
  /** Scrapes until `pattern` shows up (the loops run in the background). */
  const scrape = (endpoints: WorkerServer, pattern: RegExp): Promise<string> =>
    waitFor(
      `${pattern} at ${endpoints.url}/metrics`,
      async () => {
        const text = await (await fetch(`${endpoints.url}/metrics`)).text();
        return pattern.test(text) && text;
      },
      { timeoutMs: 20_000 },
    );

  it('renderer: /health is ok, and /metrics counts the job it rendered, its duration and the budget', async () => {
    const endpoints = (await start('renderer'))!;
    const health = await fetch(`${endpoints.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok', role: 'renderer', database: true, service: 'graph-worker', version: VERSION });

    const reply = await api.post('/generate', { path: at('metered-render'), event_name: 'The metered render' }, writer);
    assert.equal(reply.status, 202);
    const rendered = /^graph_worker_jobs_total\{role="renderer",outcome="rendered",service="graph-worker"\} 1$/m;
    const text = await scrape(endpoints, rendered);
    assert.match(text, rendered);
    assert.equal(generation.calls.length, 1);
    assert.match(text, /^graph_worker_job_duration_seconds_count\{service="graph-worker",role="renderer"\} 1$/m);
    assert.match(text, /^graph_worker_daily_budget_usd\{role="renderer",service="graph-worker"\} 5$/m);
    // balanced with an image is estimated at $0.07, charged before the call.
    assert.match(text, /^graph_worker_spend_today_usd\{role="renderer",service="graph-worker"\} 0\.07\d*$/m);
    assert.match(text, /^graph_worker_budget_exhausted\{role="renderer",service="graph-worker"\} 0$/m);
    assert.match(text, /^nodejs_heap_size_used_bytes\{service="graph-worker"\} /m);
  });

  it('judge: /metrics counts its verdicts and runs', async () => {
    const ingested = await api.post(
      '/ingest/tdf',
      [
        record(at('judged-fine', 1911), [], { status: 'pending' }),
        record(at('judged-spam', 1911), [], { status: 'pending', description: 'Casino night: buy now!' }),
      ],
      writer,
    );
    assert.equal(ingested.status, 200);
    const endpoints = (await start('judge'))!;
    const rejected = /^graph_worker_judge_verdicts_total\{verdict="reject",service="graph-worker"\} 1$/m;
    const text = await scrape(endpoints, rejected);
    assert.match(text, rejected);
    assert.match(text, /^graph_worker_judge_verdicts_total\{verdict="publish",service="graph-worker"\} 1$/m);
    assert.match(text, /^graph_worker_runs_total\{role="judge",outcome="worked",service="graph-worker"\} 1$/m);
    // The idle runs come after the run that worked, one poll later: scraped until one shows.
    const idle = /^graph_worker_runs_total\{role="judge",outcome="idle",service="graph-worker"\} \d+$/m;
    assert.match(await scrape(endpoints, idle), idle);
  });

  it('daily serves nothing', async () => {
    const config = loadConfig(WorkerConfigSchema, { DATABASE_URL: api.databaseUrl, WORKER_PORT: '0' });
    assert.equal(await serveWorker('daily', config, {} as StartedWorker), undefined);
  });
});
