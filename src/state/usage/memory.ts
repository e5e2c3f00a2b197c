/**
 * Usage counts in process memory: the store of a gateway running alone. What bounds it: one
 * entry per key that made calls in a bucket, and buckets older than the retention are pruned at
 * every add (once per flush, not per request) and read, so it holds at most (keys with calls in
 * the last 25 hours) × 300 buckets (25 hours of 5 minutes), whatever the number of requests.
 */
import type { Clock } from '../../util/clock.js';
import { USAGE_RETENTION_MS, type KeyUsage, type UsageCounters, type UsageCounts, type UsageEntry } from './store.js';

/** Per account: bucket start → key id → counts. */
type AccountBuckets = Map<number, Map<string, UsageCounts>>;

export class MemoryUsageCounters implements UsageCounters {
  readonly #accounts = new Map<string, AccountBuckets>();
  readonly #clock: Clock;

  constructor({ clock }: { clock: Clock }) {
    this.#clock = clock;
  }

  /** Counts held (one per key and bucket), for tests of the bound. */
  get size(): number {
    let n = 0;
    for (const buckets of this.#accounts.values()) for (const keys of buckets.values()) n += keys.size;
    return n;
  }

  async add(entries: readonly UsageEntry[]): Promise<void> {
    for (const e of entries) {
      let buckets = this.#accounts.get(e.accountId);
      if (buckets === undefined) this.#accounts.set(e.accountId, buckets = new Map());
      let keys = buckets.get(e.bucketStart);
      if (keys === undefined) buckets.set(e.bucketStart, keys = new Map());
      const counts = keys.get(e.keyId);
      if (counts === undefined) keys.set(e.keyId, { requests: e.requests, rateLimited: e.rateLimited });
      else {
        counts.requests += e.requests;
        counts.rateLimited += e.rateLimited;
      }
    }
    for (const accountId of [...this.#accounts.keys()]) this.#prune(accountId);
  }

  async read(accountId: string, fromBucket: number, toMs: number): Promise<KeyUsage[]> {
    const buckets = this.#prune(accountId);
    const sums = new Map<string, UsageCounts>();
    for (const [start, keys] of buckets ?? []) {
      if (start < fromBucket || start > toMs) continue;
      for (const [keyId, c] of keys) {
        const sum = sums.get(keyId);
        if (sum === undefined) sums.set(keyId, { ...c });
        else {
          sum.requests += c.requests;
          sum.rateLimited += c.rateLimited;
        }
      }
    }
    return [...sums]
      .filter(([, c]) => c.requests > 0 || c.rateLimited > 0)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([keyId, c]) => ({ keyId, ...c }));
  }

  /** Drops the account's buckets past the retention (and the account once it has none); returns what is left. */
  #prune(accountId: string): AccountBuckets | undefined {
    const buckets = this.#accounts.get(accountId);
    if (buckets === undefined) return undefined;
    const oldest = this.#clock.now() - USAGE_RETENTION_MS;
    for (const start of buckets.keys()) if (start <= oldest) buckets.delete(start);
    if (buckets.size > 0) return buckets;
    this.#accounts.delete(accountId);
    return undefined;
  }
}
