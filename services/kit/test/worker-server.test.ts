import assert from 'node:assert/strict';
import { Counter } from 'prom-client';
import type { HealthReport } from '../src/http/app.ts';
import { serveWorkerEndpoints, type WorkerServer } from '../src/http/worker-server.ts';
import { Metrics } from '../src/observability/metrics.ts';

describe('kit worker endpoints', () => {
  let metrics: Metrics;
  let report: HealthReport;
  let endpoints: WorkerServer;

  beforeEach(async () => {
    metrics = new Metrics('test-worker');
    report = { status: 'ok', queue: 'reachable' };
    endpoints = await serveWorkerEndpoints({
      port: 0,
      host: '127.0.0.1',
      service: 'test-worker',
      version: '1.2.3',
      metrics,
      health: () => {
        if (report.status === 'ok' && report.broken) throw new Error('check failed');
        return report;
      },
    });
  });
  afterEach(() => endpoints.close());

  it('serves the registry as Prometheus text at GET /metrics', async () => {
    new Counter({ name: 'test_worker_jobs_total', help: 'jobs', labelNames: ['outcome'], registers: [metrics.registry] }).inc({ outcome: 'done' }, 2);
    const response = await fetch(`${endpoints.url}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    assert.match(text, /^test_worker_jobs_total\{outcome="done",service="test-worker"\} 2$/m);
    assert.match(text, /^process_cpu_user_seconds_total\{service="test-worker"\} /m, "Node's default metrics");
  });

  it('answers /health 200 when ok, 503 when degraded, when the check throws, and once draining', async () => {
    let response = await fetch(`${endpoints.url}/health`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { status: 'ok', queue: 'reachable', service: 'test-worker', version: '1.2.3' });

    report = { status: 'degraded', queue: 'unreachable' };
    response = await fetch(`${endpoints.url}/health`);
    assert.equal(response.status, 503);
    assert.equal(((await response.json()) as HealthReport).queue, 'unreachable');

    report = { status: 'ok', broken: true };
    response = await fetch(`${endpoints.url}/health`);
    assert.equal(response.status, 503);
    assert.equal(((await response.json()) as HealthReport).status, 'degraded');

    report = { status: 'ok' };
    endpoints.drain();
    response = await fetch(`${endpoints.url}/health`);
    assert.equal(response.status, 503);
    assert.deepEqual(await response.json(), { status: 'draining', service: 'test-worker', version: '1.2.3' });
  });

  it('answers anything else with problem+json: 404 for an unknown path, 405 for another method', async () => {
    let response = await fetch(`${endpoints.url}/api/v1/anything?x=1`);
    assert.equal(response.status, 404);
    assert.equal(response.headers.get('content-type'), 'application/problem+json');
    assert.deepEqual(await response.json(), {
      type: 'https://tempora.dev/problems/not-found',
      title: 'Not Found',
      status: 404,
      detail: 'no route for GET /api/v1/anything',
      instance: '/api/v1/anything',
    });
    response = await fetch(`${endpoints.url}/metrics`, { method: 'POST' });
    assert.equal(response.status, 405);
    assert.equal(response.headers.get('allow'), 'GET, HEAD');
    assert.equal(((await response.json()) as { status: number }).status, 405);
  });

  it('closes: refuses new connections, and a second close resolves too', async () => {
    // A kept-alive connection must not hold the close open.
    assert.equal((await fetch(`${endpoints.url}/health`)).status, 200);
    const started = Date.now();
    await endpoints.close();
    assert.ok(Date.now() - started < 1_000);
    assert.equal(endpoints.server.listening, false);
    await assert.rejects(fetch(`${endpoints.url}/health`));
    await endpoints.close();
  });
});
