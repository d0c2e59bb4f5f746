import { connectRedis, openDatabase } from '@tempora/kit/data';
import { createApp, gatewayCaller, gatewayCallerOptions, RateLimiter, type RateWindow } from '@tempora/kit/http';
import { createLogger, type Logger, type Metrics } from '@tempora/kit/observability';
import { textProviders } from '@tempora/kit/providers';
import type Koa from 'koa';
import { GatewayClient } from './clients/gateway.ts';
import { GenerationClient } from './clients/generation.ts';
import { GraphMcp } from './clients/graph-mcp.ts';
import { SimulationClient } from './clients/simulation.ts';
import { ConductorService } from './conductor-service.ts';
import type { ConductorConfig } from './config.ts';
import { Conductor } from './domain/conductor.ts';
import { chooseModel, type ModelChoice } from './domain/models.ts';
import { balanceTool, followSimulationTool, renderTool, startSimulationTool, summarizeSimulationTool } from './domain/platform-tools.ts';
import { mountMcp } from './mcp.ts';
import { ConductorMetrics } from './metrics.ts';
import { migrations } from './migrations.ts';
import { ConductorRepository } from './repository.ts';
import { accountDataRoutes } from './routes/account-data.ts';
import { conversationRoutes } from './routes/conversations.ts';
import { messageRoutes } from './routes/messages.ts';
import { settingsRoutes } from './routes/settings.ts';
import { VERSION } from './version.ts';

export { VERSION };

export interface ConductorInstance {
  app: Koa;
  service: ConductorService;
  model: ModelChoice;
  openapi: object;
  logger: Logger;
  /** Served on METRICS_PORT, apart from the API. */
  metrics: Metrics;
  drain(): void;
  close(): Promise<void>;
}

/** Per minute by the caller's tier (its user, through the gateway or not), else by address. */
function conductorWindows(config: ConductorConfig) {
  const perTier = { free: config.CONDUCTOR_RATE_LIMIT_FREE, pro: config.CONDUCTOR_RATE_LIMIT_PRO, enterprise: config.CONDUCTOR_RATE_LIMIT_ENTERPRISE };
  return (ctx: Koa.Context): RateWindow[] => {
    const caller = ctx.state.caller;
    if (caller?.userId) {
      const tier = caller.tier ?? 'free';
      return [{ name: `tier-${tier}`, points: perTier[tier], durationSeconds: 60, key: `user:${caller.userId}` }];
    }
    return [{ name: 'anonymous', points: config.CONDUCTOR_RATE_LIMIT_ANONYMOUS, durationSeconds: 60, key: `ip:${ctx.ip}` }];
  };
}

/** The peers, each with the conductor's key for it, and the tools besides the graph's that call them. */
function peers(config: ConductorConfig) {
  const keyFor = (own: string | undefined) => own ?? config.SERVICE_KEY[0];
  const gateway = new GatewayClient(config.GATEWAY_URL, keyFor(config.GATEWAY_SERVICE_KEY), config.PEER_TIMEOUT_MS, config.PRICES_TTL_MS);
  const simulations = new SimulationClient(config.SIMULATION_URL, keyFor(config.SIMULATION_SERVICE_KEY), config.PEER_TIMEOUT_MS);
  const graph = new GraphMcp(config.GRAPH_URL, keyFor(config.GRAPH_SERVICE_KEY), config.PEER_TIMEOUT_MS);
  const tools = [
    renderTool(new GenerationClient(config.GENERATION_URL, keyFor(config.GENERATION_SERVICE_KEY), config.RENDER_TIMEOUT_MS)),
    startSimulationTool(simulations),
    followSimulationTool(simulations),
    summarizeSimulationTool(simulations),
    balanceTool(gateway),
  ];
  return { gateway, graph, tools };
}

/**
 * The conductor, wired: model, storage, peers, the loop, the service, the app and the settling timer. Just
 * over 80 lines: each part is made elsewhere, and the wiring reads best in one place, in the order it runs.
 */
export async function createConductorService(config: ConductorConfig, logger = createLogger('conductor', config.LOG_LEVEL)): Promise<ConductorInstance> {
  const model = chooseModel(config, textProviders(config, 'Tempora conductor'));
  const database = await openDatabase({ service: 'conductor', url: config.DATABASE_URL, dataDir: config.TEMPORA_DATA_DIR, migrations, logger });
  const redis = await connectRedis(config.REDIS_URL, logger);
  const repository = new ConductorRepository(database.knex);
  const metrics = new ConductorMetrics();
  const { gateway, graph, tools } = peers(config);
  const caps = { steps: config.CONDUCTOR_STEP_CAP, tokens: config.CONDUCTOR_TOKEN_CAP, callsPerTurn: config.CONDUCTOR_CALLS_PER_TURN };
  const conductor = new Conductor({
    model,
    ledger: gateway,
    prices: (requestId) => gateway.prices(requestId),
    caps,
    logger,
    observe: (record, refunded) => metrics.observeCall(record, refunded),
    observeTurn: (seconds, tokens) => {
      metrics.modelTurns.series(model.kind).observe(seconds);
      metrics.modelTokens.inc({ provider: model.kind }, tokens);
    },
  });
  const service = new ConductorService({
    repository,
    conductor,
    gateway,
    graph,
    tools,
    caps,
    staleMs: config.MESSAGE_STALE_MS,
    logger,
    onMessage: (status) => metrics.messages.inc({ status }),
  });

  const deps = { service };
  const {
    app,
    openapi,
    drain: drainApp,
  } = createApp({
    name: 'conductor',
    version: VERSION,
    title: 'Tempora conductor',
    description:
      "One natural-language request, routed across the graph, generation and simulation services, every credit accounted for in the gateway's ledger. Also an MCP server at /mcp (tool `converse`).",
    config,
    logger,
    metrics,
    // Who is calling: the kit's rules for every service behind the gateway (docs/reliability.md, "Who gets in").
    ...gatewayCaller(gatewayCallerOptions(config)),
    rateLimit: { limiter: new RateLimiter({ redis, prefix: `${config.REDIS_KEY_PREFIX}:conductor` }), windows: conductorWindows(config) },
    routes: [...messageRoutes(deps), ...settingsRoutes(deps), ...conversationRoutes(deps), ...accountDataRoutes(deps)],
    extend: (router) => mountMcp(router, service, VERSION, config.MCP_ALLOWED_HOSTS),
    health: async () => {
      const db = await database.ping();
      return { status: db ? 'ok' : 'degraded', database: db, redis: redis ? redis.isReady : null, model: { provider: model.kind, model: model.model } };
    },
  });

  // Refunds the gateway could not book when a tool failed, calls a stopped process left unsettled, and the
  // jobs of paid calls: handed to the gateway, and their settlement written into the journal.
  const settler = setInterval(() => {
    service.settleUnsettled(`settle-${Date.now()}`).catch((error: unknown) => logger.warn({ err: error }, 'settling unsettled calls failed'));
  }, config.REFUND_RETRY_MS);
  settler.unref();

  logger.info({ provider: model.kind, model: model.model, source: model.source }, 'conductor model chosen');
  return {
    app,
    service,
    model,
    openapi,
    logger,
    metrics,
    drain: () => {
      clearInterval(settler);
      drainApp();
    },
    close: async () => {
      clearInterval(settler);
      await graph.close();
      await redis?.quit().catch(() => undefined);
      await database.close();
    },
  };
}
