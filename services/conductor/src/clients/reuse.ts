/**
 * Answers kept for a while by key: concurrent askers share one call, and a failed call is not kept, so
 * the next asker tries again.
 */
export class Reuse<T> {
  private readonly entries = new Map<string, { until: number; value: Promise<T> }>();
  private readonly maxEntries: number;

  constructor(maxEntries = 50_000) {
    this.maxEntries = maxEntries;
  }

  /** The kept answer for `key`, or `load()`'s, kept until `until` (epoch ms). */
  get(key: string, until: number, load: () => Promise<T>): Promise<T> {
    const now = Date.now();
    const kept = this.entries.get(key);
    if (kept && kept.until > now) return kept.value;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const entry = { until, value: load() };
    this.entries.set(key, entry);
    entry.value.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    return entry.value;
  }
}
