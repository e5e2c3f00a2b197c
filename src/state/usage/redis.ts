/**
 * Usage counts in Redis, shared by every instance: each adds its flushed counts into the same
 * buckets (HINCRBY), so a read sums what every instance counted. A batch spans accounts, and
 * each account's buckets (five-minute ones and days) are in a slot of their own (`{<accountId>}`):
 * so a batch is one script call per account (USAGE_ADD in redis/scripts.ts), never one pipeline
 * or MULTI across slots, and a read is one script call over the account's buckets (USAGE_SUM),
 * which sums them per step.
 *
 * The TTL is relative (the retention from each write), not an absolute expiry from the bucket's
 * start: an instance whose clock is off cannot make a bucket expire at once.
 */
import type { RedisConnection } from '../redis/client.js';
import {
  hasCounts, noStatuses, STATUS_CLASSES, stepOf, USAGE_BUCKET_MS, USAGE_DAY_MS, USAGE_DAY_RETENTION_MS, USAGE_RETENTION_MS,
  usageBucketOf, usageDayOf, type KeyUsage, type StatusClass, type UsageCounters, type UsageEntry, type UsageWindow,
} from './store.js';

/** Field prefixes, two characters each: `r:` calls, `l:` rate-limited calls, `1:` … `5:` calls answered 1xx … 5xx. */
const REQUESTS = 'r:';
const RATE_LIMITED = 'l:';
const CLASS_OF_PREFIX = new Map<string, StatusClass>(STATUS_CLASSES.map((c) => [`${c[0]}:`, c]));

export class RedisUsageCounters implements UsageCounters {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async add(entries: readonly UsageEntry[]): Promise<void> {
    const byAccount = new Map<string, UsageEntry[]>();
    for (const e of entries) {
      const list = byAccount.get(e.accountId);
      if (list === undefined) byAccount.set(e.accountId, [e]);
      else list.push(e);
    }
    const results = await Promise.allSettled([...byAccount].map(([accountId, list]) => this.#addToAccount(accountId, list)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }

  async read(accountId: string, { resolution, steps, toMs }: UsageWindow): Promise<KeyUsage[][]> {
    const [length, startOf, name] = resolution === 'bucket'
      ? [USAGE_BUCKET_MS, usageBucketOf, this.#redis.keys.usage] as const
      : [USAGE_DAY_MS, usageDayOf, this.#redis.keys.usageDay] as const;
    const keys: string[] = [];
    const groups: number[] = [];
    if (steps.length > 0) {
      for (let start = steps[0]!; start <= startOf(toMs); start += length) {
        keys.push(name(accountId, start));
        groups.push(stepOf(steps, start));
      }
    }
    const sums = steps.map(() => new Map<string, KeyUsage>());
    if (keys.length === 0) return sums.map(() => []);
    const flat = await this.#redis.run((c) => c.gwUsageSum(keys.length, ...keys, ...groups));
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const byKey = sums[Number(flat[i])];
      const field = String(flat[i + 1]);
      const kind = field.slice(0, 2);
      const statusClass = CLASS_OF_PREFIX.get(kind);
      if (byKey === undefined || (kind !== REQUESTS && kind !== RATE_LIMITED && statusClass === undefined)) continue;
      const keyId = field.slice(2);
      let usage = byKey.get(keyId);
      if (usage === undefined) byKey.set(keyId, usage = { keyId, requests: 0, rateLimited: 0, statuses: noStatuses() });
      const n = Number(flat[i + 2]);
      if (kind === REQUESTS) usage.requests += n;
      else if (kind === RATE_LIMITED) usage.rateLimited += n;
      else usage.statuses[statusClass!] += n;
    }
    return sums.map((byKey) => [...byKey.values()]
      .filter(hasCounts)
      .sort((a, b) => (a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0)));
  }

  #addToAccount(accountId: string, entries: readonly UsageEntry[]): Promise<number> {
    // Five-minute buckets first, then days (USAGE_ADD's ARGV[3] says where the days begin).
    const buckets = new Map<number, number>();
    const days = new Map<number, number>();
    for (const e of entries) {
      if (!buckets.has(e.bucketStart)) buckets.set(e.bucketStart, buckets.size + 1);
      const day = usageDayOf(e.bucketStart);
      if (!days.has(day)) days.set(day, days.size + 1);
    }
    const keys = [
      ...[...buckets.keys()].map((start) => this.#redis.keys.usage(accountId, start)),
      ...[...days.keys()].map((start) => this.#redis.keys.usageDay(accountId, start)),
    ];
    const args: (string | number)[] = [USAGE_RETENTION_MS, USAGE_DAY_RETENTION_MS, buckets.size];
    for (const e of entries) {
      for (const i of [buckets.get(e.bucketStart)!, buckets.size + days.get(usageDayOf(e.bucketStart))!]) {
        if (e.requests > 0) args.push(i, REQUESTS + e.keyId, e.requests);
        if (e.rateLimited > 0) args.push(i, RATE_LIMITED + e.keyId, e.rateLimited);
        for (const c of STATUS_CLASSES) if (e.statuses[c] > 0) args.push(i, `${c[0]}:${e.keyId}`, e.statuses[c]);
      }
    }
    return this.#redis.run((c) => c.gwUsageAdd(keys.length, ...keys, ...args));
  }
}
