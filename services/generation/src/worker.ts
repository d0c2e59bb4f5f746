import { startTracing } from '@tempora/kit/tracing';
import { VERSION } from './version.ts';

/**
 * An agent pool worker (`npm run worker -w services/generation`; the pods of an AgentPool): consumes agent
 * tasks from the Redis stream through the consumer group and runs them with this process's providers.
 * Optional WORKER_PORT serves /health and /metrics.
 */
const tracing = startTracing('generation-worker', VERSION);
const { loadConfig, ConfigError } = await import('@tempora/kit/config');
const { createLogger } = await import('@tempora/kit/logger');
const { connectRedis } = await import('@tempora/kit/redis');
const { z } = await import('zod');
const { createServer } = await import('node:http');
const { Registry, Counter, Gauge, collectDefaultMetrics } = await import('prom-client');
const { GenerationConfigSchema } = await import('./config.ts');
const { createProviders } = await import('./providers.ts');
const { PoolWorker, poolKeys } = await import('./pipeline/runners.ts');

try {
  const config = loadConfig(GenerationConfigSchema.extend({ WORKER_PORT: z.coerce.number().int().min(0).max(65535).optional() }));
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

  let server: ReturnType<typeof createServer> | undefined;
  if (config.WORKER_PORT !== undefined) {
    const registry = new Registry();
    registry.setDefaultLabels({ service: 'generation-worker' });
    collectDefaultMetrics({ register: registry });
    new Counter({ name: 'generation_worker_tasks_total', help: 'Agent tasks this worker finished', registers: [registry], collect() { this.reset(); this.inc(worker.processed); } });
    const tasks = poolKeys(config.REDIS_KEY_PREFIX).tasks;
    for (const name of ['generation_agent_queue_depth', 'tempora_generation_queue_depth']) {
      new Gauge({
        name,
        help: 'Agent tasks waiting or running on the pool (the AgentPool autoscaling signal)',
        registers: [registry],
        async collect() {
          this.set(Number(await redis!.sendCommand(['XLEN', tasks]).catch(() => 0)));
        },
      });
    }
    server = createServer(async (request, response) => {
      if (request.url === '/health') {
        response.writeHead(redis?.isReady ? 200 : 503, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ status: redis?.isReady ? 'ok' : 'degraded', service: 'generation-worker', version: VERSION, consumer: worker.consumer }));
      } else if (request.url === '/metrics') {
        response.writeHead(200, { 'content-type': registry.contentType });
        response.end(await registry.metrics());
      } else {
        response.writeHead(404).end();
      }
    }).listen(config.WORKER_PORT, config.HOST);
  }

  let stopping = false;
  const stop = async () => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info('agent pool worker stopping');
    server?.close();
    await worker.close();
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
