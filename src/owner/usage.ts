/**
 * Per-key usage of an account, from the gateway's own counters (limits/usage.ts counts, the
 * usage store keeps 5-minute buckets for 25 hours). An owner reads the calls and rate-limited
 * calls of each key and API settings token of an account over the last 1 to 24 hours.
 *
 * The window reads whole buckets: from the start of the bucket `hours` ago up to now, so it
 * covers at least `hours` (at most five minutes more). Counts reach the store at each flush, so
 * the newest few seconds (`usage.flushIntervalMs`) may not show yet. While counting is off
 * (`usage.enabled` false) the answer is an empty window with `enabled: false`, not an error: a
 * dashboard shows "not counted" rather than failing.
 */
import { USAGE_BUCKET_MS, usageBucketOf, type KeyUsage, type UsageCounters } from '../state/usage/store.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { Clock } from '../util/clock.js';
import { loadAccount } from './access.js';
import type { Caller } from './types.js';

export interface UsageReport {
  /** ISO 8601: the start of the oldest bucket read. */
  from: string;
  /** ISO 8601: now. */
  to: string;
  bucketSeconds: number;
  /** False while `usage.enabled` is off: nothing is counted, and `items` is empty. */
  enabled: boolean;
  /** Keys (and settings tokens) with any count in the window, by id. */
  items: KeyUsage[];
}

export interface UsageService {
  /** `hours` 1 to 24 (validated by the HTTP layer). */
  get(caller: Caller, accountId: string, hours: number): Promise<UsageReport>;
}

export function createUsageService({ store, clock, usage }: { store: OwnerStore; clock: Clock; usage: UsageCounters | undefined }): UsageService {
  return {
    async get(caller, accountId, hours) {
      await loadAccount(store, caller, accountId);
      const now = clock.now();
      const from = usageBucketOf(now - hours * 3_600_000);
      const items = usage === undefined ? [] : await usage.read(accountId, from, now);
      return {
        from: new Date(from).toISOString(),
        to: new Date(now).toISOString(),
        bucketSeconds: USAGE_BUCKET_MS / 1000,
        enabled: usage !== undefined,
        items,
      };
    },
  };
}
