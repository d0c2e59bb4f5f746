import { startTracing } from '@tempora/kit/tracing';
import { VERSION } from './version.ts';

/**
 * A graph background worker, `node src/worker.ts <role>` (`npm run worker -w services/graph -- <role>`;
 * the pods of a GraphWorker): renderer, expander or judge run until SIGTERM, serving /health and /metrics on
 * WORKER_PORT when it is set; daily does one run and exits.
 */
const tracing = startTracing('graph-worker', VERSION);
const { loadConfig, ConfigError } = await import('@tempora/kit/config');
const { createLogger } = await import('@tempora/kit/logger');
const { WORKER_ROLES, WorkerConfigSchema } = await import('./workers/config.ts');
const { serveWorker, startWorker } = await import('./workers/runtime.ts');

try {
  const config = loadConfig(WorkerConfigSchema);
  const role = process.argv[2] ?? config.WORKER_ROLE;
  if (!role || !(WORKER_ROLES as readonly string[]).includes(role)) throw new ConfigError(`usage: node src/worker.ts <${WORKER_ROLES.join('|')}> (or set WORKER_ROLE)`);
  if (config.WORKER_ROLE && config.WORKER_ROLE !== role) throw new ConfigError(`invalid environment:\n  WORKER_ROLE: ${config.WORKER_ROLE} contradicts the command's role ${role}`);
  // Workers share state with the API replicas and each other; the embedded database serves one process.
  if (!config.DATABASE_URL) throw new ConfigError('invalid environment:\n  DATABASE_URL: the graph workers need PostgreSQL');
  const logger = createLogger(`graph-${role}`, config.LOG_LEVEL);
  const worker = await startWorker(role as (typeof WORKER_ROLES)[number], config, logger);
  const endpoints = await serveWorker(role as (typeof WORKER_ROLES)[number], config, worker);
  logger.info({ role, version: VERSION, concurrency: config.WORKER_CONCURRENCY, budgetUsd: config.WORKER_DAILY_BUDGET_USD, endpoints: endpoints?.url }, 'graph worker started');

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) process.exit(1);
    stopping = true;
    endpoints?.drain();
    await worker.stop(config.SHUTDOWN_GRACE_MS);
    await endpoints?.close();
    await worker.close();
    await tracing.shutdown().catch(() => {});
    process.exit(code);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
  await worker.finished.then(
    () => role === 'daily' && stop(0),
    (error: unknown) => {
      logger.error({ err: error }, 'graph worker failed');
      return stop(1);
    },
  );
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`graph worker: ${error.message}`);
    process.exit(1);
  }
  throw error;
}
