/**
 * The contract of UsageCounters (src/state/usage/store.ts), run once per implementation.
 *
 * Bucket times are made up (a fixed day in 2026), not now: both implementations name buckets by
 * the time given and keep them for the retention from their own clock (memory) or from the
 * write (Redis's relative TTL), so any time works. Retention is checked where time can be moved
 * (`expireAll`: the memory store's clock); Redis's TTLs are checked in test/state/usage.test.ts.
 * Every test counts accounts of its own, so the tests do not see each other's counts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import {
  noStatuses, USAGE_BUCKET_MS, USAGE_DAY_MS, USAGE_DAY_RETENTION_MS, USAGE_RETENTION_MS, usageBucketOf, usageDayOf,
  type KeyUsage, type StatusCounts, type UsageCounters, type UsageEntry,
} from '../../src/state/usage/store.js';

export interface UsageCountersUnderTest {
  counters: UsageCounters;
  /** The store's "now" (buckets are written around it). */
  now: number;
  /** Lets the retention pass for the store, if it can (memory: its clock); undefined where it cannot. */
  elapse?: (ms: number) => Promise<void>;
  close(): Promise<void>;
}

const HOUR = 3_600_000;

function account(): string {
  return `acct_${randomBytes(6).toString('hex')}`;
}

function entry(accountId: string, keyId: string, bucketStart: number, requests: number, rateLimited = 0, statuses: Partial<StatusCounts> = {}): UsageEntry {
  return { accountId, keyId, bucketStart, requests, rateLimited, statuses: { ...noStatuses(), ...statuses } };
}

function usage(keyId: string, requests: number, rateLimited = 0, statuses: Partial<StatusCounts> = {}): KeyUsage {
  return { keyId, requests, rateLimited, statuses: { ...noStatuses(), ...statuses } };
}

export function runUsageCountersContract(name: string, make: () => Promise<UsageCountersUnderTest>, options: { skip?: string | false } = {}): void {
  test(`UsageCounters contract: ${name}`, options, async (t) => {
    const { counters, now, elapse, close } = await make();
    t.after(close);
    const current = usageBucketOf(now);
    /** The five-minute buckets from `from` to the one `to` is in, summed as one step. */
    const total = async (accountId: string, from: number, to: number) => (await counters.read(accountId, { resolution: 'bucket', steps: [from], toMs: to }))[0]!;

    await t.test('an account with no counts reads as no items, in every step', async () => {
      assert.deepEqual(await total(account(), current - 24 * HOUR, now), []);
      assert.deepEqual(await counters.read(account(), { resolution: 'day', steps: [usageDayOf(now) - USAGE_DAY_MS, usageDayOf(now)], toMs: now }), [[], []]);
    });

    await t.test('counts add up per key across batches and entries, status classes too, sorted by key id; zero rows are left out', async () => {
      const a = account();
      await counters.add([entry(a, 'key_b', current, 3, 1, { '2xx': 2, '4xx': 1 }), entry(a, 'key_a', current, 2, 0, { '5xx': 2 }), entry(a, 'key_b', current, 1)]);
      await counters.add([
        entry(a, 'key_a', current, 5, 2, { '1xx': 1, '3xx': 1 }), entry(a, 'stk_z', current, 0, 4),
        entry(a, 'key_nothing', current, 0, 0), entry(a, 'key_late', current, 0, 0, { '2xx': 1 }),
      ]);
      assert.deepEqual(await total(a, current, now), [
        usage('key_a', 7, 2, { '1xx': 1, '3xx': 1, '5xx': 2 }),
        usage('key_b', 4, 1, { '2xx': 2, '4xx': 1 }),
        usage('key_late', 0, 0, { '2xx': 1 }),
        usage('stk_z', 0, 4),
      ]);
    });

    await t.test('a read sums the buckets from the first step to the one `toMs` is in, and no others', async () => {
      const a = account();
      const older = current - 12 * USAGE_BUCKET_MS;
      await counters.add([
        entry(a, 'key_a', current - 24 * HOUR, 100),
        entry(a, 'key_a', older, 10),
        entry(a, 'key_a', current - USAGE_BUCKET_MS, 1),
        entry(a, 'key_a', current, 1000),
      ]);
      assert.deepEqual(await total(a, older, now), [usage('key_a', 1011)]);
      assert.deepEqual(await total(a, older + USAGE_BUCKET_MS, now), [usage('key_a', 1001)]);
      assert.deepEqual(await total(a, older, current - 1), [usage('key_a', 11)], 'a window ending before the current bucket');
      assert.deepEqual(await total(a, current - 24 * HOUR, now), [usage('key_a', 1111)], '24 hours and the bucket it starts in');
    });

    await t.test('steps: each bucket is summed into the last step starting at or before it', async () => {
      const a = account();
      const hour = Math.floor(now / HOUR) * HOUR;
      await counters.add([
        entry(a, 'key_a', hour - HOUR, 1, 0, { '2xx': 1 }),
        entry(a, 'key_a', hour - USAGE_BUCKET_MS, 2, 0, { '2xx': 2 }),
        entry(a, 'key_b', hour - USAGE_BUCKET_MS, 0, 1, { '4xx': 1 }),
        entry(a, 'key_a', hour, 4, 0, { '5xx': 4 }),
        entry(a, 'key_a', hour + 11 * USAGE_BUCKET_MS, 8),
      ]);
      const steps = [hour - 2 * HOUR, hour - HOUR, hour];
      assert.deepEqual(await counters.read(a, { resolution: 'bucket', steps, toMs: hour + HOUR - 1 }), [
        [],
        [usage('key_a', 3, 0, { '2xx': 3 }), usage('key_b', 0, 1, { '4xx': 1 })],
        [usage('key_a', 12, 0, { '5xx': 4 })],
      ]);
      assert.deepEqual(await counters.read(a, { resolution: 'bucket', steps: [hour - USAGE_BUCKET_MS, hour], toMs: hour }), [
        [usage('key_a', 2, 0, { '2xx': 2 }), usage('key_b', 0, 1, { '4xx': 1 })],
        [usage('key_a', 4, 0, { '5xx': 4 })],
      ], 'a first step inside an hour, and `toMs` ending the last');
    });

    await t.test('every add counts in its UTC day too, read by day', async () => {
      const a = account();
      const today = usageDayOf(now);
      await counters.add([
        entry(a, 'key_a', today - 29 * USAGE_DAY_MS, 1, 0, { '2xx': 1 }),
        entry(a, 'key_a', today - USAGE_DAY_MS + 7 * HOUR, 2, 1, { '2xx': 2, '4xx': 1 }),
        entry(a, 'key_a', today - USAGE_DAY_MS + 23 * HOUR, 3, 0, { '3xx': 3 }),
        entry(a, 'key_b', today, 5, 0, { '5xx': 5 }),
        entry(a, 'key_b', today + 23 * HOUR + 11 * USAGE_BUCKET_MS, 1),
      ]);
      const steps = Array.from({ length: 31 }, (_, i) => today - (30 - i) * USAGE_DAY_MS);
      const days = await counters.read(a, { resolution: 'day', steps, toMs: now });
      assert.equal(days.length, 31);
      assert.deepEqual(days[1], [usage('key_a', 1, 0, { '2xx': 1 })], '29 days ago');
      assert.deepEqual(days[29], [usage('key_a', 5, 1, { '2xx': 2, '3xx': 3, '4xx': 1 })], 'yesterday: two buckets in one day');
      assert.deepEqual(days[30], [usage('key_b', 6, 0, { '5xx': 5 })], 'today: its first and last bucket');
      assert.equal(days.filter((d) => d.length > 0).length, 3, 'nothing on the other days');
      assert.deepEqual(await total(a, today - USAGE_DAY_MS + 7 * HOUR, today - USAGE_DAY_MS + 23 * HOUR), [usage('key_a', 5, 1, { '2xx': 2, '3xx': 3, '4xx': 1 })], 'the five-minute buckets as well');
    });

    await t.test('accounts are apart: one batch spanning accounts writes each its own', async () => {
      const [a, b] = [account(), account()];
      await counters.add([entry(a, 'key_1', current, 1), entry(b, 'key_1', current, 2, 3), entry(a, 'key_2', current - USAGE_BUCKET_MS, 4)]);
      assert.deepEqual(await total(a, current - HOUR, now), [usage('key_1', 1), usage('key_2', 4)]);
      assert.deepEqual(await total(b, current - HOUR, now), [usage('key_1', 2, 3)]);
      assert.deepEqual(await counters.read(b, { resolution: 'day', steps: [usageDayOf(current)], toMs: now }), [[usage('key_1', 2, 3)]]);
    });

    await t.test('an empty batch is fine', async () => {
      await counters.add([]);
    });

    await t.test('two writers adding into the same bucket concurrently: every count is kept', async () => {
      const a = account();
      await Promise.all(Array.from({ length: 50 }, (_, i) => counters.add([entry(a, `key_${i % 3}`, current, 1, i % 2, { '2xx': 1 })])));
      for (const read of [await total(a, current, now), (await counters.read(a, { resolution: 'day', steps: [usageDayOf(current)], toMs: now }))[0]!]) {
        assert.equal(read.reduce((n, u) => n + u.requests, 0), 50);
        assert.equal(read.reduce((n, u) => n + u.rateLimited, 0), 25);
        assert.equal(read.reduce((n, u) => n + u.statuses['2xx'], 0), 50);
      }
    });

    if (elapse !== undefined) {
      await t.test('a bucket is gone once its retention has passed since it started, the newer ones kept; a day after 32 days', async () => {
        const a = account();
        const day = usageDayOf(now);
        const days = { resolution: 'day', steps: [day], toMs: day + 40 * USAGE_DAY_MS } as const;
        await counters.add([entry(a, 'key_a', current, 1), entry(a, 'key_a', current + HOUR, 2)]);
        await elapse(USAGE_RETENTION_MS - HOUR);
        assert.deepEqual(await total(a, current, now + USAGE_RETENTION_MS), [usage('key_a', 3)], 'kept for the retention');
        await elapse(HOUR + USAGE_BUCKET_MS);
        assert.deepEqual(await total(a, current, now + USAGE_RETENTION_MS + HOUR), [usage('key_a', 2)]);
        assert.deepEqual(await counters.read(a, days), [[usage('key_a', 3)]], 'the day is kept');
        await elapse(day + USAGE_DAY_RETENTION_MS - (now + USAGE_RETENTION_MS + USAGE_BUCKET_MS) - 1);
        assert.deepEqual(await counters.read(a, days), [[usage('key_a', 3)]], 'for 32 days from its start');
        await elapse(1);
        assert.deepEqual(await counters.read(a, days), [[]]);
      });
    }
  });
}
