/**
 * Last sign-ins of keys: the contract (test/contracts/key-use.contract.ts) against memory and a
 * real redis-server, then what only Redis promises: one hash per account, with the retention as
 * its TTL.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KEY_USE_RETENTION_MS } from '../../src/state/key-use/store.js';
import { MemoryKeyUseStore } from '../../src/state/key-use/memory.js';
import { RedisKeyUseStore } from '../../src/state/key-use/redis.js';
import { runKeyUseContract } from '../contracts/key-use.contract.js';
import { rawRedisClient, redisSuite, serverWithConnection } from '../helpers/redis.js';

runKeyUseContract('memory', async () => ({ store: new MemoryKeyUseStore(), close: async () => {} }));

runKeyUseContract('redis', async () => {
  const { redis, close } = await serverWithConnection();
  return { store: new RedisKeyUseStore(redis), close };
}, redisSuite());

test('Redis keeps an account\'s last sign-ins in one hash whose TTL is the retention', redisSuite(), async (t) => {
  const { redis, server, close } = await serverWithConnection();
  t.after(close);
  await new RedisKeyUseStore(redis).record('acct_ttl', 'key_1', Date.UTC(2026, 10, 28));
  const raw = await rawRedisClient(t, server);
  const name = redis.keys.keyUse('acct_ttl');
  assert.deepEqual(await raw.hgetall(name), { key_1: String(Date.UTC(2026, 10, 28)) });
  const ttl = await raw.pttl(name);
  assert.ok(ttl > KEY_USE_RETENTION_MS - 60_000 && ttl <= KEY_USE_RETENTION_MS, `TTL ${ttl}`);
});
