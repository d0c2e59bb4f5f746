import type { RedisClient } from '@tempora/kit/data';
import type { PoolKeys } from './protocol.ts';

/** What the pool's Redis stream and consumer group say about its backlog and its workers. */
export interface PoolStats {
  /** Tasks waiting or running: the stream's length, since finished tasks are deleted. */
  depth: number;
  /** Tasks no worker has picked up yet. */
  waiting: number;
  /** Age of the oldest task not yet finished (waiting or running), 0 when there is none. */
  oldestAgeSeconds: number;
  /** Workers (consumers of the group) that read, claimed or heartbeat within the live window. */
  workers: number;
}

/** XINFO replies as node-redis hands them over: flat [key, value, …] arrays (RESP2) or maps (RESP3). */
function recordOf(reply: unknown): Record<string, unknown> {
  if (reply instanceof Map) return Object.fromEntries(reply);
  if (Array.isArray(reply)) {
    const record: Record<string, unknown> = {};
    for (let index = 0; index + 1 < reply.length; index += 2) record[String(reply[index])] = reply[index + 1];
    return record;
  }
  return (reply ?? {}) as Record<string, unknown>;
}

/**
 * Reads the pool's state from Redis. `liveWindowMs` is the heartbeat window (AGENT_POOL_CLAIM_IDLE_MS): an
 * idle worker reads the stream every half second and a busy one heartbeats its tasks every third of the
 * window, so a consumer idle for longer is gone (the group keeps dead consumers for ever).
 */
export async function poolStats(redis: RedisClient, keys: PoolKeys, liveWindowMs: number): Promise<PoolStats> {
  const [length, groups, consumers, first, time]: unknown[] = await Promise.all([
    redis.sendCommand(['XLEN', keys.tasks]),
    redis.sendCommand(['XINFO', 'GROUPS', keys.tasks]),
    redis.sendCommand(['XINFO', 'CONSUMERS', keys.tasks, keys.group]),
    redis.sendCommand(['XRANGE', keys.tasks, '-', '+', 'COUNT', '1']),
    redis.sendCommand(['TIME']),
  ]);
  const depth = Number(length);
  const group = (groups as unknown[]).map(recordOf).find((entry) => entry.name === keys.group);
  // Every entry is either undelivered or pending (delivered, not acked): acked tasks are deleted. The group's
  // own `lag` is not used because Redis reports it as nil once entries have been deleted from the stream.
  const waiting = Math.max(0, depth - Number(group?.pending ?? 0));
  const workers = (consumers as unknown[]).map(recordOf).filter((consumer) => Number(consumer.idle) < liveWindowMs).length;
  // Entry ids begin with Redis's clock in ms: the age is read on that clock, not this host's.
  const [seconds, micros] = (time as string[]).map(Number) as [number, number];
  const oldestId = (first as Array<[string, unknown]>)[0]?.[0];
  const oldestAgeSeconds = oldestId ? Math.max(0, (seconds * 1000 + micros / 1000 - Number(oldestId.split('-')[0])) / 1000) : 0;
  return { depth, waiting, oldestAgeSeconds, workers };
}
