/**
 * Per-key usage of an account, from the gateway's own counters (limits/usage.ts counts, the
 * usage store keeps 5-minute buckets for 25 hours and UTC days for 32 days). An owner reads the
 * calls, rate-limited calls and calls per class of status (2xx, 4xx…) of each key and API settings
 * token of an account over the last 1 to 24 hours or 1 to 30 days: the totals per key, and a
 * series of steps (hours, or days) summed over the keys, or for one key, to draw as a chart.
 *
 * The window reads whole buckets: from the start of the bucket `hours` ago (a 5-minute one) or
 * `days` ago (a UTC day) up to now, so it covers at least that long (at most a bucket more). Its
 * steps are whole clock hours (UTC days), the first starting at the window's start (so with
 * `hours` it may be shorter), the last the one now is in: `hours` + 1 of them (`days` + 1).
 * Counts reach the store at each flush, so the newest few seconds (`usage.flushIntervalMs`) may
 * not show yet. While counting is off (`usage.enabled` false) the answer is an empty window with
 * `enabled: false` (every step at 0), not an error: a dashboard shows "not counted" rather than
 * failing.
 */
import {
  addCounts, hasCounts, noStatuses, USAGE_BUCKET_MS, USAGE_DAY_MS, usageBucketOf, usageDayOf,
  type KeyUsage, type UsageCounters, type UsageCounts, type UsageWindow,
} from '../state/usage/store.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { Clock } from '../util/clock.js';
import { loadAccount } from './access.js';
import type { Caller } from './types.js';

const HOUR_MS = 3_600_000;

export interface UsageStep extends UsageCounts {
  /** ISO 8601: the step's start (the window's start for the first). */
  start: string;
}

export interface UsageReport {
  /** ISO 8601: the start of the oldest bucket read. */
  from: string;
  /** ISO 8601: now. */
  to: string;
  /** Length of the buckets the window is made of: 300 (`hours`) or 86400 (`days`). */
  bucketSeconds: number;
  /** Length of a step of `series`: 3600 (`hours`) or 86400 (`days`). */
  stepSeconds: number;
  /** False while `usage.enabled` is off: nothing is counted, `items` is empty and `series` all 0. */
  enabled: boolean;
  /** Keys (and settings tokens) with any count in the window, by id (only `keyId`, when asked for one). */
  items: KeyUsage[];
  /** Each step of the window, oldest first, its counts summed over `items`. */
  series: UsageStep[];
}

/** How far back: 1 to 24 hours, or 1 to 30 days (validated by the HTTP layer). */
export type UsagePeriod = { hours: number } | { days: number };

export interface UsageService {
  /** `keyId`: one key's (or settings token's) counts only. */
  get(caller: Caller, accountId: string, period: UsagePeriod, keyId?: string): Promise<UsageReport>;
}

/** The window a period reads: its resolution, the starts of its steps, its length of bucket and step. */
function windowOf(period: UsagePeriod, now: number): UsageWindow & { bucketMs: number; stepMs: number } {
  const [resolution, bucketMs, stepMs, from] = 'hours' in period
    ? ['bucket', USAGE_BUCKET_MS, HOUR_MS, usageBucketOf(now - period.hours * HOUR_MS)] as const
    : ['day', USAGE_DAY_MS, USAGE_DAY_MS, usageDayOf(now - period.days * USAGE_DAY_MS)] as const;
  const steps = [from];
  for (let start = (Math.floor(from / stepMs) + 1) * stepMs; start <= now; start += stepMs) steps.push(start);
  return { resolution, steps, toMs: now, bucketMs, stepMs };
}

/** Sums each key's counts over the steps (`perStep`: the store's answer), and each step's over the keys. */
function summed(perStep: readonly KeyUsage[][], steps: readonly number[]): { items: KeyUsage[]; series: UsageStep[] } {
  const totals = new Map<string, KeyUsage>();
  const series = steps.map((start, i): UsageStep => {
    const step: UsageStep = { start: new Date(start).toISOString(), requests: 0, rateLimited: 0, statuses: noStatuses() };
    for (const usage of perStep[i] ?? []) {
      addCounts(step, usage);
      let total = totals.get(usage.keyId);
      if (total === undefined) totals.set(usage.keyId, total = { keyId: usage.keyId, requests: 0, rateLimited: 0, statuses: noStatuses() });
      addCounts(total, usage);
    }
    return step;
  });
  const items = [...totals.values()].filter(hasCounts).sort((a, b) => (a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0));
  return { items, series };
}

export function createUsageService({ store, clock, usage }: { store: OwnerStore; clock: Clock; usage: UsageCounters | undefined }): UsageService {
  return {
    async get(caller, accountId, period, keyId) {
      await loadAccount(store, caller, accountId);
      const now = clock.now();
      const window = windowOf(period, now);
      const read = usage === undefined ? [] : await usage.read(accountId, window);
      const perStep = keyId === undefined ? read : read.map((step) => step.filter((u) => u.keyId === keyId));
      return {
        from: new Date(window.steps[0]!).toISOString(),
        to: new Date(now).toISOString(),
        bucketSeconds: window.bucketMs / 1000,
        stepSeconds: window.stepMs / 1000,
        enabled: usage !== undefined,
        ...summed(perStep, window.steps),
      };
    },
  };
}
