import type { z } from 'zod';
import type { ServiceApp } from '../http/app.ts';
import type { ExpressLane } from '../http/server.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { startTracing } from '../observability/tracing.ts';
import type { ServiceName } from './config.ts';

/** What a service's entry point hands to `runService`, loaded only once tracing is on. */
export interface ServiceModule<S extends z.ZodType> {
  configSchema: S;
  create(config: z.output<S>): Promise<Pick<ServiceApp, 'app' | 'drain'> & { logger: Logger; metrics: Metrics; close(): Promise<void>; express?: ExpressLane }>;
}

/**
 * The whole life of a service process: tracing first (it must patch http, koa, pg and redis before they
 * load, so the service's modules are imported after it), configuration from the environment (exit 1 with
 * every problem named), listening, and a graceful shutdown on SIGTERM or SIGINT.
 */
export async function runService<S extends z.ZodType>(name: ServiceName, version: string, load: () => Promise<ServiceModule<S>>): Promise<void> {
  const tracing = startTracing(name, version);
  const { loadConfig, metricsPort, ConfigError } = await import('./config.ts');
  const { serve, closeOnSignals, exitOnSignalsUntilServing } = await import('../http/server.ts');
  const serving = exitOnSignalsUntilServing();
  try {
    const module = await load();
    const config = loadConfig(module.configSchema) as z.output<S> & { PORT: number; METRICS_PORT?: number; HOST: string; SHUTDOWN_GRACE_MS: number };
    const scrapedOn = metricsPort(config);
    const service = await module.create(config);
    const running = await serve(service.app, {
      port: config.PORT,
      host: config.HOST,
      logger: service.logger,
      graceMs: config.SHUTDOWN_GRACE_MS,
      onDrain: service.drain,
      onClose: [service.close, tracing.shutdown],
      express: service.express,
      metrics: { port: scrapedOn, metrics: service.metrics },
    });
    service.logger.info({ url: running.url, metrics: `${running.metricsUrl}/metrics`, version }, `${name} service listening`);
    serving();
    closeOnSignals(running.close, service.logger);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`${name}: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
}
