/**
 * Usage counts in process memory: the store of a gateway running alone. What bounds it: one
 * entry per key that made calls in a bucket, and buckets older than their retention are pruned at
 * every add (once per flush, not per request) and read, so it holds at most (keys with calls in
 * the last 25 hours) × 300 five-minute buckets plus (keys with calls in the last 32 days) × 32
 * days, whatever the number of requests.
 */
import type { Clock } from '../../util/clock.js';
import {
  addCounts, hasCounts, noStatuses, stepOf, USAGE_DAY_RETENTION_MS, USAGE_RETENTION_MS, usageDayOf,
  type KeyUsage, type UsageCounters, type UsageCounts, type UsageEntry, type UsageWindow,
} from './store.js';

/** Bucket start → key id → counts. */
type Buckets = Map<number, Map<string, UsageCounts>>;

/** One account's counts in both resolutions. */
interface AccountCounts {
  bucket: Buckets;
  day: Buckets;
}

const RETENTION: Record<UsageWindow['resolution'], number> = { bucket: USAGE_RETENTION_MS, day: USAGE_DAY_RETENTION_MS };

function zero(): UsageCounts {
  return { requests: 0, rateLimited: 0, statuses: noStatuses() };
}

function addTo(buckets: Buckets, start: number, keyId: string, counts: UsageCounts): void {
  let keys = buckets.get(start);
  if (keys === undefined) buckets.set(start, keys = new Map());
  let held = keys.get(keyId);
  if (held === undefined) keys.set(keyId, held = zero());
  addCounts(held, counts);
}

export class MemoryUsageCounters implements UsageCounters {
  readonly #accounts = new Map<string, AccountCounts>();
  readonly #clock: Clock;

  constructor({ clock }: { clock: Clock }) {
    this.#clock = clock;
  }

  /** Counts held (one per key and bucket, of either resolution), for tests of the bound. */
  get size(): number {
    let n = 0;
    for (const account of this.#accounts.values()) {
      for (const buckets of [account.bucket, account.day]) for (const keys of buckets.values()) n += keys.size;
    }
    return n;
  }

  async add(entries: readonly UsageEntry[]): Promise<void> {
    for (const e of entries) {
      let account = this.#accounts.get(e.accountId);
      if (account === undefined) this.#accounts.set(e.accountId, account = { bucket: new Map(), day: new Map() });
      addTo(account.bucket, e.bucketStart, e.keyId, e);
      addTo(account.day, usageDayOf(e.bucketStart), e.keyId, e);
    }
    for (const accountId of [...this.#accounts.keys()]) this.#prune(accountId);
  }

  async read(accountId: string, { resolution, steps, toMs }: UsageWindow): Promise<KeyUsage[][]> {
    const buckets = this.#prune(accountId)?.[resolution];
    const sums = steps.map(() => new Map<string, UsageCounts>());
    for (const [start, keys] of buckets ?? []) {
      const step = stepOf(steps, start);
      if (step < 0 || start > toMs) continue;
      for (const [keyId, c] of keys) {
        let sum = sums[step]!.get(keyId);
        if (sum === undefined) sums[step]!.set(keyId, sum = zero());
        addCounts(sum, c);
      }
    }
    return sums.map((byKey) => [...byKey]
      .filter(([, c]) => hasCounts(c))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([keyId, c]) => ({ keyId, ...c })));
  }

  /** Drops the account's buckets past their retention (and the account once it has none); returns what is left. */
  #prune(accountId: string): AccountCounts | undefined {
    const account = this.#accounts.get(accountId);
    if (account === undefined) return undefined;
    const now = this.#clock.now();
    for (const resolution of ['bucket', 'day'] as const) {
      const oldest = now - RETENTION[resolution];
      for (const start of account[resolution].keys()) if (start <= oldest) account[resolution].delete(start);
    }
    if (account.bucket.size > 0 || account.day.size > 0) return account;
    this.#accounts.delete(accountId);
    return undefined;
  }
}
