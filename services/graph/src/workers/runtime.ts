import { openDatabase } from '@tempora/kit/database';
import type { Logger } from '@tempora/kit/logger';
import { PostgresChangeFeed } from '../change-feed.ts';
import { GraphService } from '../graph-service.ts';
import { migrations } from '../migrations.ts';
import { GraphRepository } from '../repository.ts';
import { SpendBudget } from './budget.ts';
import type { WorkerConfig, WorkerRole } from './config.ts';
import { runDaily } from './daily.ts';
import { expandUnderConnected } from './expander.ts';
import { judgePending } from './judge.ts';
import { PollingLoop } from './loop.ts';
import { workerTextModel } from './model.ts';
import { createRenderer } from './renderer.ts';

export interface RunningWorker {
  /** Resolves when the role's work is done: at once for the continuous roles, after its run for daily. */
  finished: Promise<unknown>;
  /** Graceful stop: the current work finishes for up to `graceMs`, then is interrupted and released. */
  stop(graceMs: number): Promise<void>;
}

/**
 * One worker process: the graph's database and repository, and a GraphService that is never started. A
 * worker keeps no in-memory index of its own; its writes reach every API replica's index through the
 * change feed, like any replica's writes.
 */
export async function startWorker(role: WorkerRole, config: WorkerConfig, logger: Logger): Promise<RunningWorker & { close(): Promise<void> }> {
  const database = await openDatabase({ service: 'graph', url: config.DATABASE_URL, dataDir: config.TEMPORA_DATA_DIR, migrations, logger, pool: { min: 0, max: config.WORKER_CONCURRENCY + 2 } });
  const feed = new PostgresChangeFeed(database.knex, logger);
  const graph = new GraphService(new GraphRepository(database.knex), feed, { autoLinkMaxPerType: config.AUTOLINK_MAX_PER_TYPE, rebuildRatio: config.INDEX_REBUILD_RATIO }, logger);
  const close = async () => {
    await feed.close();
    await database.close();
  };
  const worker = ((): RunningWorker => {
    if (role === 'renderer') {
      const renderer = createRenderer(graph, config, logger);
      renderer.start();
      return { finished: Promise.resolve(), stop: (graceMs) => renderer.stop(graceMs) };
    }
    const budget = new SpendBudget(graph.repository, role, config.WORKER_DAILY_BUDGET_USD);
    const model = workerTextModel(config);
    logger.info({ provider: model.provider.kind, model: model.model }, 'text model');
    if (role === 'daily') {
      const finished = runDaily(graph, model, budget, config.DAILY_MOMENTS).then((added) => logger.info({ added: added.length }, 'daily run done'));
      return { finished, stop: async () => void (await finished.catch(() => {})) };
    }
    const loop =
      role === 'judge'
        ? new PollingLoop('judge', (signal) => judgePending(graph, model, budget, config.WORKER_CONCURRENCY, signal), config.WORKER_POLL_MS, logger)
        : new PollingLoop(
            'expander',
            async (signal) => (await expandUnderConnected(graph, model, budget, { batch: config.EXPANDER_BATCH, maxNew: config.EXPANDER_MAX_NEW, minEdges: config.EXPANDER_MIN_EDGES }, signal)).expanded,
            config.WORKER_POLL_MS,
            logger,
          );
    loop.start();
    return { finished: Promise.resolve(), stop: (graceMs) => loop.stop(graceMs) };
  })();
  return { ...worker, close };
}
