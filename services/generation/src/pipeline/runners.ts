import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { context as otelContext, propagation, trace } from '@opentelemetry/api';
import type { Logger } from '@tempora/kit/observability';
import type { RedisClient } from '@tempora/kit/data';
import { emptyUsage } from '@tempora/kit/providers';
import type { ProviderSet } from '../providers.ts';
import { executeTask, type AgentOutcome, type AgentTask } from './task.ts';

/** Runs agent tasks: in this process, or on the Redis agent pool. */
export interface AgentRunner {
  mode: 'in-process' | 'redis';
  run(task: AgentTask, signal: AbortSignal): Promise<AgentOutcome>;
  /** Tasks waiting or running on the pool (0 in-process). */
  depth(): Promise<number>;
  close(): Promise<void>;
}

export class InProcessRunner implements AgentRunner {
  readonly mode = 'in-process' as const;
  private readonly providers: ProviderSet;

  constructor(providers: ProviderSet) {
    this.providers = providers;
  }

  run(task: AgentTask, signal: AbortSignal): Promise<AgentOutcome> {
    return executeTask(task, this.providers, signal);
  }

  async depth() {
    return 0;
  }

  async close() {}
}

export interface PoolKeys {
  tasks: string;
  group: string;
  cancelled: (taskId: string) => string;
  results: (instance: string) => string;
}

export const poolKeys = (prefix: string): PoolKeys => ({
  tasks: `${prefix}:generation:agent-tasks`,
  group: 'agent-pool',
  cancelled: (taskId) => `${prefix}:generation:cancelled:${taskId}`,
  results: (instance) => `${prefix}:generation:agent-results:${instance}`,
});

type StreamEntry = [string, string[]];
const fieldsOf = (flat: string[]): Record<string, string> => {
  const fields: Record<string, string> = {};
  for (let index = 0; index + 1 < flat.length; index += 2) fields[flat[index] as string] = flat[index + 1] as string;
  return fields;
};

/** XREAD / XREADGROUP replies come as [[key, entries]] or, from node-redis, as { key: entries }. */
function streamsOf(reply: unknown): Array<[string, StreamEntry[]]> {
  if (!reply) return [];
  if (Array.isArray(reply)) return reply as Array<[string, StreamEntry[]]>;
  if (reply instanceof Map) return [...reply.entries()] as Array<[string, StreamEntry[]]>;
  return Object.entries(reply as Record<string, StreamEntry[]>);
}

export async function ensureGroup(redis: RedisClient, keys: PoolKeys): Promise<void> {
  try {
    await redis.sendCommand(['XGROUP', 'CREATE', keys.tasks, keys.group, '0', 'MKSTREAM']);
  } catch (error) {
    if (!String((error as Error).message).includes('BUSYGROUP')) throw error;
  }
}

/** Deliveries after which a task is failed rather than redelivered again. */
const MAX_DELIVERIES = 3;

const failureOf = (code: string, message: string): AgentOutcome => ({ ok: false, error: { code, message }, usage: emptyUsage(), duration_ms: 0 });

/**
 * The coordinator side of the agent pool: tasks go onto a Redis stream read by a consumer group of
 * workers; each worker XADDs the outcome to this instance's results stream, which one blocking reader drains.
 */
export class RedisPoolRunner implements AgentRunner {
  readonly mode = 'redis' as const;
  private readonly redis: RedisClient;
  private reader: RedisClient | undefined;
  private readonly keys: PoolKeys;
  private readonly instance = `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
  private readonly waiting = new Map<string, (outcome: AgentOutcome) => void>();
  private readonly timeoutMs: number;
  private readonly logger: Logger;
  private running = true;
  private loop: Promise<void> | undefined;

  constructor(redis: RedisClient, prefix: string, timeoutMs: number, logger: Logger) {
    this.redis = redis;
    this.keys = poolKeys(prefix);
    this.timeoutMs = timeoutMs;
    this.logger = logger;
  }

  async start(): Promise<void> {
    await ensureGroup(this.redis, this.keys);
    this.reader = this.redis.duplicate();
    this.reader.on('error', () => {});
    await this.reader.connect();
    this.loop = this.readResults();
  }

  private async readResults(): Promise<void> {
    const stream = this.keys.results(this.instance);
    let last = '0-0';
    while (this.running) {
      try {
        const reply = await this.reader!.sendCommand(['XREAD', 'COUNT', '100', 'BLOCK', '500', 'STREAMS', stream, last]);
        for (const [, entries] of streamsOf(reply)) {
          for (const [id, flat] of entries) {
            last = id;
            const fields = fieldsOf(flat);
            const resolve = this.waiting.get(fields.task_id ?? '');
            if (resolve) resolve(JSON.parse(fields.outcome ?? 'null') as AgentOutcome);
            await this.redis.sendCommand(['XDEL', stream, id]).catch(() => {});
          }
        }
      } catch (error) {
        if (!this.running) return;
        this.logger.warn({ err: error }, 'agent pool: reading results failed');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  async run(task: AgentTask, signal: AbortSignal): Promise<AgentOutcome> {
    const carrier: Record<string, string> = {};
    propagation.inject(otelContext.active(), carrier);
    const payload = JSON.stringify({ ...task, trace: carrier });
    return new Promise<AgentOutcome>((resolve) => {
      let settled = false;
      const settle = (outcome: AgentOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.waiting.delete(task.id);
        resolve(outcome);
      };
      const onAbort = () => {
        void this.redis.sendCommand(['SET', this.keys.cancelled(task.id), '1', 'EX', '600']).catch(() => {});
        settle(failureOf('cancelled', 'the request was cancelled'));
      };
      const timer = setTimeout(() => settle(failureOf('timeout', `no agent pool worker finished ${task.agent} within ${this.timeoutMs} ms`)), this.timeoutMs);
      timer.unref();
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(task.id, settle);
      this.redis
        .sendCommand(['XADD', this.keys.tasks, '*', 'task_id', task.id, 'reply_to', this.keys.results(this.instance), 'task', payload])
        .catch((error: Error) => settle(failureOf('pool_unavailable', `the agent pool could not be reached: ${error.message}`)));
    });
  }

  async depth(): Promise<number> {
    try {
      return Number(await this.redis.sendCommand(['XLEN', this.keys.tasks]));
    } catch {
      return 0;
    }
  }

  async close(): Promise<void> {
    this.running = false;
    for (const resolve of this.waiting.values()) resolve(failureOf('cancelled', 'the service is shutting down'));
    await this.loop?.catch(() => {});
    await this.reader?.quit().catch(() => {});
    await this.redis.sendCommand(['DEL', this.keys.results(this.instance)]).catch(() => {});
  }
}

export interface WorkerOptions {
  redis: RedisClient;
  prefix: string;
  providers: ProviderSet;
  logger: Logger;
  concurrency: number;
  /** A task whose worker has not heartbeaten for this long is claimed by another worker. */
  claimIdleMs: number;
}

/** An agent pool worker: consumes tasks through the consumer group, heartbeats them, returns outcomes. */
export class PoolWorker {
  readonly consumer = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly options: WorkerOptions;
  private readonly keys: PoolKeys;
  private running = true;
  private readonly connections: RedisClient[] = [];
  private slots: Array<Promise<void>> = [];
  private readonly controllers = new Set<AbortController>();
  processed = 0;

  constructor(options: WorkerOptions) {
    this.options = options;
    this.keys = poolKeys(options.prefix);
  }

  async start(): Promise<void> {
    await ensureGroup(this.options.redis, this.keys);
    for (let slot = 0; slot < this.options.concurrency; slot += 1) {
      const connection = this.options.redis.duplicate();
      connection.on('error', () => {});
      await connection.connect();
      this.connections.push(connection);
      this.slots.push(this.slot(connection));
    }
    this.options.logger.info({ consumer: this.consumer, concurrency: this.options.concurrency }, 'agent pool worker started');
  }

  private async next(connection: RedisClient): Promise<StreamEntry | undefined> {
    // Tasks abandoned by a dead worker first, then new ones.
    const claimed = (await connection.sendCommand(['XAUTOCLAIM', this.keys.tasks, this.keys.group, this.consumer, String(this.options.claimIdleMs), '0-0', 'COUNT', '1'])) as [string, StreamEntry[]];
    const reclaimed = claimed?.[1]?.find((entry) => Array.isArray(entry) && entry[1]);
    if (reclaimed) {
      this.options.logger.info({ id: reclaimed[0] }, 'agent pool: redelivered task claimed');
      if (await this.poisoned(connection, reclaimed)) return undefined;
      return reclaimed;
    }
    const reply = await connection.sendCommand(['XREADGROUP', 'GROUP', this.keys.group, this.consumer, 'COUNT', '1', 'BLOCK', '500', 'STREAMS', this.keys.tasks, '>']);
    return streamsOf(reply)[0]?.[1]?.[0];
  }

  /** A task delivered MAX_DELIVERIES times has killed or outlived that many workers: it fails instead of going round again. */
  private async poisoned(connection: RedisClient, [id, flat]: StreamEntry): Promise<boolean> {
    const pending = (await connection.sendCommand(['XPENDING', this.keys.tasks, this.keys.group, id, id, '1'])) as Array<[string, string, number, number]>;
    const deliveries = Number(pending?.[0]?.[3] ?? 0);
    if (deliveries <= MAX_DELIVERIES) return false;
    const fields = fieldsOf(flat);
    this.options.logger.error({ entry: id, deliveries }, 'agent pool: task abandoned after repeated redelivery');
    if (fields.reply_to && fields.task_id) {
      const outcome = failureOf('worker_lost', `the agent task was abandoned after ${deliveries - 1} workers stopped while running it`);
      await connection.sendCommand(['XADD', fields.reply_to, 'MAXLEN', '~', '10000', '*', 'task_id', fields.task_id, 'outcome', JSON.stringify(outcome)]).catch(() => {});
    }
    await connection.sendCommand(['XACK', this.keys.tasks, this.keys.group, id]).catch(() => {});
    await connection.sendCommand(['XDEL', this.keys.tasks, id]).catch(() => {});
    return true;
  }

  private async slot(connection: RedisClient): Promise<void> {
    while (this.running) {
      let entry: StreamEntry | undefined;
      try {
        entry = await this.next(connection);
      } catch (error) {
        if (!this.running) return;
        this.options.logger.warn({ err: error }, 'agent pool: reading tasks failed');
        await new Promise((resolve) => setTimeout(resolve, 250));
        continue;
      }
      if (entry) await this.process(connection, entry);
    }
  }

  private async process(connection: RedisClient, [id, flat]: StreamEntry): Promise<void> {
    const fields = fieldsOf(flat);
    const redis = this.options.redis;
    const heartbeat = setInterval(() => {
      void redis.sendCommand(['XCLAIM', this.keys.tasks, this.keys.group, this.consumer, '0', id, 'JUSTID']).catch(() => {});
    }, Math.max(50, Math.floor(this.options.claimIdleMs / 3)));
    const controller = new AbortController();
    this.controllers.add(controller);
    try {
      const task = JSON.parse(fields.task ?? 'null') as AgentTask | null;
      if (!task || !fields.reply_to) throw new Error('malformed task entry');
      let outcome: AgentOutcome;
      if (await redis.sendCommand(['EXISTS', this.keys.cancelled(task.id)]).then(Number)) {
        outcome = failureOf('cancelled', 'the request was cancelled');
      } else {
        this.options.logger.info({ task: task.id, agent: task.agent, entry: id }, 'agent task started');
        const parent = propagation.extract(otelContext.active(), task.trace ?? {});
        outcome = await otelContext.with(parent, () =>
          trace.getTracer('tempora-generation').startActiveSpan(`agent-pool ${task.agent}`, async (span) => {
            try {
              return await executeTask(task, this.options.providers, controller.signal);
            } finally {
              span.end();
            }
          }),
        );
      }
      await redis.sendCommand(['XADD', fields.reply_to, 'MAXLEN', '~', '10000', '*', 'task_id', task.id, 'outcome', JSON.stringify(outcome)]);
      // A replica that died never deletes its results stream: let Redis drop it an hour after the last result.
      await redis.sendCommand(['EXPIRE', fields.reply_to, '3600']).catch(() => {});
      this.processed += 1;
      this.options.logger.info({ task: task.id, agent: task.agent, ok: outcome.ok }, 'agent task finished');
    } catch (error) {
      this.options.logger.error({ err: error, entry: id }, 'agent pool: task failed');
    } finally {
      clearInterval(heartbeat);
      this.controllers.delete(controller);
      await redis.sendCommand(['XACK', this.keys.tasks, this.keys.group, id]).catch(() => {});
      await redis.sendCommand(['XDEL', this.keys.tasks, id]).catch(() => {});
      void connection;
    }
  }

  async close(): Promise<void> {
    this.running = false;
    await Promise.all(this.slots);
    for (const connection of this.connections) await connection.quit().catch(() => {});
  }
}
