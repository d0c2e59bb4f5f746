import type { Context, Next } from 'koa';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { Problem } from './errors.ts';
import type { RedisClient } from './redis.ts';

/** One window a request counts against, e.g. "graph-public: 60 per 60 s for ip:1.2.3.4". */
export interface RateWindow {
  /** Names the limiter; windows with the same name share counters. */
  name: string;
  points: number;
  durationSeconds: number;
  key: string;
}

export type WindowResolver = (ctx: Context) => RateWindow[];

/**
 * Counts every request against the windows `resolve` names, in Redis when it is configured (shared by
 * all replicas) with an in-memory insurance limiter that takes over while Redis is unreachable.
 * The headers describe the tightest window: the one with the fewest remaining requests.
 */
export class RateLimiter {
  private readonly limiters = new Map<string, RateLimiterAbstract>();
  private readonly redis: RedisClient | undefined;
  private readonly prefix: string;

  constructor(options: { redis: RedisClient | undefined; prefix: string }) {
    this.redis = options.redis;
    this.prefix = options.prefix;
  }

  private limiter(window: RateWindow): RateLimiterAbstract {
    const id = `${window.name}:${window.points}:${window.durationSeconds}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      const shape = { points: window.points, duration: window.durationSeconds, keyPrefix: `${this.prefix}:${window.name}` };
      limiter = this.redis
        ? new RateLimiterRedis({ ...shape, storeClient: this.redis, useRedisPackage: true, insuranceLimiter: new RateLimiterMemory(shape) })
        : new RateLimiterMemory(shape);
      this.limiters.set(id, limiter);
    }
    return limiter;
  }

  /** Consumes one point in every window; resolves to the tightest window's state. */
  async consume(windows: RateWindow[]): Promise<{ limit: number; remaining: number; resetSeconds: number; limited: boolean }> {
    const outcomes = await Promise.all(
      windows.map(async (window) => {
        try {
          const res = await this.limiter(window).consume(window.key);
          return { window, res, limited: false };
        } catch (error) {
          if (error instanceof RateLimiterRes) return { window, res: error, limited: true };
          throw error;
        }
      }),
    );
    const tightest = outcomes.reduce((worst, outcome) => {
      if (outcome.limited !== worst.limited) return outcome.limited ? outcome : worst;
      if (outcome.limited) return outcome.res.msBeforeNext > worst.res.msBeforeNext ? outcome : worst;
      return outcome.res.remainingPoints < worst.res.remainingPoints ? outcome : worst;
    });
    return {
      limit: tightest.window.points,
      remaining: Math.max(0, tightest.res.remainingPoints),
      resetSeconds: Math.max(1, Math.ceil(tightest.res.msBeforeNext / 1000)),
      limited: tightest.limited,
    };
  }

  /** `onLimited` observes each refusal (e.g. to count it by window in a metric). */
  middleware(resolve: WindowResolver, onLimited?: (ctx: Context, windows: RateWindow[]) => void) {
    return async (ctx: Context, next: Next): Promise<void> => {
      const windows = resolve(ctx);
      if (windows.length === 0) return next();
      const state = await this.consume(windows);
      const headers = {
        'X-RateLimit-Limit': String(state.limit),
        'X-RateLimit-Remaining': String(state.remaining),
        'X-RateLimit-Reset': String(state.resetSeconds),
      };
      ctx.set(headers);
      if (state.limited) {
        onLimited?.(ctx, windows);
        throw new Problem(429, `rate limit of ${state.limit} requests exceeded; retry in ${state.resetSeconds} s`, {
          headers: { ...headers, 'Retry-After': String(state.resetSeconds) },
        });
      }
      await next();
    };
  }
}
