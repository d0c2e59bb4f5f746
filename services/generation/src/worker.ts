import { ConfigError, runWorker } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

/**
 * An agent pool worker (`npm run worker -w services/generation`; the pods of an AgentPool): consumes agent
 * tasks from the Redis stream through the consumer group and runs them with this process's providers.
 * Optional WORKER_PORT serves /health and /metrics (the kit's worker endpoints).
 */
await runWorker('generation-worker', VERSION, async () => {
  // Long on purpose: wiring, one statement per dependency or route group, read top to bottom.
  const [
    { createLogger, Metrics },
    { connectRedis },
    { serveWorkerEndpoints, workerPortField },
    { Counter },
    { GenerationConfigSchema },
    { registerPoolMetrics },
    { createProviders },
    { PoolWorker },
    { poolKeys, queueDepth },
    { poolStats },
  ] = await Promise.all([
    import('@tempora/kit/observability'),
    import('@tempora/kit/data'),
    import('@tempora/kit/http'),
    import('prom-client'),
    import('./config.ts'),
    import('./metrics.ts'),
    import('./providers.ts'),
    import('./pool/worker.ts'),
    import('./pool/protocol.ts'),
    import('./pool/stats.ts'),
  ]);
  return {
    configSchema: GenerationConfigSchema.extend(workerPortField),
    async start(config) {
      if (!config.REDIS_URL) throw new ConfigError('invalid environment:\n  REDIS_URL: the agent pool worker needs Redis');
      const logger = createLogger('generation-worker', config.LOG_LEVEL);
      const redis = (await connectRedis(config.REDIS_URL, logger))!;
      const worker = new PoolWorker({
        redis,
        prefix: config.REDIS_KEY_PREFIX,
        providers: createProviders(config),
        logger,
        concurrency: config.AGENT_POOL_CONCURRENCY,
        claimIdleMs: config.AGENT_POOL_CLAIM_IDLE_MS,
      });
      await worker.start();

      const metrics = new Metrics('generation-worker');
      const registers = [metrics.registry];
      new Counter({
        name: 'generation_worker_tasks_total',
        help: 'Agent tasks this worker finished',
        registers,
        collect() {
          this.reset();
          this.inc(worker.processed);
        },
      });
      const keys = poolKeys(config.REDIS_KEY_PREFIX);
      registerPoolMetrics(
        registers,
        { depth: () => queueDepth(redis, keys), stats: () => poolStats(redis, keys, config.AGENT_POOL_CLAIM_IDLE_MS) },
        config.AGENT_POOL_NAME,
      );
      const server =
        config.WORKER_PORT === undefined
          ? undefined
          : await serveWorkerEndpoints({
              port: config.WORKER_PORT,
              host: config.HOST,
              service: 'generation-worker',
              version: VERSION,
              metrics,
              health: () => ({ status: redis.isReady ? 'ok' : 'degraded', redis: redis.isReady, consumer: worker.consumer }),
            });
      if (server) logger.info({ url: server.url }, 'serving /health and /metrics');
      return {
        logger,
        async stop() {
          logger.info('agent pool worker stopping');
          server?.drain();
          await worker.close();
          await server?.close();
          await redis.quit().catch(() => {});
        },
      };
    },
  };
});
