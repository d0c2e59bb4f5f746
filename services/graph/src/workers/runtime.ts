import { openDatabase } from '@tempora/kit/data';
import { serveWorkerEndpoints, type WorkerServer } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import { PostgresChangeFeed } from '../change-feed.ts';
import type { GraphConfig, rendererConfigFields, roleConfigFields } from '../config.ts';
import { GraphService } from '../graph-service.ts';
import { migrations } from '../migrations.ts';
import { GraphRepository } from '../repository/index.ts';
import { VERSION } from '../version.ts';
import { SpendBudget } from './budget.ts';
import type { WorkerConfig, WorkerRole } from './config.ts';
import { runDaily } from './daily.ts';
import { expandGraph } from './expander.ts';
import { judgePending } from './judge.ts';
import { PollingLoop } from './loop.ts';
import { GraphWorkerMetrics } from './metrics.ts';
import { workerTextModel } from './model.ts';
import { createRenderer } from './renderer.ts';

export interface RunningWorker {
  /** Settles when daily's run is done; the continuous roles run until stopped and leave it out. */
  finished?: Promise<unknown>;
  /** Graceful stop: the current work finishes for up to `graceMs`, then is interrupted and released. */
  stop(graceMs: number): Promise<void>;
}

export interface StartedWorker extends RunningWorker {
  /** The process's metrics: the role's counters and its budget, for the worker's /metrics. */
  metrics: GraphWorkerMetrics;
  /** Whether the database answers (the worker's /health). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/** What a role needs of the configuration, wherever it runs (the worker process, or the graph service in process). */
export type RoleConfig = Pick<GraphConfig, keyof typeof rendererConfigFields | keyof typeof roleConfigFields | 'GENERATION_URL' | 'SERVICE_KEY'>;

/**
 * Starts `role` over `graph`: renderer, expander and judge run until stopped; daily, in a worker process
 * (`once`), does one run and settles `finished`, and in process checks once a minute whether today's run is
 * done, so it runs each UTC day. `metrics` counts the role's work and exports its budget.
 */
export function runRole(
  role: WorkerRole,
  graph: GraphService,
  config: RoleConfig,
  logger: Logger,
  metrics: GraphWorkerMetrics,
  options: { once?: boolean } = {},
): RunningWorker {
  if (role === 'renderer') {
    const renderer = createRenderer(graph, config, logger, metrics);
    renderer.start();
    return { stop: (graceMs) => renderer.stop(graceMs) };
  }
  const budget = new SpendBudget(graph.repository.spend, role, config.WORKER_DAILY_BUDGET_USD);
  metrics.watch(budget);
  const model = workerTextModel(config);
  logger.info({ provider: model.provider.kind, model: model.model }, 'text model');
  const daily = async () => {
    const added = await runDaily(graph, model, budget, config.DAILY_MOMENTS);
    metrics.momentsAdded.inc({ role }, added.length);
    if (added.length > 0 || options.once) logger.info({ added: added.length }, 'daily run done');
    return added.length;
  };
  if (role === 'daily' && options.once) {
    const finished = daily();
    return { finished, stop: async () => void (await finished.catch(() => {})) };
  }
  const run =
    role === 'judge'
      ? (signal: AbortSignal) => judgePending(graph, model, budget, config.WORKER_CONCURRENCY, signal, metrics)
      : role === 'expander'
        ? async (signal: AbortSignal) => {
            const run = await expandGraph(
              graph,
              model,
              budget,
              { batch: config.EXPANDER_BATCH, maxNew: config.EXPANDER_MAX_NEW, minEdges: config.EXPANDER_MIN_EDGES },
              signal,
            );
            metrics.momentsAdded.inc({ role }, run.added);
            return run.described + run.expanded;
          }
        : daily;
  // Daily's question is cheap (is today's run recorded?) and its answer changes once a day.
  const loop = new PollingLoop(
    role,
    role === 'daily' ? daily : metrics.instrument(role, run),
    role === 'daily' ? DAILY_CHECK_MS : config.WORKER_POLL_MS,
    logger,
  );
  loop.start();
  return { stop: (graceMs) => loop.stop(graceMs) };
}

/** How often the in-process daily asks whether today's run is done. */
const DAILY_CHECK_MS = 60_000;

/**
 * One worker process: the graph's database and repository, and a GraphService that is never started. A
 * worker keeps no in-memory index of its own; its writes reach every API replica's index through the
 * change feed, like any replica's writes.
 */
export async function startWorker(role: WorkerRole, config: WorkerConfig, logger: Logger, metrics = new GraphWorkerMetrics()): Promise<StartedWorker> {
  const database = await openDatabase({
    service: 'graph',
    url: config.DATABASE_URL,
    dataDir: config.TEMPORA_DATA_DIR,
    migrations,
    logger,
    pool: { min: 0, max: config.WORKER_CONCURRENCY + 2 },
  });
  const feed = new PostgresChangeFeed(database.knex, logger);
  const graph = new GraphService(
    new GraphRepository(database.knex),
    feed,
    { autoLinkMaxPerType: config.AUTOLINK_MAX_PER_TYPE, rebuildRatio: config.INDEX_REBUILD_RATIO },
    logger,
  );
  const close = async () => {
    await feed.close();
    await database.close();
  };
  const worker = runRole(role, graph, config, logger, metrics, { once: true });
  return { ...worker, metrics, ping: () => database.ping(), close };
}

/**
 * renderer, expander and judge serve /health (200 while the database answers, else 503) and /metrics on
 * WORKER_PORT; daily, a CronJob's short run whose metrics would be gone before a scrape, serves nothing.
 */
export async function serveWorker(
  role: WorkerRole,
  config: Pick<WorkerConfig, 'WORKER_PORT' | 'HOST'>,
  worker: StartedWorker,
): Promise<WorkerServer | undefined> {
  if (role === 'daily' || config.WORKER_PORT === undefined) return undefined;
  return serveWorkerEndpoints({
    port: config.WORKER_PORT,
    host: config.HOST,
    service: 'graph-worker',
    version: VERSION,
    metrics: worker.metrics,
    health: async () => {
      const database = await worker.ping();
      return { status: database ? 'ok' : 'degraded', role, database };
    },
  });
}
