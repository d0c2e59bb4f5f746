// A rate-limited, de-duplicating work queue with client-go's semantics.
//
// Written here because no maintained npm package offers them together: a key is queued at most once
// (dirty set), is never handed to two workers at once (processing set; a key added while being processed
// is queued again when `done` is called), retries back off per key exponentially with an overall token
// bucket on top (client-go's DefaultControllerRateLimiter), and `addAfter` serves requeue-after.
import type { OperatorMetrics } from '../metrics.ts';

export interface WorkQueueOptions {
  name: string;
  metrics: OperatorMetrics;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Overall bucket: sustained retries per second and burst size. */
  qps?: number;
  burst?: number;
}

export class WorkQueue {
  readonly name: string;
  readonly #metrics: OperatorMetrics;
  readonly #queue: string[] = [];
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #addedAt = new Map<string, number>();
  readonly #startedAt = new Map<string, number>();
  readonly #waiting = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  readonly #coalescing = new Map<string, NodeJS.Timeout>();
  readonly #failures = new Map<string, number>();
  readonly #getters: ((key: string | undefined) => void)[] = [];
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #qps: number;
  readonly #burst: number;
  #tokens: number;
  #tokensAt = Date.now();
  #shuttingDown = false;

  constructor(options: WorkQueueOptions) {
    this.name = options.name;
    this.#metrics = options.metrics;
    this.#baseDelayMs = options.baseDelayMs ?? 5;
    this.#maxDelayMs = options.maxDelayMs ?? 300_000;
    this.#qps = options.qps ?? 10;
    this.#burst = options.burst ?? 100;
    this.#tokens = this.#burst;
    this.#metrics.queueDepth.set({ name: this.name }, 0);
  }

  get length(): number {
    return this.#queue.length;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** True while a key is being processed, coalescing, or a retry (not a requeue-after) is pending. */
  get busy(): boolean {
    return this.#processing.size > 0 || this.#coalescing.size > 0 || [...this.#waiting.keys()].some((k) => this.#failures.has(k));
  }

  add(key: string): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#metrics.queueAdds.inc({ name: this.name });
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#push(key);
  }

  addAfter(key: string, delayMs: number): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const existing = this.#waiting.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.#waiting.delete(key);
      this.add(key);
    }, delayMs);
    this.#waiting.set(key, { at, timer });
  }

  /**
   * Adds the key once `windowMs` has passed, folding every further add in that window into it: the
   * events of one owner's children (created together, then observed by their controllers one by one)
   * cost one reconcile instead of one each.
   */
  addCoalesced(key: string, windowMs: number): void {
    if (this.#shuttingDown || this.#dirty.has(key) || this.#coalescing.has(key)) return;
    const timer = setTimeout(() => {
      this.#coalescing.delete(key);
      this.add(key);
    }, windowMs);
    this.#coalescing.set(key, timer);
  }

  addRateLimited(key: string): void {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    this.#metrics.queueRetries.inc({ name: this.name });
    const perKey = Math.min(this.#baseDelayMs * 2 ** failures, this.#maxDelayMs);
    this.addAfter(key, Math.max(perKey, this.#bucketDelay()));
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  retries(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /** Resolves with the next key, or undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    const key = this.#take();
    if (key !== undefined || this.#shuttingDown) return Promise.resolve(key);
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  done(key: string): void {
    this.#processing.delete(key);
    const started = this.#startedAt.get(key);
    if (started !== undefined) this.#metrics.workDuration.observe({ name: this.name }, (Date.now() - started) / 1000);
    this.#startedAt.delete(key);
    if (this.#dirty.has(key)) this.#push(key);
  }

  shutDown(): void {
    this.#shuttingDown = true;
    for (const { timer } of this.#waiting.values()) clearTimeout(timer);
    this.#waiting.clear();
    for (const timer of this.#coalescing.values()) clearTimeout(timer);
    this.#coalescing.clear();
    for (const resolve of this.#getters.splice(0)) resolve(undefined);
  }

  #push(key: string): void {
    this.#addedAt.set(key, Date.now());
    const getter = this.#getters.shift();
    if (getter) {
      getter(this.#start(key));
      return;
    }
    this.#queue.push(key);
    this.#metrics.queueDepth.set({ name: this.name }, this.#queue.length);
  }

  #take(): string | undefined {
    const key = this.#queue.shift();
    if (key === undefined) return undefined;
    this.#metrics.queueDepth.set({ name: this.name }, this.#queue.length);
    return this.#start(key);
  }

  #start(key: string): string {
    const added = this.#addedAt.get(key);
    if (added !== undefined) this.#metrics.queueLatency.observe({ name: this.name }, (Date.now() - added) / 1000);
    this.#addedAt.delete(key);
    this.#dirty.delete(key);
    this.#processing.add(key);
    this.#startedAt.set(key, Date.now());
    return key;
  }

  /** Token bucket: each retry takes a token; without one it waits for the next refill. */
  #bucketDelay(): number {
    const now = Date.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#tokensAt) / 1000) * this.#qps);
    this.#tokensAt = now;
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens / this.#qps) * 1000);
  }
}
