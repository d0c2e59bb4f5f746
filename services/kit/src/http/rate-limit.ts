import type { Context, Next } from 'koa';
import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RedisClient } from '../data/redis.ts';
import { Problem } from './errors.ts';

/** One window a request counts against, e.g. "graph-public: 60 per 60 s for ip:1.2.3.4". */
export interface RateWindow {
  /** Names the limiter; windows with the same name share counters. */
  name: string;
  points: number;
  durationSeconds: number;
  key: string;
}

export type WindowResolver = (ctx: Context) => RateWindow[];

interface Lease {
  /** Points reserved in Redis that this replica has not handed out yet. */
  left: number;
  /** What Redis had left for everyone else when the points were reserved. */
  remaining: number;
  resetAt: number;
  /** The window refused this key: it does until `resetAt`. */
  refused: boolean;
  /** The size of the last reservation, and when it was made: the next one's size follows the key's pace. */
  batch: number;
  reservedAt: number;
}

interface Outcome {
  window: RateWindow;
  remaining: number;
  msBeforeNext: number;
  limited: boolean;
}

export interface RateState {
  /** The name of the tightest window, the one the state is of. */
  window: string;
  limit: number;
  remaining: number;
  resetSeconds: number;
  limited: boolean;
}

/** The headers every response carries: the tightest window's. */
const rateLimitHeaders = (state: RateState): Record<string, string> => ({
  'X-RateLimit-Limit': String(state.limit),
  'X-RateLimit-Remaining': String(state.remaining),
  'X-RateLimit-Reset': String(state.resetSeconds),
});

/** Of two windows' outcomes, the one a request sees: a refusing window first (the longest wait), else the one with the fewest left. */
function tighter(worst: Outcome, outcome: Outcome): Outcome {
  if (outcome.limited !== worst.limited) return outcome.limited ? outcome : worst;
  if (outcome.limited) return outcome.msBeforeNext > worst.msBeforeNext ? outcome : worst;
  return outcome.remaining < worst.remaining ? outcome : worst;
}

const stateOf = (worst: Outcome): RateState => ({
  window: worst.window.name,
  limit: worst.window.points,
  remaining: worst.remaining,
  resetSeconds: Math.max(1, Math.ceil(worst.msBeforeNext / 1000)),
  limited: worst.limited,
});

const leaseId = (window: RateWindow) => `${window.name}:${window.points}:${window.durationSeconds}|${window.key}`;

/** A reservation takes at most a fiftieth of a window (and at most `maxLease` points). */
const LEASE_DIVISOR = 50;
/** A key's first reservation, before its pace is known. */
const FIRST_BATCH = 100;
/**
 * How long half a batch should last: a key that gets through half of its batch sooner is given twice as
 * many points next time, one that takes over four times as long half as many (never fewer than the first).
 */
const HALF_BATCH_MS = 250;

/**
 * Counts every request against the windows `resolve` names, in Redis when it is configured (shared by
 * all replicas) with an in-memory insurance limiter that takes over while Redis is unreachable.
 * The headers describe the tightest window: the one with the fewest remaining requests.
 *
 * A busy key does not cost a Redis round trip per request: a replica reserves points in batches and
 * hands them out locally until they run out or the window resets, asking for the next batch when half of
 * one is left. A key's first batch is 100 points; after that the size follows the key's pace on this
 * replica (doubled when half a batch lasted under HALF_BATCH_MS, halved when it lasted over four times
 * that), never more than a fiftieth of the window or `maxLease`. Reserved points are counted in Redis, so
 * all replicas together never admit more than the limit; the price is that points a replica reserved and
 * did not use are lost to the others until the window resets: at most a batch and a half per replica,
 * which is at most 3% of the window and, for a batch that grew, about half a second of that key's traffic.
 * Windows under 100 points are counted one by one.
 */
export class RateLimiter {
  private readonly limiters = new Map<string, RateLimiterAbstract>();
  private readonly leases = new Map<string, Lease>();
  private readonly reserving = new Map<string, Promise<void>>();
  /** Each window's lease id, worked out once per window object (callers that keep their windows reuse it). */
  private readonly ids = new WeakMap<RateWindow, string>();
  private readonly redis: RedisClient | undefined;
  private readonly prefix: string;
  private readonly maxLease: number;
  /** The clock a key's pace is read from (a test's own, to make a pace exact). */
  private readonly now: () => number;

  constructor(options: { redis: RedisClient | undefined; prefix: string; maxLease?: number; now?: () => number }) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.now = options.now ?? Date.now;
    // Memory is as cheap to count in as a lease, so without Redis nothing is reserved.
    this.maxLease = this.redis ? Math.max(1, options.maxLease ?? 10_000) : 1;
  }

  /**
   * Whether requests are being counted by the in-memory insurance limiter although Redis is configured:
   * each replica then enforces the limits alone, so N replicas admit up to N times the limit.
   */
  get fallenBackToMemory(): boolean {
    return this.redis !== undefined && !this.redis.isReady;
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

  private idOf(window: RateWindow): string {
    let id = this.ids.get(window);
    if (id === undefined) this.ids.set(window, (id = leaseId(window)));
    return id;
  }

  /** The next reservation's size for a key, from the last one's size and how fast its points went. */
  private batchFor(window: RateWindow, lease: Lease | undefined, now: number): number {
    const ceiling = Math.max(1, Math.min(this.maxLease, Math.floor(window.points / LEASE_DIVISOR)));
    const first = Math.min(ceiling, FIRST_BATCH);
    if (!lease || lease.resetAt <= now) return first;
    const elapsed = now - lease.reservedAt;
    if (elapsed < HALF_BATCH_MS) return Math.min(ceiling, lease.batch * 2);
    if (elapsed > 4 * HALF_BATCH_MS) return Math.max(first, Math.floor(lease.batch / 2));
    return Math.min(ceiling, lease.batch);
  }

  private async consumeOne(window: RateWindow): Promise<Outcome> {
    const id = this.idOf(window);
    for (;;) {
      const local = this.fromLease(id, window);
      if (local) return local;
      // One reservation per key at a time: requests that arrive meanwhile wait for it and share its batch.
      const pending = this.reserving.get(id);
      await (pending ?? this.refill(id, window));
    }
  }

  /** A point from this replica's reserve, or the refusal it remembers, without asking Redis. */
  private fromLease(id: string, window: RateWindow, now = this.now()): Outcome | undefined {
    const lease = this.leases.get(id);
    if (!lease || lease.resetAt <= now) return undefined;
    if (lease.left > 0) {
      lease.left -= 1;
      // Half a batch before the reserve runs out the next one is asked for, so a busy key's requests
      // rarely wait for Redis (not for windows counted one by one: that would spend a point ahead).
      // Its failure is left to the request that next needs Redis, which meets it in consumeOne.
      if (lease.batch > 1 && !lease.refused && lease.left * 2 <= lease.batch && !this.reserving.has(id)) this.refill(id, window).catch(() => undefined);
      return { window, remaining: lease.remaining + lease.left, msBeforeNext: lease.resetAt - now, limited: false };
    }
    // A fixed window that refused once refuses everyone until it resets: no need to ask again.
    if (lease.refused) return { window, remaining: 0, msBeforeNext: lease.resetAt - now, limited: true };
    return undefined;
  }

  /** Reserves a batch of points in Redis and adds what was granted to this replica's reserve for the key. */
  private refill(id: string, window: RateWindow): Promise<void> {
    const reservation = this.reserve(id, window);
    const settled = reservation.then(
      () => undefined,
      () => undefined,
    );
    this.reserving.set(id, settled);
    void settled.then(() => {
      if (this.reserving.get(id) === settled) this.reserving.delete(id);
    });
    return reservation;
  }

  private async reserve(id: string, window: RateWindow): Promise<void> {
    const reservedAt = this.now();
    const batch = this.batchFor(window, this.leases.get(id), reservedAt);
    let res: RateLimiterRes;
    try {
      res = await this.limiter(window).consume(window.key, batch);
    } catch (error) {
      if (!(error instanceof RateLimiterRes)) throw error;
      res = error;
    }
    // rate-limiter-flexible counts a refused batch whole: the part of it still under the limit is granted.
    const granted = Math.max(0, batch - Math.max(0, res.consumedPoints - window.points));
    const remaining = Math.max(0, window.points - res.consumedPoints);
    const now = this.now();
    const resetAt = now + res.msBeforeNext;
    if (this.leases.size >= 10_000) this.sweep(now);
    // Points left from before count on while their window lasts (a reservation in the same window ends
    // when it does); a new window starts the reserve afresh.
    const lease = this.leases.get(id);
    const carried = lease && lease.resetAt > now && Math.abs(lease.resetAt - resetAt) < 1000 ? lease.left : 0;
    this.leases.set(id, { left: carried + granted, remaining, resetAt, refused: granted === 0, batch, reservedAt });
  }

  private sweep(now: number): void {
    for (const [id, lease] of this.leases) if (lease.resetAt <= now) this.leases.delete(id);
    if (this.leases.size >= 10_000) this.leases.clear();
  }

  /** Consumes one point in every window; resolves to the tightest window's state. */
  async consume(windows: RateWindow[]): Promise<RateState> {
    return stateOf((await Promise.all(windows.map((window) => this.consumeOne(window)))).reduce(tighter));
  }

  /**
   * Consumes one point in every window from this replica's leases, synchronously, when every window has
   * one to give; otherwise consumes nothing and returns undefined (the caller then uses `consume`).
   */
  private consumeLocally(windows: RateWindow[]): RateState | undefined {
    const now = this.now();
    for (const window of windows) {
      const lease = this.leases.get(this.idOf(window));
      if (!lease || lease.left <= 0 || lease.resetAt <= now) return undefined;
    }
    let worst: Outcome | undefined;
    for (const window of windows) {
      const outcome = this.fromLease(this.idOf(window), window, now)!;
      worst = worst ? tighter(worst, outcome) : outcome;
    }
    return worst && stateOf(worst);
  }

  /**
   * Counts a request against `windows`: the headers every response carries and, when a window is
   * exhausted, the 429 to answer with. Synchronous while this replica holds leased points for every window.
   */
  admit(windows: RateWindow[]): Admission | Promise<Admission> {
    const local = this.consumeLocally(windows);
    return local ? admission(local) : this.consume(windows).then(admission);
  }

  /**
   * The headers `windows` would report now, without counting a request: for answers that are never
   * refused (probes, scrapes, documentation). This replica's reserve where it holds one, else what Redis
   * (or memory) has counted.
   */
  async peek(windows: RateWindow[]): Promise<Record<string, string>> {
    const now = this.now();
    const outcomes = await Promise.all(
      windows.map(async (window): Promise<Outcome> => {
        const lease = this.leases.get(this.idOf(window));
        if (lease && lease.resetAt > now) {
          const remaining = lease.remaining + lease.left;
          return { window, remaining, msBeforeNext: lease.resetAt - now, limited: remaining === 0 };
        }
        const counted = await this.limiter(window).get(window.key);
        const remaining = Math.max(0, window.points - (counted?.consumedPoints ?? 0));
        return { window, remaining, msBeforeNext: counted?.msBeforeNext ?? window.durationSeconds * 1000, limited: remaining === 0 };
      }),
    );
    return rateLimitHeaders(stateOf(outcomes.reduce(tighter)));
  }

  /** `onLimited` observes each refusal with the window that refused (e.g. to count it by window in a metric). */
  middleware(resolve: WindowResolver, onLimited?: (ctx: Context, refusedBy: string) => void) {
    return async (ctx: Context, next: Next): Promise<void> => {
      const windows = resolve(ctx);
      if (windows.length === 0) return next();
      const { headers, refusal, refusedBy } = await this.admit(windows);
      ctx.set(headers);
      if (refusal) {
        onLimited?.(ctx, refusedBy!);
        throw refusal;
      }
      await next();
    };
  }
}

export interface Admission {
  headers: Record<string, string>;
  refusal?: Problem;
  /** The window that refused (with `refusal`). */
  refusedBy?: string;
}

function admission(state: RateState): Admission {
  const headers = rateLimitHeaders(state);
  if (!state.limited) return { headers };
  return {
    headers,
    refusal: new Problem(429, `rate limit of ${state.limit} requests exceeded; retry in ${state.resetSeconds} s`, {
      headers: { ...headers, 'Retry-After': String(state.resetSeconds) },
    }),
    refusedBy: state.window,
  };
}
