import assert from 'node:assert/strict';
import Koa from 'koa';
import { serve } from '../src/http/server.ts';
import { createLogger } from '../src/observability/logger.ts';
import { Metrics } from '../src/observability/metrics.ts';

describe('kit server', () => {
  it('drains in-flight requests on close, refusing new connections', async function () {
    this.timeout(10_000);
    const app = new Koa();
    app.use(async (ctx) => {
      await new Promise((resolve) => setTimeout(resolve, 400));
      ctx.body = { done: true };
    });
    let drained = false;
    let closedHook = false;
    const running = await serve(app, {
      port: 0,
      host: '127.0.0.1',
      logger: createLogger('test', 'silent'),
      graceMs: 5_000,
      onDrain: () => {
        drained = true;
      },
      onClose: [
        async () => {
          closedHook = true;
        },
      ],
    });
    const inFlight = fetch(`${running.url}/slow`).then(async (response) => ({ status: response.status, body: await response.json() }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const closing = running.close();
    assert.equal(drained, true);
    await assert.rejects(fetch(`${running.url}/late`), 'new connections are refused');
    assert.deepEqual(await inFlight, { status: 200, body: { done: true } });
    await closing;
    assert.equal(closedHook, true);
  });

  it('gives up on requests that outlive the grace period', async function () {
    this.timeout(10_000);
    const app = new Koa();
    app.use(async (ctx) => {
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      ctx.body = 'late';
    });
    const running = await serve(app, { port: 0, host: '127.0.0.1', logger: createLogger('test', 'silent'), graceMs: 200 });
    const inFlight = fetch(`${running.url}/`).then(
      () => 'answered',
      () => 'cut',
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    await running.close();
    assert.ok(Date.now() - started < 2_000);
    assert.equal(await inFlight, 'cut');
  });

  it('serves /metrics on its own port only, open until the close hooks ran', async () => {
    const metrics = new Metrics('test');
    const app = new Koa();
    app.use((ctx) => {
      ctx.status = 404;
    });
    let scrapedWhileClosing = 0;
    const running = await serve(app, {
      port: 0,
      host: '127.0.0.1',
      logger: createLogger('test', 'silent'),
      graceMs: 200,
      metrics: { port: 0, metrics },
      onClose: [async () => void (scrapedWhileClosing = (await fetch(`${running.metricsUrl}/metrics`)).status)],
    });
    assert.ok(running.metricsUrl && running.metricsUrl !== running.url);
    const scraped = await fetch(`${running.metricsUrl}/metrics`);
    assert.equal(scraped.status, 200);
    assert.match(await scraped.text(), /process_cpu_seconds_total/);
    assert.equal((await fetch(`${running.url}/metrics`)).status, 404, 'the API port has no /metrics');
    const other = await fetch(`${running.metricsUrl}/health`);
    assert.equal(other.status, 404, 'the metrics port serves /metrics alone');
    assert.equal(other.headers.get('content-type'), 'application/problem+json');
    await running.close();
    assert.equal(scrapedWhileClosing, 200, 'a last scrape during shutdown is still answered');
    await assert.rejects(fetch(`${running.metricsUrl}/metrics`), 'closed with the server');
  });
});
