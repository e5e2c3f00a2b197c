import assert from 'node:assert/strict';
import { connectRedis } from '../../src/stores/redis/client.js';
import { MemoryRevocationStore } from '../../src/stores/revocation.memory.js';
import { RedisRevocationStore } from '../../src/stores/revocation.redis.js';
import { MemoryRefreshTokenStore } from '../../src/stores/token-store.memory.js';
import { RedisRefreshTokenStore } from '../../src/stores/token-store.redis.js';
import { runTokenStoreContract } from '../contracts/token-store.contract.js';
import { redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';

const RETAIN_MS = 30 * 86_400_000;

// The contract passes its own `now` into every call; the clock the memory store reclaims
// entries by only has to stand at or before those instants.
runTokenStoreContract('memory', async () => {
  const clock = { now: () => Date.UTC(2026, 0, 1) };
  const resets = new MemoryRevocationStore({ clock, retainMs: RETAIN_MS });
  return { store: new MemoryRefreshTokenStore({ clock, maxTokens: 10_000, resets }), resets, close: async () => {} };
});

runTokenStoreContract('redis', async () => {
  const server = await startRedis();
  const redis = connectRedis(redisSettings(server.url), silentLog);
  assert.ok(await redis.waitUntilReady(5000), 'the contract runs on a connected Redis');
  return {
    store: new RedisRefreshTokenStore(redis),
    resets: new RedisRevocationStore(redis, { retainMs: RETAIN_MS, log: silentLog }),
    close: async () => {
      await redis.close();
      await server.stop();
    },
  };
}, redisSuite());
