/**
 * Per-key usage counts: how many calls each key (or API settings token) of an account made, how
 * many of its calls were refused by a rate limit, and how many were answered with each class of
 * status (1xx to 5xx), kept twice: in buckets of five minutes for 25 hours, so that any window of
 * up to 24 hours (plus the bucket it starts in) can be read back, and in UTC days for 32 days, so
 * that 30 days (plus the day they start in) can.
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
/** Length of a day's bucket (UTC days: epoch ms multiples of it). */
export const USAGE_DAY_MS = 86_400_000;
/**
 * How long a day's bucket is kept after it starts: 30 days and the day they start in (31) can
 * always be read, and a day's last write, at its end, still has a day to spare.
 */
export const USAGE_DAY_RETENTION_MS = 32 * USAGE_DAY_MS;

/** The start of the bucket `ms` falls in. */
export function usageBucketOf(ms: number): number {
  return Math.floor(ms / USAGE_BUCKET_MS) * USAGE_BUCKET_MS;
}

/** The start of the UTC day `ms` falls in. */
export function usageDayOf(ms: number): number {
  return Math.floor(ms / USAGE_DAY_MS) * USAGE_DAY_MS;
}

/** The classes of status a call's answer is counted in. 1xx: a WebSocket handshake switched (101). */
export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
export type StatusClass = (typeof STATUS_CLASSES)[number];
export type StatusCounts = Record<StatusClass, number>;

/** The class of an answer's status, or undefined for none a client can get (0, 600 and over). */
export function statusClassOf(status: number): StatusClass | undefined {
  return STATUS_CLASSES[Math.floor(status / 100) - 1];
}

export function noStatuses(): StatusCounts {
  return { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 };
}

export interface UsageCounts {
  /** Calls admitted. */
  requests: number;
  /** Calls refused by a rate limit (429), not counted in `requests`. */
  rateLimited: number;
  /**
   * The same calls (admitted and refused) by the class of the status they were answered with,
   * counted when the answer is: the classes sum to requests + rateLimited once every call counted
   * has been answered (a call still being answered when its bucket is read shows in `requests`
   * only).
   */
  statuses: StatusCounts;
}

/** Counts of one key in one bucket, to be added. */
export interface UsageEntry extends UsageCounts {
  accountId: string;
  /** A key id, or an API settings token id (`stk_…`). */
  keyId: string;
  /** Start of the five-minute bucket (usageBucketOf), epoch ms; the store adds it to its day too. */
  bucketStart: number;
}

export interface KeyUsage extends UsageCounts {
  keyId: string;
}

/**
 * What to read: the buckets of `resolution` (five minutes, or UTC days) from `steps[0]` up to the
 * one `toMs` falls in, summed per step. `steps` are ascending bucket starts of that resolution;
 * a bucket belongs to the last step starting at or before it.
 */
export interface UsageWindow {
  resolution: 'bucket' | 'day';
  steps: readonly number[];
  toMs: number;
}

export interface UsageCounters {
  /**
   * Adds each entry's counts to its five-minute bucket and to its day (entries for the same key
   * and bucket sum). Entries of one account are written together; a failure may leave another
   * account's entries written (each account is one atomic step), so a caller retrying a batch
   * may count some twice.
   */
  add(entries: readonly UsageEntry[]): Promise<void>;
  /**
   * The account's counts per key in each step of the window (one list per step, in the order of
   * `steps`): buckets older than their retention are gone, and read as nothing. In each list only
   * keys with a count above 0, sorted by key id.
   */
  read(accountId: string, window: UsageWindow): Promise<KeyUsage[][]>;
}

/** Adds `from` into `to`. */
export function addCounts(to: UsageCounts, from: UsageCounts): void {
  to.requests += from.requests;
  to.rateLimited += from.rateLimited;
  for (const c of STATUS_CLASSES) to.statuses[c] += from.statuses[c];
}

export function hasCounts(c: UsageCounts): boolean {
  return c.requests > 0 || c.rateLimited > 0 || STATUS_CLASSES.some((s) => c.statuses[s] > 0);
}

/** The index of the step a bucket starting at `start` belongs to, or -1 before the first. */
export function stepOf(steps: readonly number[], start: number): number {
  let i = steps.length - 1;
  while (i >= 0 && steps[i]! > start) i--;
  return i;
}
