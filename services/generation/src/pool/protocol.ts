/**
 * The agent pool's wire protocol on Redis streams, shared by the coordinator (coordinator.ts) and the
 * workers (worker.ts): key names, entry fields, the consumer group, and the outcome of a task no worker ran.
 * The task and the outcome are JSON, parsed with their schemas (pipeline/task.ts) where they arrive: in a
 * rolling update the two ends may be different versions.
 */
import type { RedisClient } from '@tempora/kit/data';
import { emptyUsage } from '@tempora/kit/providers';
import type { z } from 'zod';
import { type AgentOutcome, mismatchOf } from '../pipeline/task.ts';

export interface PoolKeys {
  /** Tasks, read by the consumer group. */
  tasks: string;
  group: string;
  /** Set when a request was cancelled, so workers skip its queued tasks. */
  cancelled: (taskId: string) => string;
  /** One results stream per coordinating replica. */
  results: (instance: string) => string;
}

export const poolKeys = (prefix: string): PoolKeys => ({
  tasks: `${prefix}:generation:agent-tasks`,
  group: 'agent-pool',
  cancelled: (taskId) => `${prefix}:generation:cancelled:${taskId}`,
  results: (instance) => `${prefix}:generation:agent-results:${instance}`,
});

/**
 * Attributes of the pool's producer (`send`) and consumer (`process`) spans, after OpenTelemetry's
 * messaging conventions: the trace context travels in the task entry, so a worker's span continues the
 * coordinator's trace.
 */
export const messagingAttributes = (keys: PoolKeys, operation: 'send' | 'process') => ({
  'messaging.system': 'redis',
  'messaging.destination.name': keys.tasks,
  'messaging.operation.type': operation,
  'messaging.operation.name': operation,
});

/** Deliveries after which a task is failed rather than redelivered again. */
export const MAX_DELIVERIES = 3;

export type StreamEntry = [string, string[]];

export const fieldsOf = (flat: string[]): Record<string, string> => {
  const fields: Record<string, string> = {};
  for (let index = 0; index + 1 < flat.length; index += 2) fields[flat[index] as string] = flat[index + 1] as string;
  return fields;
};

/** XREAD / XREADGROUP replies come as [[key, entries]] or, from node-redis, as { key: entries }. */
export function streamsOf(reply: unknown): Array<[string, StreamEntry[]]> {
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

/** Tasks waiting or running (finished tasks are deleted, so the stream's length); 0 when Redis does not answer. */
export async function queueDepth(redis: RedisClient, keys: PoolKeys): Promise<number> {
  try {
    return Number(await redis.sendCommand(['XLEN', keys.tasks]));
  } catch {
    return 0;
  }
}

/** An entry's JSON field read with its schema: the value, or why it is not one, in a line for a log or a failure. */
export function parseField<S extends z.ZodType>(schema: S, raw: string | undefined): { ok: true; value: z.output<S> } | { ok: false; mismatch: string } {
  if (raw === undefined) return { ok: false, mismatch: 'the field is missing' };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    return { ok: false, mismatch: `not JSON (${(error as Error).message})` };
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, mismatch: mismatchOf(parsed.error) };
}

/** A task's result entry on the requesting replica's results stream. */
export const resultEntry = (taskId: string, outcome: AgentOutcome): string[] => [
  'MAXLEN',
  '~',
  '10000',
  '*',
  'task_id',
  taskId,
  'outcome',
  JSON.stringify(outcome),
];

export const failureOf = (code: string, message: string): AgentOutcome => ({ ok: false, error: { code, message }, usage: emptyUsage(), duration_ms: 0 });
