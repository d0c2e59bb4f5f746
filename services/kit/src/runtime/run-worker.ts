import type { z } from 'zod';
import type { Logger } from '../observability/logger.ts';
import { startTracing } from '../observability/tracing.ts';

/** A worker process once started: how it ends by itself (if it does) and how it stops when asked. */
export interface StartedWorkerProcess {
  logger: Logger;
  /** Settles when a run-once worker is done (exit 0) or failed (exit 1); continuous workers leave it out. */
  finished?: Promise<unknown>;
  /** Graceful stop on SIGTERM/SIGINT: finish or release the work in hand, close endpoints and connections. */
  stop(): Promise<void>;
}

/** What a worker's entry point hands to `runWorker`, loaded only once tracing is on. */
export interface WorkerModule<S extends z.ZodType> {
  configSchema: S;
  start(config: z.output<S>): Promise<StartedWorkerProcess>;
}

/**
 * The whole life of a worker process, as `runService` is a service's: tracing first, configuration from
 * the environment (exit 1 with every problem named; `start` may throw a ConfigError too), then until the
 * work is done or a signal arrives. A second signal during the stop exits at once.
 */
export async function runWorker<S extends z.ZodType>(name: string, version: string, load: () => Promise<WorkerModule<S>>): Promise<void> {
  const tracing = startTracing(name, version);
  const { loadConfig, ConfigError } = await import('./config.ts');
  try {
    const module = await load();
    const worker = await module.start(loadConfig(module.configSchema));
    let stopping = false;
    const stop = async (code: number) => {
      if (stopping) process.exit(1);
      stopping = true;
      await worker.stop();
      await tracing.shutdown().catch(() => {});
      process.exit(code);
    };
    process.on('SIGTERM', () => void stop(0));
    process.on('SIGINT', () => void stop(0));
    worker.finished?.then(
      () => stop(0),
      (error: unknown) => {
        worker.logger.error({ err: error }, `${name} failed`);
        return stop(1);
      },
    );
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`${name}: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
}
