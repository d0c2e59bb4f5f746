import { connectRedis, type RedisClient } from '@tempora/kit/data';
import { serveWorkerEndpoints, workerPortField } from '@tempora/kit/http';
import { createLogger, Metrics } from '@tempora/kit/observability';
import { ConfigError, type StartedWorkerProcess } from '@tempora/kit/runtime';
import { Counter } from 'prom-client';
import type { z } from 'zod';
import { GenerationConfigSchema } from '../config.ts';
import { registerPoolMetrics } from '../metrics.ts';
import { createProviders } from '../providers.ts';
import { VERSION } from '../version.ts';
import { poolKeys, queueDepth } from './protocol.ts';
import { poolStats } from './stats.ts';
import { PoolWorker } from './worker.ts';

/** The agent pool worker's environment: the service's, and the optional WORKER_PORT of /health and /metrics. */
export const PoolWorkerConfigSchema = GenerationConfigSchema.extend(workerPortField);
type PoolWorkerConfig = z.output<typeof PoolWorkerConfigSchema>;

/** The worker process (src/worker.ts): the consumer on the pool's stream, its metrics and its endpoints. */
export async function startPoolWorker(config: PoolWorkerConfig): Promise<StartedWorkerProcess> {
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

  const metrics = workerMetrics(config, redis, worker);
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
}

/** The tasks this worker finished, and the pool's gauges, which every process of the pool exports (metrics.ts). */
function workerMetrics(config: PoolWorkerConfig, redis: RedisClient, worker: PoolWorker): Metrics {
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
  return metrics;
}
