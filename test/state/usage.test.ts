/**
 * Usage counters: the contract (test/contracts/usage.contract.ts) against memory and a
 * real redis-server, then what only one implementation promises: Redis keys named per account
 * and bucket (and day), each with a TTL of its retention, one script call per account of a
 * batch; the memory store's bound (keys × buckets, whatever the number of counts added).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redisKeys } from '../../src/state/redis/keys.js';
import { MemoryUsageCounters } from '../../src/state/usage/memory.js';
import { RedisUsageCounters } from '../../src/state/usage/redis.js';
import { noStatuses, USAGE_BUCKET_MS, USAGE_DAY_RETENTION_MS, USAGE_RETENTION_MS, usageBucketOf, usageDayOf } from '../../src/state/usage/store.js';
import { runUsageCountersContract } from '../contracts/usage.contract.js';
import { ManualClock } from '../helpers/clock.js';
import { connectedRedis, rawRedisClient, redisSettings, redisSuite, serverWithConnection, startRedis } from '../helpers/redis.js';

runUsageCountersContract('memory', async () => {
  const clock = new ManualClock();
  return {
    counters: new MemoryUsageCounters({ clock }),
    now: clock.now(),
    elapse: async (ms) => clock.advance(ms),
    close: async () => {},
  };
});

runUsageCountersContract('redis', async () => {
  const { redis, close } = await serverWithConnection();
  return { counters: new RedisUsageCounters(redis), now: Date.UTC(2026, 0, 1), close };
}, redisSuite());

test('memory usage counters hold one entry per key and bucket, however many counts, and drop buckets past the retention', async () => {
  const clock = new ManualClock();
  const counters = new MemoryUsageCounters({ clock });
  for (let i = 0; i < 1000; i++) {
    await counters.add([{ accountId: 'acct_a', keyId: `key_${i % 5}`, bucketStart: usageBucketOf(clock.now()), requests: 1, rateLimited: 1, statuses: noStatuses() }]);
  }
  assert.equal(counters.size, 10, 'five keys in one bucket and in its day');
  // A day of buckets for the five keys, then the retention: the oldest go as new ones come.
  for (let b = 0; b < 400; b++) {
    clock.advance(USAGE_BUCKET_MS);
    await counters.add([{ accountId: 'acct_a', keyId: `key_${b % 5}`, bucketStart: usageBucketOf(clock.now()), requests: 1, rateLimited: 0, statuses: noStatuses() }]);
    assert.ok(counters.size <= USAGE_RETENTION_MS / USAGE_BUCKET_MS + 5 + 2 * 5, `bounded by the buckets kept (and two days of five keys): ${counters.size}`);
  }
  // An account nobody writes to any more is pruned too, at the next add of any account: its
  // five-minute buckets after 25 hours, its days after 32 days.
  clock.advance(USAGE_RETENTION_MS);
  await counters.add([{ accountId: 'acct_b', keyId: 'key_0', bucketStart: usageBucketOf(clock.now()), requests: 1, rateLimited: 0, statuses: noStatuses() }]);
  assert.ok(counters.size <= 2 + 3 * 5, `acct_b's bucket and day, acct_a's days: ${counters.size}`);
  clock.advance(USAGE_DAY_RETENTION_MS);
  await counters.add([{ accountId: 'acct_b', keyId: 'key_0', bucketStart: usageBucketOf(clock.now()), requests: 1, rateLimited: 0, statuses: noStatuses() }]);
  assert.equal(counters.size, 2, 'one bucket and its day');
});

test('redis usage counters', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const settings = redisSettings(server.url, { keyPrefix: 'usage-test' });
  const redis = await connectedRedis(settings);
  t.after(() => redis.close());
  const raw = await rawRedisClient(t, server);
  const counters = new RedisUsageCounters(redis);
  const keys = redisKeys('usage-test');

  await t.test('each bucket is one hash per account, tagged by account, with fields per key, and a TTL of the retention', async () => {
    const bucket = usageBucketOf(Date.UTC(2026, 2, 3, 10, 7));
    await counters.add([
      { accountId: 'acct_ttl', keyId: 'key_1', bucketStart: bucket, requests: 2, rateLimited: 1, statuses: { ...noStatuses(), '2xx': 1, '4xx': 2 } },
      { accountId: 'acct_ttl', keyId: 'stk_2', bucketStart: bucket - USAGE_BUCKET_MS, requests: 0, rateLimited: 3, statuses: noStatuses() },
      { accountId: 'acct_other', keyId: 'key_9', bucketStart: bucket, requests: 5, rateLimited: 0, statuses: noStatuses() },
    ]);
    const names = (await raw.keys('usage-test:usage:*')).sort();
    assert.deepEqual(names, [
      keys.usage('acct_other', bucket),
      keys.usage('acct_ttl', bucket - USAGE_BUCKET_MS),
      keys.usage('acct_ttl', bucket),
    ].sort());
    assert.equal(keys.usage('acct_ttl', bucket), `usage-test:usage:{acct_ttl}:${bucket / 1000}`);
    assert.deepEqual(await raw.hgetall(keys.usage('acct_ttl', bucket)), { 'r:key_1': '2', 'l:key_1': '1', '2:key_1': '1', '4:key_1': '2' });
    assert.deepEqual(await raw.hgetall(keys.usage('acct_ttl', bucket - USAGE_BUCKET_MS)), { 'l:stk_2': '3' });
    for (const name of names) {
      const ttl = await raw.pttl(name);
      assert.ok(ttl > USAGE_RETENTION_MS - 60_000 && ttl <= USAGE_RETENTION_MS, `${name}: TTL ${ttl} ms, about 25 hours`);
    }
    // And each account's day, in the same slot: both buckets of acct_ttl in one hash.
    const day = usageDayOf(bucket);
    const days = (await raw.keys('usage-test:usage-day:*')).sort();
    assert.deepEqual(days, [keys.usageDay('acct_other', day), keys.usageDay('acct_ttl', day)].sort());
    assert.equal(keys.usageDay('acct_ttl', day), `usage-test:usage-day:{acct_ttl}:${day / 1000}`);
    assert.deepEqual(await raw.hgetall(keys.usageDay('acct_ttl', day)), { 'r:key_1': '2', 'l:key_1': '1', '2:key_1': '1', '4:key_1': '2', 'l:stk_2': '3' });
    for (const name of days) {
      const ttl = await raw.pttl(name);
      assert.ok(ttl > USAGE_DAY_RETENTION_MS - 60_000 && ttl <= USAGE_DAY_RETENTION_MS, `${name}: TTL ${ttl} ms, about 32 days`);
    }
  });

  await t.test('a batch spanning accounts is one EVALSHA per account (no command across slots); a read is one', async () => {
    const bucket = usageBucketOf(Date.UTC(2026, 2, 4));
    // Load both scripts first: a fresh server answers the first EVALSHA with NOSCRIPT.
    await counters.add([{ accountId: 'acct_warm', keyId: 'k', bucketStart: bucket, requests: 1, rateLimited: 0, statuses: noStatuses() }]);
    await counters.read('acct_warm', { resolution: 'bucket', steps: [bucket], toMs: bucket });
    const before = await commandStats(raw);
    await counters.add([
      { accountId: 'acct_x', keyId: 'k1', bucketStart: bucket, requests: 1, rateLimited: 0, statuses: noStatuses() },
      { accountId: 'acct_x', keyId: 'k2', bucketStart: bucket + USAGE_BUCKET_MS, requests: 1, rateLimited: 0, statuses: noStatuses() },
      { accountId: 'acct_y', keyId: 'k1', bucketStart: bucket, requests: 1, rateLimited: 0, statuses: noStatuses() },
      { accountId: 'acct_z', keyId: 'k1', bucketStart: bucket, requests: 1, rateLimited: 0, statuses: noStatuses() },
    ]);
    const afterAdd = await commandStats(raw);
    assert.equal(afterAdd.evalsha - before.evalsha, 3, 'three accounts: three calls');
    assert.equal(afterAdd.multi - before.multi, 0, 'no MULTI');
    assert.deepEqual(await counters.read('acct_x', { resolution: 'bucket', steps: [bucket - 24 * 3_600_000], toMs: bucket + USAGE_BUCKET_MS }), [[
      { keyId: 'k1', requests: 1, rateLimited: 0, statuses: noStatuses() },
      { keyId: 'k2', requests: 1, rateLimited: 0, statuses: noStatuses() },
    ]]);
    assert.equal((await commandStats(raw)).evalsha - afterAdd.evalsha, 1, '289 buckets read in one call');
  });
});

/** Calls of EVALSHA and MULTI the server has run so far (INFO commandstats). */
async function commandStats(raw: { info(section: string): Promise<string> }): Promise<{ evalsha: number; multi: number }> {
  const info = await raw.info('commandstats');
  const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  return { evalsha: calls('evalsha'), multi: calls('multi') };
}
