import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { context as otelContext, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { RedisClient } from '@tempora/kit/data';
import type { Logger } from '@tempora/kit/observability';
import type { AgentRunner } from '../pipeline/runner.ts';
import { type AgentOutcome, AgentOutcomeSchema, type AgentTask } from '../pipeline/task.ts';
import { ensureGroup, failureOf, fieldsOf, messagingAttributes, type PoolKeys, parseField, poolKeys, queueDepth, streamsOf } from './protocol.ts';
import { type PoolStats, poolStats } from './stats.ts';

const tracer = trace.getTracer('tempora-generation');

/**
 * The coordinator side of the agent pool: tasks go onto a Redis stream read by a consumer group of
 * workers; each worker XADDs the outcome to this instance's results stream, which one blocking reader drains.
 */
export class PoolCoordinator implements AgentRunner {
  readonly mode = 'redis' as const;
  private readonly redis: RedisClient;
  private reader: RedisClient | undefined;
  private readonly keys: PoolKeys;
  private readonly instance = `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
  private readonly waiting = new Map<string, (outcome: AgentOutcome) => void>();
  private readonly timeoutMs: number;
  private readonly claimIdleMs: number;
  private readonly logger: Logger;
  private running = true;
  private loop: Promise<void> | undefined;

  constructor(redis: RedisClient, prefix: string, timeoutMs: number, claimIdleMs: number, logger: Logger) {
    this.redis = redis;
    this.keys = poolKeys(prefix);
    this.timeoutMs = timeoutMs;
    this.claimIdleMs = claimIdleMs;
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
            if (resolve) resolve(this.outcomeOf(id, fields));
            await this.redis.sendCommand(['XDEL', stream, id]).catch(() => {});
          }
        }
      } catch (error) {
        if (!this.running) return;
        this.logger.warn({ err: error }, 'agent pool: reading results failed');
        // Redis went away: the tasks in flight and their results may be gone with it (a Redis without
        // persistence loses both), so their requests fail now instead of at the task timeout.
        if (!this.reader!.isReady) this.failWaiting('pool_unavailable', 'the agent pool lost its Redis connection while the task was in flight');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  /** A worker's outcome; one that does not parse (a worker of another version, say) fails its task as any failed call does. */
  private outcomeOf(entry: string, fields: Record<string, string>): AgentOutcome {
    const read = parseField(AgentOutcomeSchema, fields.outcome);
    if (read.ok) return read.value;
    this.logger.warn({ entry, task: fields.task_id, mismatch: read.mismatch }, 'agent pool: malformed outcome');
    return failureOf('malformed', `the agent pool's outcome does not parse: ${read.mismatch}`);
  }

  async run(task: AgentTask, signal: AbortSignal): Promise<AgentOutcome> {
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
      // The producer span's context travels in the entry: the parent of the worker's process span.
      const attributes = { ...messagingAttributes(this.keys, 'send'), 'gen_ai.agent.name': task.agent };
      tracer.startActiveSpan(`send ${this.keys.tasks}`, { kind: SpanKind.PRODUCER, attributes }, (span) => {
        const carrier: Record<string, string> = {};
        propagation.inject(otelContext.active(), carrier);
        this.redis
          .sendCommand([
            'XADD',
            this.keys.tasks,
            '*',
            'task_id',
            task.id,
            'reply_to',
            this.keys.results(this.instance),
            'task',
            JSON.stringify({ ...task, trace: carrier }),
          ])
          .then((id) => span.setAttribute('messaging.message.id', String(id)))
          .catch((error: Error) => {
            span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
            settle(failureOf('pool_unavailable', `the agent pool could not be reached: ${error.message}`));
          })
          .finally(() => span.end());
      });
    });
  }

  private failWaiting(code: string, message: string): void {
    for (const settle of [...this.waiting.values()]) settle(failureOf(code, message));
  }

  depth(): Promise<number> {
    return queueDepth(this.redis, this.keys);
  }

  stats(): Promise<PoolStats> {
    return poolStats(this.redis, this.keys, this.claimIdleMs);
  }

  async close(): Promise<void> {
    this.running = false;
    this.failWaiting('cancelled', 'the service is shutting down');
    await this.loop?.catch(() => {});
    await this.reader?.quit().catch(() => {});
    await this.redis.sendCommand(['DEL', this.keys.results(this.instance)]).catch(() => {});
  }
}
