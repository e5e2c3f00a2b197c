import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectRedis } from '../../src/state/redis/client.js';
import { MemoryRevocationStore } from '../../src/state/revocation/memory.js';
import { RedisRevocationStore } from '../../src/state/revocation/redis.js';
import { MemoryRefreshTokenStore } from '../../src/state/tokens/memory.js';
import { RedisRefreshTokenStore } from '../../src/state/tokens/redis.js';
import { runTokenStoreContract } from '../contracts/tokens.contract.js';
import { rawRedisClient, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';

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

// A token consumed by a version that kept the sealed pair on the token itself (before the pair
// moved to the family) is still answered with its own pair within the grace window, also when
// the family holds a pair an upgraded instance sealed for an earlier rotation.
test('redis: a duplicate of a token whose pair was kept on the token gets that pair back', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const redis = connectRedis(redisSettings(server.url), silentLog);
  t.after(() => redis.close());
  assert.ok(await redis.waitUntilReady(5000));
  const store = new RedisRefreshTokenStore(redis);
  // Real time: Redis expires the keys by its own clock.
  const now = Date.now();
  const ids = { accountId: 'acct_up', keyId: 'key_1', familyId: 'fam_up' };
  const token = (tokenId: string) => ({ tokenId, secretHash: tokenId.padEnd(64, '0'), expiresAt: now + 86_400_000 });
  await store.createFamily({ ...ids, familyExpiresAt: now + 2 * 86_400_000, token: token('t0') }, now);
  const rotate = (from: string, to: string, at: number) => store.rotate({
    ...ids, tokenId: from, secretHash: token(from).secretHash, successor: token(to), sealedPair: `sealed:${to}`, now: at, graceMs: 10_000,
  });
  assert.deepEqual(await rotate('t0', 't1', now + 1000), { outcome: 'rotated' });
  // An instance of the earlier version rotates t1: the pair on the token, the family's left as it was.
  const raw = await rawRedisClient(t, server);
  await raw.hset('gw:rt:{acct_up}:t2', { fam: 'fam_up', key: 'key_1', hash: token('t2').secretHash, exp: now + 86_400_000 });
  await raw.hset('gw:rt:{acct_up}:t1', { rot: now + 2000, next: 't2', sealed: 'sealed-by-the-earlier-version:t2' });
  await raw.hset('gw:fam:{acct_up}:fam_up', { current: 't2' });

  assert.deepEqual(await rotate('t1', 'tx', now + 3000), { outcome: 'replayed', sealedPair: 'sealed-by-the-earlier-version:t2' });
  assert.deepEqual(await rotate('t2', 't3', now + 4000), { outcome: 'rotated' });
  assert.deepEqual(await rotate('t2', 'ty', now + 5000), { outcome: 'replayed', sealedPair: 'sealed:t3' });
});
