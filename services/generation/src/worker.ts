import { startTracing } from '@tempora/kit/tracing';
import type { WorkerServer } from '@tempora/kit/worker-server';
import { VERSION } from './version.ts';

/**
 * An agent pool worker (`npm run worker -w services/generation`; the pods of an AgentPool): consumes agent
 * tasks from the Redis stream through the consumer group and runs them with this process's providers.
 * Optional WORKER_PORT serves /health and /metrics (the kit's worker endpoints).
 */
const tracing = startTracing('generation-worker', VERSION);
const { loadConfig, ConfigError } = await import('@tempora/kit/config');
const { createLogger } = await import('@tempora/kit/logger');
const { connectRedis } = await import('@tempora/kit/redis');
const { Metrics } = await import('@tempora/kit/metrics');
const { serveWorkerEndpoints, workerPortField } = await import('@tempora/kit/worker-server');
const { Counter, Gauge } = await import('prom-client');
const { GenerationConfigSchema } = await import('./config.ts');
const { createProviders } = await import('./providers.ts');
const { PoolWorker, poolKeys } = await import('./pipeline/runners.ts');

try {
  const config = loadConfig(GenerationConfigSchema.extend(workerPortField));
  const logger = createLogger('generation-worker', config.LOG_LEVEL);
  if (!config.REDIS_URL) throw new ConfigError('invalid environment:\n  REDIS_URL: the agent pool worker needs Redis');
  const redis = await connectRedis(config.REDIS_URL, logger);
  const worker = new PoolWorker({
    redis: redis!,
    prefix: config.REDIS_KEY_PREFIX,
    providers: createProviders(config),
    logger,
    concurrency: config.AGENT_POOL_CONCURRENCY,
    claimIdleMs: config.AGENT_POOL_CLAIM_IDLE_MS,
  });
  await worker.start();

  let server: WorkerServer | undefined;
  if (config.WORKER_PORT !== undefined) {
    const metrics = new Metrics('generation-worker');
    const registers = [metrics.registry];
    new Counter({ name: 'generation_worker_tasks_total', help: 'Agent tasks this worker finished', registers, collect() { this.reset(); this.inc(worker.processed); } });
    const tasks = poolKeys(config.REDIS_KEY_PREFIX).tasks;
    for (const name of ['generation_agent_queue_depth', 'tempora_generation_queue_depth']) {
      new Gauge({
        name,
        help: 'Agent tasks waiting or running on the pool (the AgentPool autoscaling signal)',
        registers,
        async collect() {
          this.set(Number(await redis!.sendCommand(['XLEN', tasks]).catch(() => 0)));
        },
      });
    }
    server = await serveWorkerEndpoints({
      port: config.WORKER_PORT,
      host: config.HOST,
      service: 'generation-worker',
      version: VERSION,
      metrics,
      health: () => ({ status: redis?.isReady ? 'ok' : 'degraded', redis: Boolean(redis?.isReady), consumer: worker.consumer }),
    });
    logger.info({ url: server.url }, 'serving /health and /metrics');
  }

  let stopping = false;
  const stop = async () => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info('agent pool worker stopping');
    server?.drain();
    await worker.close();
    await server?.close();
    await redis?.quit().catch(() => {});
    await tracing.shutdown().catch(() => {});
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`generation worker: ${error.message}`);
    process.exit(1);
  }
  throw error;
}
