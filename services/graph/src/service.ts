import { connectRedis, type Database, openDatabase, type RedisClient } from '@tempora/kit/data';
import { adminKeyAuth, createApp, RateLimiter, type ServiceApp, serviceKeyAuth, writerTokenAuth } from '@tempora/kit/http';
import { createLogger, type Logger, Metrics, zeroed } from '@tempora/kit/observability';
import type Koa from 'koa';
import { Counter, Gauge } from 'prom-client';
import { localChangeFeed, PostgresChangeFeed } from './change-feed.ts';
import type { GraphConfig } from './config.ts';
import { GraphService } from './graph-service.ts';
import { MCP_TOOLS, type McpCallCounter, mountMcp } from './mcp.ts';
import { migrations } from './migrations.ts';
import { GraphRateLimits } from './rate-limits.ts';
import { GraphRepository } from './repository/index.ts';
import { accountDataRoutes } from './routes/account-data.ts';
import { discoveryRoutes } from './routes/discovery.ts';
import { momentRoutes } from './routes/moments.ts';
import { traversalRoutes } from './routes/traversal.ts';
import { writeRoutes } from './routes/writes.ts';
import { seedGraph } from './seed.ts';
import { VERSION } from './version.ts';
import { GraphWorkerMetrics } from './workers/metrics.ts';
import { type RunningWorker, runRole } from './workers/runtime.ts';

export { VERSION };

export interface GraphInstance {
  app: Koa;
  graph: GraphService;
  /** The background workers this process runs itself (GRAPH_WORKERS), by role. */
  workers: ReadonlyMap<string, RunningWorker>;
  openapi: object;
  logger: Logger;
  /** Served on METRICS_PORT, apart from the API. */
  metrics: Metrics;
  drain(): void;
  close(): Promise<void>;
}

export async function createGraphService(config: GraphConfig, logger = createLogger('graph', config.LOG_LEVEL)): Promise<GraphInstance> {
  const { database, redis, feed, graph } = await openGraph(config, logger);
  const { metrics, workerMetrics, countMcpCall } = graphMetrics(config, graph);
  const { app, openapi, drain: drainApp } = graphApp(config, logger, { database, redis, graph, metrics, countMcpCall });
  const { workers, stop: stopWorkers } = startWorkers(config, graph, logger, workerMetrics);
  return {
    app,
    graph,
    workers,
    openapi,
    logger,
    metrics,
    drain: () => {
      drainApp();
      void stopWorkers();
    },
    close: async () => {
      await stopWorkers();
      await feed.close();
      await redis?.quit().catch(() => {});
      await database.close();
    },
  };
}

/** The stores and the graph over them: figure keys re-derived, the seed written when asked for, the index loading. */
async function openGraph(config: GraphConfig, logger: Logger) {
  const database = await openDatabase({ service: 'graph', url: config.DATABASE_URL, dataDir: config.TEMPORA_DATA_DIR, migrations, logger });
  const redis = await connectRedis(config.REDIS_URL, logger);
  const repository = new GraphRepository(database.knex);
  const feed = database.shared ? new PostgresChangeFeed(database.knex, logger) : localChangeFeed;
  const graph = new GraphService(repository, feed, { autoLinkMaxPerType: config.AUTOLINK_MAX_PER_TYPE, rebuildRatio: config.INDEX_REBUILD_RATIO }, logger);
  const reindexed = await graph.indexFigures();
  if (reindexed > 0) logger.info({ moments: reindexed }, 'figure keys re-derived');
  if (config.GRAPH_SEED) {
    const seeded = await seedGraph(graph);
    if (seeded.written) logger.info({ moments: seeded.moments }, 'graph seeded');
  }
  await graph.start();
  return { database, redis, feed, graph };
}

/** The service's metrics beyond the kit's: the in-memory index's gauges and the MCP tool calls. */
function graphMetrics(config: GraphConfig, graph: GraphService) {
  // With workers in this process, their graph_worker_* series are served beside the service's own.
  const workerMetrics = config.GRAPH_WORKERS.length > 0 ? new GraphWorkerMetrics('graph') : undefined;
  const metrics = workerMetrics ?? new Metrics('graph');
  const indexGauges: Array<[name: string, help: string, read: () => number]> = [
    ['graph_index_edges', 'Edges held by the in-memory adjacency index (0 while it loads)', () => graph.indexStats.edges],
    ['graph_node_store_memory_bytes', 'Bytes held (estimated) by the in-memory node fields of the public moments', () => graph.indexStats.nodeMemoryBytes],
    ['graph_index_memory_bytes', 'Bytes held by the in-memory adjacency index', () => graph.indexStats.memoryBytes],
    ['graph_index_load_seconds', 'How long the last load of the adjacency index from the database took', () => graph.indexStats.loadSeconds],
  ];
  const mcpCalls = new Counter({
    name: 'graph_mcp_tool_calls_total',
    help: 'MCP tool calls by tool and outcome (ok, invalid: answered {error, suggestion}, failed)',
    labelNames: ['tool', 'outcome'],
    registers: [metrics.registry],
  });
  zeroed(mcpCalls, { tool: MCP_TOOLS, outcome: ['ok', 'invalid', 'failed'] });
  for (const [name, help, read] of indexGauges) {
    new Gauge({
      name,
      help,
      registers: [metrics.registry],
      collect() {
        this.set(read());
      },
    });
  }
  const countMcpCall: McpCallCounter = (tool, outcome) => mcpCalls.inc({ tool, outcome });
  return { metrics, workerMetrics, countMcpCall };
}

interface GraphAppParts {
  database: Database;
  redis: RedisClient | undefined;
  graph: GraphService;
  metrics: Metrics;
  countMcpCall: McpCallCounter;
}

/** The HTTP API: every route group, MCP beside them, rate limits, credentials and health. */
function graphApp(config: GraphConfig, logger: Logger, { database, redis, graph, metrics, countMcpCall }: GraphAppParts): ServiceApp {
  const deps = { graph, version: VERSION };
  const limiter = new RateLimiter({ redis, prefix: `${config.REDIS_KEY_PREFIX}:graph` });
  const limits = new GraphRateLimits(config, limiter);
  return createApp({
    name: 'graph',
    version: VERSION,
    title: 'Tempora graph service',
    description:
      'The public temporal causal graph of historical moments: reads, traversal, shortest paths, TDF ingest and export. Also an MCP server (Streamable HTTP) at /mcp/ and, where the gateway forwards it, /api/v1/graph/mcp.',
    config,
    logger,
    metrics,
    authenticators: [serviceKeyAuth(config.SERVICE_KEY), writerTokenAuth(config.WRITER_TOKENS), adminKeyAuth(config.ADMIN_KEY)],
    rateLimit: { limiter, windows: limits.windows },
    routes: [...momentRoutes(deps), ...discoveryRoutes(deps), ...traversalRoutes(deps), ...writeRoutes(deps), ...accountDataRoutes(deps)],
    extend: (router) => mountMcp(router, graph, limits, config.MCP_ALLOWED_HOSTS, countMcpCall),
    health: async () => {
      const db = await database.ping();
      return { status: db ? 'ok' : 'degraded', database: db, redis: redis ? redis.isReady : null, index: graph.indexStats.loaded ? 'loaded' : 'loading' };
    },
  });
}

/**
 * GRAPH_WORKERS (every role by default on the embedded database, which no worker process can share):
 * this process runs those roles itself, through the same GraphService, so its index sees their writes.
 */
function startWorkers(config: GraphConfig, graph: GraphService, logger: Logger, workerMetrics: GraphWorkerMetrics | undefined) {
  const workers = new Map<string, RunningWorker>();
  for (const role of config.GRAPH_WORKERS) workers.set(role, runRole(role, graph, config, logger.child({ worker: role }), workerMetrics!));
  if (workers.size > 0)
    logger.info(
      { roles: [...workers.keys()], generation: config.GENERATION_URL, concurrency: config.WORKER_CONCURRENCY, budgetUsd: config.WORKER_DAILY_BUDGET_USD },
      'in-process workers started',
    );
  // They stop taking work as soon as the shutdown begins; work in flight gets SHUTDOWN_GRACE_MS, then goes back to the queue.
  let stopped: Promise<unknown> | undefined;
  const stop = () => (stopped ??= Promise.all([...workers.values()].map((worker) => worker.stop(config.SHUTDOWN_GRACE_MS))));
  return { workers, stop };
}
