import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { context as otelContext, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { RedisClient } from '@tempora/kit/data';
import type { Logger } from '@tempora/kit/observability';
import { type AgentOutcome, type AgentTask, AgentTaskSchema, executeTask } from '../pipeline/task.ts';
import type { ProviderSet } from '../providers.ts';
import {
  ensureGroup,
  failureOf,
  fieldsOf,
  MAX_DELIVERIES,
  messagingAttributes,
  type PoolKeys,
  parseField,
  poolKeys,
  resultEntry,
  type StreamEntry,
  streamsOf,
} from './protocol.ts';

export interface WorkerOptions {
  redis: RedisClient;
  prefix: string;
  providers: ProviderSet;
  logger: Logger;
  concurrency: number;
  /** A task whose worker has not heartbeaten for this long is claimed by another worker. */
  claimIdleMs: number;
}

/**
 * How often a worker asks whether the request of a task it runs is gone (the client left, the generation's
 * deadline passed, a required agent failed): the task's model calls are then aborted, so a hung vendor does
 * not keep a worker slot, and its retries do not go on, long after the request ended.
 */
const CANCEL_CHECK_MS = 500;

/** Sends a task's outcome to the replica that asked for it. */
async function answer(redis: RedisClient, replyTo: string, taskId: string, outcome: AgentOutcome): Promise<void> {
  await redis.sendCommand(['XADD', replyTo, ...resultEntry(taskId, outcome)]);
  // A replica that died never deletes its results stream: let Redis drop it an hour after the last result.
  await redis.sendCommand(['EXPIRE', replyTo, '3600']).catch(() => {});
}

/** A task done with (run, refused or abandoned) leaves the group's pending list and the stream. */
async function retire(redis: RedisClient, keys: PoolKeys, id: string): Promise<void> {
  await redis.sendCommand(['XACK', keys.tasks, keys.group, id]).catch(() => {});
  await redis.sendCommand(['XDEL', keys.tasks, id]).catch(() => {});
}

/** An agent pool worker: consumes tasks through the consumer group, heartbeats them, returns outcomes. */
export class PoolWorker {
  readonly consumer = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly options: WorkerOptions;
  private readonly keys: PoolKeys;
  private running = true;
  private readonly connections: RedisClient[] = [];
  private slots: Array<Promise<void>> = [];
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
    const claimed = (await connection.sendCommand([
      'XAUTOCLAIM',
      this.keys.tasks,
      this.keys.group,
      this.consumer,
      String(this.options.claimIdleMs),
      '0-0',
      'COUNT',
      '1',
    ])) as [string, StreamEntry[]];
    const reclaimed = claimed?.[1]?.find((entry) => Array.isArray(entry) && entry[1]);
    if (reclaimed) {
      this.options.logger.info({ id: reclaimed[0] }, 'agent pool: redelivered task claimed');
      if (await this.poisoned(connection, reclaimed)) return undefined;
      return reclaimed;
    }
    const reply = await connection.sendCommand([
      'XREADGROUP',
      'GROUP',
      this.keys.group,
      this.consumer,
      'COUNT',
      '1',
      'BLOCK',
      '500',
      'STREAMS',
      this.keys.tasks,
      '>',
    ]);
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
      await answer(connection, fields.reply_to, fields.task_id, outcome).catch(() => {});
    }
    await retire(connection, this.keys, id);
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
        // A Redis that restarted without its data has lost the group too: made again, it reads the stream from its start.
        if (String((error as Error).message).includes('NOGROUP')) await ensureGroup(connection, this.keys).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 250));
        continue;
      }
      if (entry) await this.process(entry);
    }
  }

  private async process([id, flat]: StreamEntry): Promise<void> {
    const fields = fieldsOf(flat);
    const redis = this.options.redis;
    const read = parseField(AgentTaskSchema, fields.task);
    if (!read.ok || !fields.reply_to) return this.drop(redis, id, fields, read.ok ? 'the entry has no reply_to' : read.mismatch);
    const task = read.value;
    const heartbeat = setInterval(
      () => {
        void redis.sendCommand(['XCLAIM', this.keys.tasks, this.keys.group, this.consumer, '0', id, 'JUSTID']).catch(() => {});
      },
      Math.max(50, Math.floor(this.options.claimIdleMs / 3)),
    );
    try {
      const outcome = (await redis.sendCommand(['EXISTS', this.keys.cancelled(task.id)]).then(Number))
        ? failureOf('cancelled', 'the request was cancelled')
        : await this.run(id, task);
      await answer(redis, fields.reply_to, task.id, outcome);
      this.processed += 1;
      this.options.logger.info({ task: task.id, agent: task.agent, ok: outcome.ok }, 'agent task finished');
    } catch (error) {
      this.options.logger.error({ err: error, entry: id }, 'agent pool: task failed');
    } finally {
      clearInterval(heartbeat);
      await retire(redis, this.keys, id);
    }
  }

  /**
   * A task entry that does not parse (from a coordinator of another version, say) is dropped; when the entry
   * says where and for which task, its coordinator is answered with a 'malformed' failure at once rather than
   * left waiting for its timeout.
   */
  private async drop(redis: RedisClient, id: string, fields: Record<string, string>, mismatch: string): Promise<void> {
    this.options.logger.warn({ entry: id, task: fields.task_id, mismatch }, 'agent pool: malformed task dropped');
    if (fields.reply_to && fields.task_id) {
      const outcome = failureOf('malformed', `the agent pool worker could not read the task: ${mismatch}`);
      await answer(redis, fields.reply_to, fields.task_id, outcome).catch(() => {});
    }
    await retire(redis, this.keys, id);
  }

  /** Runs a task under a consumer span, aborting its model calls once its request has ended. */
  private async run(id: string, task: AgentTask): Promise<AgentOutcome> {
    const redis = this.options.redis;
    this.options.logger.info({ task: task.id, agent: task.agent, entry: id }, 'agent task started');
    const cancelled = new AbortController();
    // The coordinator marks a request's tasks cancelled when it ends without them.
    const watch = setInterval(() => {
      void redis
        .sendCommand(['EXISTS', this.keys.cancelled(task.id)])
        .then((found) => {
          if (Number(found) && !cancelled.signal.aborted) {
            this.options.logger.info({ task: task.id, agent: task.agent }, 'agent task cancelled: its request has ended');
            cancelled.abort(new Error('the request was cancelled'));
          }
        })
        .catch(() => {});
    }, CANCEL_CHECK_MS);
    // The coordinator's producer span is the parent, and a link as the messaging conventions ask of a process span.
    const parent = propagation.extract(otelContext.active(), task.trace ?? {});
    const producer = trace.getSpanContext(parent);
    const attributes = {
      ...messagingAttributes(this.keys, 'process'),
      'messaging.message.id': id,
      'messaging.consumer.group.name': this.keys.group,
      'messaging.client.id': this.consumer,
      'gen_ai.agent.name': task.agent,
    };
    try {
      return await trace
        .getTracer('tempora-generation')
        .startActiveSpan(
          `process ${this.keys.tasks}`,
          { kind: SpanKind.CONSUMER, attributes, links: producer ? [{ context: producer }] : [] },
          parent,
          async (span) => {
            try {
              const result = await executeTask(task, this.options.providers, cancelled.signal);
              if (!result.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: result.error.message });
              return result;
            } finally {
              span.end();
            }
          },
        );
    } finally {
      clearInterval(watch);
    }
  }

  async close(): Promise<void> {
    this.running = false;
    await Promise.all(this.slots);
    for (const connection of this.connections) await connection.quit().catch(() => {});
  }
}
