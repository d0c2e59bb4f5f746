import { startTracing } from '@tempora/kit/tracing';
import { VERSION } from './version.ts';

// Tracing must patch http, koa, pg and redis before any of them load: everything else is imported after.
const tracing = startTracing('graph', VERSION);
const { loadConfig, ConfigError } = await import('@tempora/kit/config');
const { serve, closeOnSignals, exitOnSignalsUntilServing } = await import('@tempora/kit/server');
const { GraphConfigSchema } = await import('./config.ts');
const { createGraphService } = await import('./service.ts');

const serving = exitOnSignalsUntilServing();
try {
  const config = loadConfig(GraphConfigSchema);
  const service = await createGraphService(config);
  const running = await serve(service.app, {
    port: config.PORT,
    host: config.HOST,
    logger: service.logger,
    graceMs: config.SHUTDOWN_GRACE_MS,
    onDrain: service.drain,
    onClose: [service.close, tracing.shutdown],
  });
  service.logger.info({ url: running.url }, 'graph service listening');
  serving();
  closeOnSignals(running.close, service.logger);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`graph: ${error.message}`);
    process.exit(1);
  }
  throw error;
}
