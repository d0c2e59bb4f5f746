import type { RateWindow } from '@tempora/kit/rate-limit';
import type { RedisClient } from '@tempora/kit/redis';
import type { Logger } from '@tempora/kit/logger';

export interface LimitState {
  limit: number;
  remaining: number;
  resetSeconds: number;
  limited: boolean;
}

/**
 * Counts a request in every window in one Redis round trip: INCR each window's key, starting its expiry
 * at the first request (fixed windows, as rate-limiter-flexible counts them), and return count and TTL.
 */
const SCRIPT = `local out = {}
for i, key in ipairs(KEYS) do
  local count = redis.call('INCR', key)
  if count == 1 then redis.call('PEXPIRE', key, ARGV[i]) end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then redis.call('PEXPIRE', key, ARGV[i]) ttl = tonumber(ARGV[i]) end
  out[#out + 1] = count
  out[#out + 1] = ttl
end
return out`;

/**
 * The gateway's rate limiter: every window of a request counted in one Redis script call (the kit's
 * RateLimiter makes one rate-limiter-flexible call per window, measured 3× the client CPU), shared by
 * all replicas, with an in-memory insurance count that takes over while Redis is unreachable. The
 * state reported is the tightest window's: the limited one, else the one with the fewest requests left.
 */
export class WindowLimiter {
  private readonly redis: RedisClient | undefined;
  private readonly prefix: string;
  private readonly logger: Logger | undefined;
  private sha: string | undefined;
  private readonly memory = new Map<string, { count: number; resetAt: number }>();

  constructor(options: { redis: RedisClient | undefined; prefix: string; logger?: Logger }) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.logger = options.logger;
  }

  private keyOf(window: RateWindow): string {
    return `${this.prefix}:${window.name}:${window.key}`;
  }

  private async countInRedis(keys: string[], durations: string[]): Promise<number[]> {
    const redis = this.redis!;
    this.sha ??= await redis.scriptLoad(SCRIPT);
    try {
      return (await redis.evalSha(this.sha, { keys, arguments: durations })) as number[];
    } catch (error) {
      if (!String((error as Error).message).includes('NOSCRIPT')) throw error;
      this.sha = await redis.scriptLoad(SCRIPT);
      return (await redis.evalSha(this.sha, { keys, arguments: durations })) as number[];
    }
  }

  private countInMemory(keys: string[], durations: number[]): number[] {
    const now = Date.now();
    if (this.memory.size > 100_000) for (const [key, entry] of this.memory) if (entry.resetAt <= now) this.memory.delete(key);
    return keys.flatMap((key, index) => {
      let entry = this.memory.get(key);
      if (!entry || entry.resetAt <= now) {
        entry = { count: 0, resetAt: now + durations[index]! };
        this.memory.set(key, entry);
      }
      entry.count += 1;
      return [entry.count, entry.resetAt - now];
    });
  }

  async consume(windows: RateWindow[]): Promise<LimitState> {
    const keys = windows.map((window) => this.keyOf(window));
    const durations = windows.map((window) => window.durationSeconds * 1000);
    let counts: number[];
    if (this.redis?.isReady) {
      try {
        counts = await this.countInRedis(keys, durations.map(String));
      } catch (error) {
        this.logger?.warn({ err: error }, 'rate limits counted in memory: redis failed');
        counts = this.countInMemory(keys, durations);
      }
    } else {
      counts = this.countInMemory(keys, durations);
    }
    const states = windows.map((window, index) => {
      const count = Number(counts[index * 2]);
      const ttl = Math.max(0, Number(counts[index * 2 + 1]));
      return { window, remaining: window.points - count, ttl, limited: count > window.points };
    });
    const tightest = states.reduce((worst, state) => {
      if (state.limited !== worst.limited) return state.limited ? state : worst;
      if (state.limited) return state.ttl > worst.ttl ? state : worst;
      return state.remaining < worst.remaining ? state : worst;
    });
    return {
      limit: tightest.window.points,
      remaining: Math.max(0, tightest.remaining),
      resetSeconds: Math.max(1, Math.ceil(tightest.ttl / 1000)),
      limited: tightest.limited,
    };
  }
}
