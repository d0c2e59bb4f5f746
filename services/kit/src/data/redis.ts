import { createClient } from 'redis';
import type { Logger } from '../observability/logger.ts';

export type RedisClient = ReturnType<typeof createClient>;

/**
 * Connects when REDIS_URL is set. Without it, callers fall back to in-process state (one replica only),
 * which is what `npm start` runs on.
 */
export async function connectRedis(url: string | undefined, logger: Logger): Promise<RedisClient | undefined> {
  if (!url) return undefined;
  const client: RedisClient = createClient({
    url,
    // Tried again at least once a second: a Redis that restarted is used again (and the rate limits shared
    // again) within a second of its return.
    socket: { reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 1_000), connectTimeout: 5_000 },
    // Commands fail fast while disconnected so rate limits fall back to their memory insurance.
    disableOfflineQueue: true,
  });
  let lastError = '';
  client.on('error', (error: Error) => {
    if (error.message !== lastError) logger.warn({ err: error }, 'redis connection error');
    lastError = error.message;
  });
  client.on('ready', () => {
    lastError = '';
  });
  await client.connect();
  return client;
}
