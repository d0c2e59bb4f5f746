import { connectRedis, type Knex, openDatabase } from '@tempora/kit/data';
import { createApp, gatewayCaller, gatewayCallerOptions } from '@tempora/kit/http';
import { createLogger, type Logger, Metrics } from '@tempora/kit/observability';
import type Koa from 'koa';
import { AccountData } from './application/account-data.ts';
import { GenerationService } from './application/generations.ts';
import { TimepointService } from './application/timepoints.ts';
import type { GenerationConfig } from './config.ts';
import { Generator } from './generator.ts';
import { GenerationMetrics } from './metrics.ts';
import { migrations } from './migrations.ts';
import { type AgentRunner, InProcessRunner } from './pipeline/runner.ts';
import { PoolCoordinator } from './pool/coordinator.ts';
import { createProviders, type ProviderSet } from './providers.ts';
import { GenerationRepository } from './repository/index.ts';
import { accountDataRoutes } from './routes/account-data.ts';
import { generateRoutes } from './routes/generate.ts';
import { timepointRoutes } from './routes/timepoints.ts';
import { VERSION } from './version.ts';

export { VERSION };

export interface GenerationInstance {
  app: Koa;
  openapi: object;
  logger: Logger;
  /** Served on METRICS_PORT, apart from the API. */
  metrics: Metrics;
  generator: Generator;
  repository: GenerationRepository;
  /** The service's database, for what looks at its tables from outside (tests). */
  knex: Knex;
  runner: AgentRunner;
  providers: ProviderSet;
  drain(): void;
  close(): Promise<void>;
}

export async function createGenerationService(config: GenerationConfig, logger = createLogger('generation', config.LOG_LEVEL)): Promise<GenerationInstance> {
  if (config.AGENT_POOL === 'redis' && !config.REDIS_URL) throw new Error('AGENT_POOL=redis needs REDIS_URL');
  const database = await openDatabase({ service: 'generation', url: config.DATABASE_URL, dataDir: config.TEMPORA_DATA_DIR, migrations, logger });
  const repository = new GenerationRepository(database.knex);
  const redis = await connectRedis(config.REDIS_URL, logger);
  const providers = createProviders(config);

  let runner: AgentRunner;
  if (config.AGENT_POOL === 'redis' && redis) {
    const pool = new PoolCoordinator(redis, config.REDIS_KEY_PREFIX, config.AGENT_POOL_TASK_TIMEOUT_MS, config.AGENT_POOL_CLAIM_IDLE_MS, logger);
    await pool.start();
    runner = pool;
  } else {
    runner = new InProcessRunner(providers);
  }

  const metrics = new Metrics('generation');
  const generationMetrics = new GenerationMetrics(metrics, { depth: () => runner.depth(), stats: () => runner.stats() }, config.AGENT_POOL_NAME);
  const generator = new Generator({ config, repository, runner, providers, metrics: generationMetrics, logger });
  // Jobs whose replica stopped without finishing them are taken over from now on (docs/generation.md, "Shutdown").
  generator.start();
  const deps = {
    generations: new GenerationService({ generator, repository, providers, permissiveTextModel: config.PERMISSIVE_TEXT_MODEL }),
    timepoints: new TimepointService(repository, VERSION),
    accountData: new AccountData(generator, repository),
    heartbeatMs: config.STREAM_HEARTBEAT_MS,
    serviceKeys: config.SERVICE_KEY,
  };

  const { app, openapi, drain } = createApp({
    name: 'generation',
    version: VERSION,
    title: 'Tempora generation service',
    description:
      "Renders a historical moment from a short query as a full scene through a 14-agent pipeline (docs/generation.md). Internal: the gateway forwards end users with X-User-ID beside its X-Service-Key; a user's own access token is accepted too.",
    config,
    logger,
    metrics,
    // Who is calling: the kit's rules for every service behind the gateway (docs/reliability.md, "Who gets in").
    ...gatewayCaller(gatewayCallerOptions(config)),
    routes: [...generateRoutes(deps), ...timepointRoutes(deps), ...accountDataRoutes(deps)],
    health: async () => {
      const db = await database.ping();
      return {
        status: db ? 'ok' : 'degraded',
        database: db,
        providers: { ...providers.configured },
        agent_pool: runner.mode,
        redis: redis ? redis.isReady : null,
      };
    },
  });

  return {
    app,
    openapi,
    logger,
    metrics,
    generator,
    repository,
    knex: database.knex,
    runner,
    providers,
    drain: () => {
      drain();
      generator.beginDrain();
    },
    close: async () => {
      await generator.close();
      await runner.close();
      await redis?.quit().catch(() => {});
      await database.close();
    },
  };
}
