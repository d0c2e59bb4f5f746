import { ConfigError, runWorker } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

/**
 * A graph background worker, `node src/worker.ts <role>` (`npm run worker -w services/graph -- <role>`;
 * the pods of a GraphWorker): renderer, expander or judge run until SIGTERM, serving /health and /metrics on
 * WORKER_PORT when it is set; daily does one run and exits.
 */
await runWorker('graph-worker', VERSION, async () => {
  const [{ createLogger }, { WORKER_ROLES, WorkerConfigSchema }, { serveWorker, startWorker }] = await Promise.all([
    import('@tempora/kit/observability'),
    import('./workers/config.ts'),
    import('./workers/runtime.ts'),
  ]);
  return {
    configSchema: WorkerConfigSchema,
    async start(config) {
      const role = process.argv[2] ?? config.WORKER_ROLE;
      if (!role || !(WORKER_ROLES as readonly string[]).includes(role))
        throw new ConfigError(`usage: node src/worker.ts <${WORKER_ROLES.join('|')}> (or set WORKER_ROLE)`);
      if (config.WORKER_ROLE && config.WORKER_ROLE !== role)
        throw new ConfigError(`invalid environment:\n  WORKER_ROLE: ${config.WORKER_ROLE} contradicts the command's role ${role}`);
      // Workers share state with the API replicas and each other; the embedded database serves one process.
      if (!config.DATABASE_URL) throw new ConfigError('invalid environment:\n  DATABASE_URL: the graph workers need PostgreSQL');
      const logger = createLogger(`graph-${role}`, config.LOG_LEVEL);
      const worker = await startWorker(role as (typeof WORKER_ROLES)[number], config, logger);
      const endpoints = await serveWorker(role as (typeof WORKER_ROLES)[number], config, worker);
      logger.info(
        { role, version: VERSION, concurrency: config.WORKER_CONCURRENCY, budgetUsd: config.WORKER_DAILY_BUDGET_USD, endpoints: endpoints?.url },
        'graph worker started',
      );
      return {
        logger,
        finished: worker.finished,
        async stop() {
          endpoints?.drain();
          await worker.stop(config.SHUTDOWN_GRACE_MS);
          await endpoints?.close();
          await worker.close();
        },
      };
    },
  };
});
