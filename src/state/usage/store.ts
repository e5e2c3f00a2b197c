/**
 * Per-key usage counts: how many calls each key (or API settings token) of an account made, and
 * how many of its calls were refused by a rate limit, in buckets of five minutes kept 25 hours,
 * so that any window of up to 24 hours (plus the bucket it starts in) can be read back.
 *
 * Counts arrive in batches (limits/usage.ts gathers them in memory and adds them every
 * `usage.flushIntervalMs`), never one store call per request. Adding is commutative: several
 * instances adding into the same bucket sum up, so a shared store (Redis) answers the counts of
 * every instance. Implementations: memory (one process) and Redis; the contract suite
 * test/contracts/usage.contract.ts holds both to the same behaviour.
 */

/** Length of a bucket: counts are kept and read per bucket, each starting at a multiple of it. */
export const USAGE_BUCKET_MS = 300_000;
/** How long a bucket is kept after it starts: a day and an hour, so 24 hours can always be read. */
export const USAGE_RETENTION_MS = 25 * 3_600_000;

/** The start of the bucket `ms` falls in. */
export function usageBucketOf(ms: number): number {
  return Math.floor(ms / USAGE_BUCKET_MS) * USAGE_BUCKET_MS;
}

export interface UsageCounts {
  /** Calls admitted. */
  requests: number;
  /** Calls refused by a rate limit (429), not counted in `requests`. */
  rateLimited: number;
}

/** Counts of one key in one bucket, to be added. */
export interface UsageEntry extends UsageCounts {
  accountId: string;
  /** A key id, or an API settings token id (`stk_…`). */
  keyId: string;
  /** Start of the bucket (usageBucketOf), epoch ms. */
  bucketStart: number;
}

export interface KeyUsage extends UsageCounts {
  keyId: string;
}

export interface UsageCounters {
  /**
   * Adds each entry's counts to its bucket (entries for the same key and bucket sum). Entries of
   * one account are written together; a failure may leave another account's entries written
   * (each account is one atomic step), so a caller retrying a batch may count some twice.
   */
  add(entries: readonly UsageEntry[]): Promise<void>;
  /**
   * The account's counts per key summed over the buckets starting from `fromBucket` up to the
   * one `toMs` falls in (buckets older than the retention are gone, and read as nothing).
   * Only keys with a count above 0, sorted by key id.
   */
  read(accountId: string, fromBucket: number, toMs: number): Promise<KeyUsage[]>;
}
