import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import type { Metrics } from '../observability/metrics.ts';
import type { HealthReport } from './app.ts';
import { notFound, Problem } from './errors.ts';
import { send, sendProblem } from './raw-response.ts';

/** A worker's `WORKER_PORT` (extend its config schema with it): where its endpoints listen; unset serves nothing. */
export const workerPortField = { WORKER_PORT: z.coerce.number().int().min(0).max(65535).optional() };

export interface MetricsEndpointOptions {
  port: number;
  host: string;
  metrics: Metrics;
  /** How long close() lets a scrape in flight finish before cutting its connection (default 2 s). */
  graceMs?: number;
}

export interface WorkerServerOptions extends MetricsEndpointOptions {
  /** Named in the /health body, like a service's. */
  service: string;
  version: string;
  /** `status: degraded` (or a throw) answers 503; the report's other fields are passed through. */
  health(): HealthReport | Promise<HealthReport>;
}

export interface WorkerServer {
  server: Server;
  url: string;
  /** Shutdown began: /health answers 503 `draining` from now on. */
  drain(): void;
  /** Drains, stops accepting, and resolves once every connection is closed. Idempotent. */
  close(): Promise<void>;
}

/**
 * The operational endpoints of a background worker, which has no API and so no Koa app: `GET /health`
 * (the Kubernetes probes) and `GET /metrics` (Prometheus text from the worker's `Metrics` registry) on a
 * plain node:http server; anything else is a problem+json 404.
 */
export function serveWorkerEndpoints(options: WorkerServerOptions): Promise<WorkerServer> {
  const identity = { service: options.service, version: options.version };
  return serveOperational(options, async (draining) => {
    if (draining) return [503, { status: 'draining', ...identity }];
    const report = await Promise.resolve()
      .then(() => options.health())
      .catch((): HealthReport => ({ status: 'degraded', error: 'the health check failed' }));
    return [report.status === 'ok' ? 200 : 503, { ...report, ...identity }];
  });
}

/**
 * A service's metrics port (METRICS_PORT): `GET /metrics` alone, on a listener of its own that no Ingress
 * routes, so credit and sign-in counters never reach the public host (conventions.md, "Ports").
 */
export function serveMetricsEndpoint(options: MetricsEndpointOptions): Promise<WorkerServer> {
  return serveOperational(options, undefined);
}

type HealthAnswer = (draining: boolean) => Promise<[number, object]>;

async function serveOperational(options: MetricsEndpointOptions, health: HealthAnswer | undefined): Promise<WorkerServer> {
  let draining = false;
  const paths = health ? ['/health', '/metrics'] : ['/metrics'];

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const path = new URL(request.url ?? '/', 'http://worker').pathname;
    if (!paths.includes(path)) return sendProblem(response, notFound(`no route for ${request.method} ${path}`), path);
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      return sendProblem(response, new Problem(405, `${request.method} is not allowed on ${path}`, { headers: { Allow: 'GET, HEAD' } }), path);
    }
    if (path === '/health' && health) {
      const [status, body] = await health(draining);
      return send(response, status, 'application/json', JSON.stringify(body));
    }
    send(response, 200, options.metrics.registry.contentType, await options.metrics.registry.metrics());
  };

  const server = createServer((request, response) => {
    handle(request, response).catch(() => sendProblem(response, new Problem(500, 'the worker could not answer'), request.url ?? '/'));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;

  let closing: Promise<void> | undefined;
  return {
    server,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`,
    drain: () => {
      draining = true;
    },
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        draining = true;
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), options.graceMs ?? 2_000).unref();
      })),
  };
}
