import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { serveMetricsEndpoint } from './worker-server.ts';

export interface RunningServer {
  server: Server;
  url: string;
  /** Where `/metrics` answers, when the server was given `metrics`. */
  metricsUrl?: string;
  /** Stops accepting, waits for in-flight requests up to the grace period, then runs the close hooks. */
  close(): Promise<void>;
}

export interface ServeOptions {
  port: number;
  host: string;
  logger: Logger;
  graceMs: number;
  onDrain?: () => void;
  /** Run after the last request finished, in order (databases, Redis, tracing). */
  onClose?: Array<() => Promise<unknown>>;
  /** Answers a request outside the Koa app when it returns true (the gateway's express lane). */
  express?: ExpressLane;
  /** Serves the registry's `/metrics` on a port of its own (METRICS_PORT), open until the last close hook ran. */
  metrics?: { port: number; metrics: Metrics };
}

export type ExpressLane = (request: IncomingMessage, response: ServerResponse) => boolean;

/**
 * How long a client may take to send its request: a slowloris trickling headers is cut after 10 s, a body
 * after 30 s (Node's defaults, 60 s and 300 s checked every 30 s, let a few hundred idle sockets hold a
 * replica's memory for minutes). Responses, streams included, are not bounded by these.
 */
export const CLIENT_TIMEOUTS = { headersTimeout: 10_000, requestTimeout: 30_000, connectionsCheckingInterval: 1_000 } as const;

export async function serve(app: Koa, options: ServeOptions): Promise<RunningServer> {
  const callback = app.callback();
  const express = options.express;
  const server = createServer(CLIENT_TIMEOUTS, express ? (request, response) => void (express(request, response) || callback(request, response)) : callback);
  server.listen(options.port, options.host);
  // Long-lived keep-alive sockets behind a load balancer must outlive its idle timeout.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address() as AddressInfo;
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  const url = `http://${host}:${address.port}`;
  const metrics = options.metrics
    ? await serveMetricsEndpoint({ port: options.metrics.port, host: options.host, metrics: options.metrics.metrics })
    : undefined;

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      options.onDrain?.();
      // Once closed, the server ends each connection as soon as it has nothing in flight (idle ones at
      // once), so `stopped` settles when the last answer is out: no request needs counting on the way.
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // When the count cannot be read, wait as if a request were in flight: the grace period still bounds it.
      const busy = await new Promise<number>((resolve) => server.getConnections((error, count) => resolve(error ? 1 : count)));
      if (busy > 0) {
        options.logger.info({ connections: busy }, 'draining in-flight requests');
        await Promise.race([stopped, new Promise<void>((resolve) => setTimeout(resolve, options.graceMs).unref())]);
      }
      server.closeAllConnections();
      await stopped;
      for (const hook of options.onClose ?? []) {
        await hook().catch((error: unknown) => options.logger.warn({ err: error }, 'close hook failed'));
      }
      await metrics?.close();
    })();
    return closing;
  };
  return { server, url, ...(metrics ? { metricsUrl: metrics.url } : {}), close };
}

/** Until the server listens there is nothing to drain: a signal exits at once. Returns the disposer. */
export function exitOnSignalsUntilServing(): () => void {
  const exit = (signal: NodeJS.Signals) => process.exit(signal === 'SIGINT' ? 130 : 143);
  process.once('SIGTERM', exit);
  process.once('SIGINT', exit);
  return () => {
    process.off('SIGTERM', exit);
    process.off('SIGINT', exit);
  };
}

/** SIGTERM and SIGINT begin a graceful shutdown; a second signal exits at once. */
export function closeOnSignals(close: () => Promise<void>, logger: Logger): void {
  let received = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (received) process.exit(1);
    received = true;
    logger.info({ signal }, 'shutting down');
    close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
