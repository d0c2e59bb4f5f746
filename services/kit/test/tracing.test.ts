import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { launch, serviceListening } from '../../../test/support/platform.ts';
import { waitFor } from '../../../test/support/wait.ts';

const graphMain = fileURLToPath(new URL('../../graph/src/main.ts', import.meta.url));

interface OtlpSpan {
  traceId: string;
  name: string;
}

describe('kit tracing', function () {
  this.timeout(90_000);
  let collector: Server;
  const spans: OtlpSpan[] = [];
  let database: string;

  before(async () => {
    collector = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        if (request.url === '/v1/traces') {
          const payload = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
          for (const resource of payload.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans);
        }
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    database = await createDatabase('tracing');
  });
  after(async () => {
    collector?.close();
    if (database) await dropDatabase(database);
  });

  it("exports HTTP, Koa and PostgreSQL spans over OTLP, continuing the caller's trace", async () => {
    const { port: collectorPort } = collector.address() as { port: number };
    const env = {
      ...process.env,
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: database,
      GRAPH_SEED: 'false',
      // Its "listening" line says which port it bound.
      LOG_LEVEL: 'info',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collectorPort}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    const { child, announced } = launch(graphMain, [], env, serviceListening('graph'));
    try {
      const { url } = await announced;
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      await waitFor(
        'the service to answer',
        async () => (await fetch(`${url}/api/v1/stats`, { headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } })).status === 200,
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      const ours = () => spans.filter((span) => span.traceId === traceId);
      await waitFor(
        'a database span and a Koa span of the request',
        () => ours().some((s) => /pg|select/i.test(s.name)) && ours().some((s) => /koa|router|middleware/i.test(s.name)),
        {
          timeoutMs: 10_000,
          intervalMs: 100,
        },
      );
      const names = ours().map((span) => span.name);
      assert.ok(
        names.some((name) => /^GET/.test(name)),
        `an HTTP server span in ${names.join(', ')}`,
      );
      assert.ok(
        names.some((name) => /koa|router|middleware/i.test(name)),
        `a Koa span in ${names.join(', ')}`,
      );
      assert.ok(
        names.some((name) => /pg|select/i.test(name)),
        `a PostgreSQL span in ${names.join(', ')}`,
      );
    } finally {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      assert.equal(await exited, 0, 'SIGTERM shuts down cleanly');
    }
  });
});
