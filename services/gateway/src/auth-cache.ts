interface Entry {
  at: number;
  value: Promise<unknown>;
  settled?: { value: unknown };
}

interface Derivation {
  until: number;
  value: unknown;
}

/**
 * Short-lived memory of credential lookups (user row and revocation per access token, key row per API key),
 * so a busy client does not cost a database round trip per request. Every change made through this
 * replica (logout, deletion, tier, key revocation) clears it at once; other replicas see the change within
 * `ttlMs` (AUTH_CACHE_MS, default 1 s; 0 disables).
 */
export class AuthCache {
  private readonly entries = new Map<string, Entry>();
  /** What was worked out from entries, by kind and the credential's exact header value (see `derived`). */
  private readonly derivations = new Map<string, Map<string, Derivation>>();
  /** The derivation each holder (a client's connection) used last: see `derived`. */
  private recent = new WeakMap<object, { kind: string; key: string; derivation: Derivation }>();
  private readonly ttlMs: number;

  constructor(ttlMs: number) {
    this.ttlMs = ttlMs;
  }

  /** Concurrent requests with the same credential share one lookup; a failed lookup is not remembered. */
  get<T>(key: string, load: () => Promise<T>): Promise<T> {
    if (this.ttlMs <= 0) return load();
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && now - hit.at < this.ttlMs) return hit.value as Promise<T>;
    const value = load();
    if (this.entries.size >= 50_000) this.entries.clear();
    const entry: Entry = { at: now, value };
    this.entries.set(key, entry);
    value.then(
      (result) => {
        entry.settled = { value: result };
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return value;
  }

  /** A fresh lookup that has already resolved, synchronously, with when it was made; undefined when there is none. */
  peek<T>(key: string): { value: T; at: number } | undefined {
    const hit = this.entries.get(key);
    if (!hit?.settled || Date.now() - hit.at >= this.ttlMs) return undefined;
    return { value: hit.settled.value as T, at: hit.at };
  }

  /**
   * A value worked out from fresh entries (`derive(key)` returns it with the time of the oldest entry it used),
   * remembered by `kind` and `key` for as long as those entries stay fresh, and cleared with them: a busy
   * credential's repeat calls then cost one map lookup instead of parsing and looking it up again (with
   * the express lane, part of what took the gateway from 110 to 58–68 µs of CPU per proxied request,
   * bench/gateway/README.md). With a `holder` (the client's connection), the holder's last derivation is
   * checked first.
   */
  derived<T>(kind: string, key: string, derive: (key: string) => { value: T; since: number } | undefined, holder?: object): T | undefined {
    const now = Date.now();
    // A connection repeats its credential: comparing it with the last one takes tens of nanoseconds, hashing
    // a 400-character token for the map lookup below about 0.5 µs.
    const last = holder && this.recent.get(holder);
    if (last && last.key === key && last.kind === kind && last.derivation.until > now) return last.derivation.value as T;
    let memo = this.derivations.get(kind);
    if (!memo) this.derivations.set(kind, (memo = new Map()));
    let derivation = memo.get(key);
    if (!derivation || derivation.until <= now) {
      const fresh = derive(key);
      if (!fresh) return undefined;
      if (memo.size >= 50_000) memo.clear();
      derivation = { until: fresh.since + this.ttlMs, value: fresh.value };
      memo.set(key, derivation);
    }
    if (holder) this.recent.set(holder, { kind, key, derivation });
    return derivation.value as T;
  }

  clear(): void {
    this.entries.clear();
    this.derivations.clear();
    this.recent = new WeakMap();
  }
}
