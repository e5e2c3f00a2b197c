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
import { USAGE_BUCKET_MS, USAGE_RETENTION_MS, usageBucketOf, type UsageCounters, type UsageEntry } from '../../src/state/usage/store.js';

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

export function runUsageCountersContract(name: string, make: () => Promise<UsageCountersUnderTest>, options: { skip?: string | false } = {}): void {
  test(`UsageCounters contract: ${name}`, options, async (t) => {
    const { counters, now, elapse, close } = await make();
    t.after(close);
    const current = usageBucketOf(now);
    const entry = (accountId: string, keyId: string, bucketStart: number, requests: number, rateLimited = 0): UsageEntry =>
      ({ accountId, keyId, bucketStart, requests, rateLimited });

    await t.test('an account with no counts reads as no items', async () => {
      assert.deepEqual(await counters.read(account(), current - 24 * HOUR, now), []);
    });

    await t.test('counts add up per key across batches and entries, sorted by key id; zero rows are left out', async () => {
      const a = account();
      await counters.add([entry(a, 'key_b', current, 3, 1), entry(a, 'key_a', current, 2), entry(a, 'key_b', current, 1)]);
      await counters.add([entry(a, 'key_a', current, 5, 2), entry(a, 'stk_z', current, 0, 4), entry(a, 'key_nothing', current, 0, 0)]);
      assert.deepEqual(await counters.read(a, current, now), [
        { keyId: 'key_a', requests: 7, rateLimited: 2 },
        { keyId: 'key_b', requests: 4, rateLimited: 1 },
        { keyId: 'stk_z', requests: 0, rateLimited: 4 },
      ]);
    });

    await t.test('a read sums the buckets from `fromBucket` to the one `toMs` is in, and no others', async () => {
      const a = account();
      const older = current - 12 * USAGE_BUCKET_MS;
      await counters.add([
        entry(a, 'key_a', current - 24 * HOUR, 100),
        entry(a, 'key_a', older, 10),
        entry(a, 'key_a', current - USAGE_BUCKET_MS, 1),
        entry(a, 'key_a', current, 1000),
      ]);
      assert.deepEqual(await counters.read(a, older, now), [{ keyId: 'key_a', requests: 1011, rateLimited: 0 }]);
      assert.deepEqual(await counters.read(a, older + USAGE_BUCKET_MS, now), [{ keyId: 'key_a', requests: 1001, rateLimited: 0 }]);
      assert.deepEqual(await counters.read(a, older, current - 1), [{ keyId: 'key_a', requests: 11, rateLimited: 0 }], 'a window ending before the current bucket');
      assert.deepEqual(await counters.read(a, current - 24 * HOUR, now), [{ keyId: 'key_a', requests: 1111, rateLimited: 0 }], '24 hours and the bucket it starts in');
    });

    await t.test('accounts are apart: one batch spanning accounts writes each its own', async () => {
      const [a, b] = [account(), account()];
      await counters.add([entry(a, 'key_1', current, 1), entry(b, 'key_1', current, 2, 3), entry(a, 'key_2', current - USAGE_BUCKET_MS, 4)]);
      assert.deepEqual(await counters.read(a, current - HOUR, now), [{ keyId: 'key_1', requests: 1, rateLimited: 0 }, { keyId: 'key_2', requests: 4, rateLimited: 0 }]);
      assert.deepEqual(await counters.read(b, current - HOUR, now), [{ keyId: 'key_1', requests: 2, rateLimited: 3 }]);
    });

    await t.test('an empty batch is fine', async () => {
      await counters.add([]);
    });

    await t.test('two writers adding into the same bucket concurrently: every count is kept', async () => {
      const a = account();
      await Promise.all(Array.from({ length: 50 }, (_, i) => counters.add([entry(a, `key_${i % 3}`, current, 1, i % 2)])));
      const read = await counters.read(a, current, now);
      assert.equal(read.reduce((n, u) => n + u.requests, 0), 50);
      assert.equal(read.reduce((n, u) => n + u.rateLimited, 0), 25);
    });

    if (elapse !== undefined) {
      await t.test('a bucket is gone once the retention has passed since it started, the newer ones kept', async () => {
        const a = account();
        await counters.add([entry(a, 'key_a', current, 1), entry(a, 'key_a', current + HOUR, 2)]);
        await elapse(USAGE_RETENTION_MS - HOUR);
        assert.deepEqual(await counters.read(a, current, now + USAGE_RETENTION_MS), [{ keyId: 'key_a', requests: 3, rateLimited: 0 }], 'kept for the retention');
        await elapse(HOUR + USAGE_BUCKET_MS);
        assert.deepEqual(await counters.read(a, current, now + USAGE_RETENTION_MS + HOUR), [{ keyId: 'key_a', requests: 2, rateLimited: 0 }]);
      });
    }
  });
}
