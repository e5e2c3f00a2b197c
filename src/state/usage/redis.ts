/**
 * Usage counts in Redis, shared by every instance: each adds its flushed counts into the same
 * buckets (HINCRBY), so a read sums what every instance counted. A batch spans accounts, and
 * each account's buckets are in a slot of their own (`{<accountId>}`): so a batch is one script
 * call per account (USAGE_ADD in redis/scripts.ts), never one pipeline or MULTI across slots,
 * and a read is one script call over the account's buckets (USAGE_SUM).
 *
 * The TTL is relative (the retention from each write), not an absolute expiry from the bucket's
 * start: an instance whose clock is off cannot make a bucket expire at once.
 */
import type { RedisConnection } from '../redis/client.js';
import { USAGE_BUCKET_MS, USAGE_RETENTION_MS, usageBucketOf, type KeyUsage, type UsageCounters, type UsageEntry } from './store.js';

const REQUESTS = 'r:';
const RATE_LIMITED = 'l:';

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

  async read(accountId: string, fromBucket: number, toMs: number): Promise<KeyUsage[]> {
    const keys: string[] = [];
    for (let start = fromBucket; start <= usageBucketOf(toMs); start += USAGE_BUCKET_MS) keys.push(this.#redis.keys.usage(accountId, start));
    if (keys.length === 0) return [];
    const flat = await this.#redis.run((c) => c.gwUsageSum(keys.length, ...keys));
    const sums = new Map<string, KeyUsage>();
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const field = String(flat[i]);
      const kind = field.slice(0, 2);
      if (kind !== REQUESTS && kind !== RATE_LIMITED) continue;
      const keyId = field.slice(2);
      let usage = sums.get(keyId);
      if (usage === undefined) sums.set(keyId, usage = { keyId, requests: 0, rateLimited: 0 });
      if (kind === REQUESTS) usage.requests += Number(flat[i + 1]);
      else usage.rateLimited += Number(flat[i + 1]);
    }
    return [...sums.values()]
      .filter((u) => u.requests > 0 || u.rateLimited > 0)
      .sort((a, b) => (a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0));
  }

  #addToAccount(accountId: string, entries: readonly UsageEntry[]): Promise<number> {
    const keys: string[] = [];
    const index = new Map<number, number>();
    const args: (string | number)[] = [USAGE_RETENTION_MS];
    for (const e of entries) {
      let i = index.get(e.bucketStart);
      if (i === undefined) {
        keys.push(this.#redis.keys.usage(accountId, e.bucketStart));
        index.set(e.bucketStart, i = keys.length);
      }
      if (e.requests > 0) args.push(i, REQUESTS + e.keyId, e.requests);
      if (e.rateLimited > 0) args.push(i, RATE_LIMITED + e.keyId, e.rateLimited);
    }
    return this.#redis.run((c) => c.gwUsageAdd(keys.length, ...keys, ...args));
  }
}
