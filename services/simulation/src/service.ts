import { join, resolve } from 'node:path';
import { connectRedis, type Database, type Knex, openDatabase, type RedisClient } from '@tempora/kit/data';
import { createApp, gatewayCaller, gatewayCallerOptions, RateLimiter, type RateWindow, type ServiceDefinition } from '@tempora/kit/http';
import { createLogger, type Logger, Metrics } from '@tempora/kit/observability';
import { textProviders } from '@tempora/kit/providers';
import type Koa from 'koa';
import { AccountData } from './account-data.ts';
import { ANY_CALLER, simulationApiKeyAuth } from './auth.ts';
import { BudgetSource } from './budget-source.ts';
import { BudgetStanding } from './budget-standing.ts';
import type { SimulationConfig } from './config.ts';
import { TEMPLATE_DIRECTORY, TemplateCatalog } from './domain/templates.ts';
import { SimulationMetrics } from './metrics.ts';
import { migrations } from './migrations.ts';
import { SimulationRepository } from './repository/index.ts';
import { accountDataRoutes } from './routes/account-data.ts';
import { budgetRoutes } from './routes/budgets.ts';
import { simulationRoutes } from './routes/simulations.ts';
import { templateRoutes } from './routes/templates.ts';
import { Runner } from './runner.ts';
import { Simulations } from './simulations.ts';
import { VERSION } from './version.ts';

export { VERSION };

export interface SimulationInstance {
  app: Koa;
  openapi: object;
  logger: Logger;
  /** Served on METRICS_PORT, apart from the API. */
  metrics: Metrics;
  runner: Runner;
  budgets: BudgetSource;
  simulations: Simulations;
  repository: SimulationRepository;
  /** The service's database, for what looks at its tables from outside (tests). */
  knex: Knex;
  drain(): void;
  close(): Promise<void>;
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Per caller (the user a service acts for, or the credential), reads and writes apart; the public template list per address. */
function windows(config: SimulationConfig) {
  return (ctx: Koa.Context): RateWindow[] => {
    const caller = ctx.state.caller;
    const key = caller ? `owner:${caller.userId ?? caller.principal}` : `ip:${ctx.ip}`;
    return READS.has(ctx.method)
      ? [{ name: 'read', points: config.RATE_LIMIT_READ_PER_MINUTE, durationSeconds: 60, key }]
      : [{ name: 'write', points: config.RATE_LIMIT_WRITE_PER_MINUTE, durationSeconds: 60, key }];
  };
}

/** What the wiring steps below hand one another. */
interface Parts {
  catalog: TemplateCatalog;
  database: Database;
  redis: RedisClient | undefined;
  repository: SimulationRepository;
  budgets: BudgetSource;
  standing: BudgetStanding;
  metrics: Metrics;
  runner: Runner;
  simulations: Simulations;
}

export async function createSimulationService(config: SimulationConfig, logger = createLogger('simulation', config.LOG_LEVEL)): Promise<SimulationInstance> {
  const catalog = TemplateCatalog.load(TEMPLATE_DIRECTORY);
  const database = await openDatabase({
    service: 'simulation',
    url: config.DATABASE_URL,
    dataDir: config.TEMPORA_DATA_DIR,
    migrations,
    logger,
    pool: { min: 0, max: 20 },
  });
  const redis = await connectRedis(config.REDIS_URL, logger);
  const repository = new SimulationRepository(database.knex);
  // Unset: a file in the data directory, read if it exists (npm start's local budgets).
  const budgets = new BudgetSource(config.SIMULATION_BUDGETS_PATH ?? join(resolve(config.TEMPORA_DATA_DIR), 'simulation-budgets.json'), logger);
  await budgets.start(config.BUDGETS_RELOAD_MS);
  const standing = new BudgetStanding({ ledger: repository.budgets, source: budgets });

  const { metrics, runner, simulations } = runMachinery(config, logger, { repository, catalog, budgets, standing });
  const parts: Parts = { catalog, database, redis, repository, budgets, standing, metrics, runner, simulations };
  const { app, openapi, drain } = createApp(appDefinition(config, logger, parts));
  runner.start();

  let stopping: Promise<void> | undefined;
  const stopRunner = () => (stopping ??= runner.stop(config.SHUTDOWN_GRACE_MS));
  return {
    app,
    openapi,
    logger,
    metrics,
    runner,
    budgets,
    simulations,
    repository,
    knex: database.knex,
    drain: () => {
      drain();
      void stopRunner();
    },
    close: async () => {
      await stopRunner();
      budgets.stop();
      await redis?.quit().catch(() => undefined);
      await database.close();
    },
  };
}

/** What runs and follows runs: the runner, its metrics (which read the runner's and the budgets' live figures) and the runs' application service. */
function runMachinery(
  config: SimulationConfig,
  logger: Logger,
  { repository, catalog, budgets, standing }: Pick<Parts, 'repository' | 'catalog' | 'budgets' | 'standing'>,
): Pick<Parts, 'metrics' | 'runner' | 'simulations'> {
  const metrics = new Metrics('simulation');
  let runner: Runner | undefined;
  const simulationMetrics = new SimulationMetrics(metrics, { activeRuns: () => runner?.activeRuns ?? 0, budgets: () => standing.figures() });
  const providers = textProviders(config, 'Tempora simulation');
  runner = new Runner(
    repository,
    providers,
    {
      concurrency: config.RUN_CONCURRENCY,
      leaseMs: config.RUN_LEASE_MS,
      claimIntervalMs: config.RUN_CLAIM_INTERVAL_MS,
      exposureRetries: config.EXPOSURE_RETRIES,
    },
    simulationMetrics,
    logger.child({ component: 'runner' }),
  );
  const simulations = new Simulations({
    repository,
    catalog,
    budgets,
    runner,
    metrics: simulationMetrics,
    pollMs: config.STREAM_POLL_MS,
    ...(config.SIMULATION_TEXT_MODEL ? { defaultModel: config.SIMULATION_TEXT_MODEL } : {}),
  });
  return { metrics, runner, simulations };
}

/** The HTTP side: who may call, how often, the route groups and what /health reports. */
function appDefinition(config: SimulationConfig, logger: Logger, parts: Parts): ServiceDefinition {
  const { catalog, database, redis, repository, budgets, runner } = parts;
  const runRoutes = simulationRoutes({
    simulations: parts.simulations,
    version: VERSION,
    maxWaitSeconds: config.MAX_WAIT_SECONDS,
    heartbeatMs: config.STREAM_HEARTBEAT_MS,
    gatewayUrl: config.GATEWAY_URL,
    serviceKeys: config.SERVICE_KEY,
  });
  return {
    name: 'simulation',
    version: VERSION,
    title: 'Tempora simulation service',
    description: `Multi-entity simulations from ${catalog.templates.size} templates or a prompt, in five temporal modes, at fidelity 1–5, with mechanisms M1–M19, durable runs, progress streams, TDF export and enforced budgets (docs/simulation.md). Credentials: ${ANY_CALLER.join(', ')}.`,
    config,
    logger,
    metrics: parts.metrics,
    // Who is calling: the kit's rules for every service behind the gateway (docs/reliability.md, "Who gets in"), with the simulation API key.
    ...gatewayCaller({ ...gatewayCallerOptions(config), apiKey: simulationApiKeyAuth(config.SIMULATION_API_KEYS) }),
    rateLimit: { limiter: new RateLimiter({ redis, prefix: `${config.REDIS_KEY_PREFIX}:simulation` }), windows: windows(config) },
    routes: [
      ...templateRoutes(catalog),
      ...budgetRoutes(parts.standing),
      ...runRoutes,
      ...accountDataRoutes(new AccountData({ accounts: repository.accounts, runner, budgets })),
    ],
    health: async () => {
      const db = await database.ping();
      return {
        status: db ? 'ok' : 'degraded',
        timestamp: new Date().toISOString(),
        database: db,
        redis: redis ? redis.isReady : null,
        templates: catalog.templates.size,
        budgets: budgets.all.length,
      };
    },
  };
}
