import { MemoryRevocationStore } from '../../src/state/revocation/memory.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runRevocationContract } from '../contracts/revocation.contract.js';
import { ManualClock } from '../helpers/clock.js';
import { redisSettings, redisSuite, startRedis, twoRevocationStores } from '../helpers/redis.js';

const RETAIN_MS = 30 * 86_400_000;

// One instance is both handles: a gateway that runs alone. Its clock stands still at the
// start of the run; the contract's times are near it.
runRevocationContract('memory', async () => {
  const store = new MemoryRevocationStore({ clock: new ManualClock(Date.now()), retainMs: RETAIN_MS });
  return { a: store, b: store, close: async () => {} };
});

// Two connections to one server, each with its own store: two gateway instances.
runRevocationContract('redis', async () => {
  const server = await startRedis();
  return twoRevocationStores(redisSettings(server.url), RETAIN_MS, () => server.stop());
}, redisSuite());

// An earlier reset (which must change nothing) must not shorten how long a later one is kept.
test('memory: an earlier reset does not shorten how long a later one is kept', async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const store = new MemoryRevocationStore({ clock, retainMs: RETAIN_MS });
  const now = clock.now();
  await store.reset({ accountId: 'acct_a' }, now);
  await store.reset({ accountId: 'acct_a', keyId: 'key_1' }, now - RETAIN_MS + 86_400_000);
  // Two days on, a family started just before `now` still lives (for 28 more days): its reset must be kept.
  clock.advance(2 * 86_400_000);
  assert.equal((await store.read('acct_a')).account, now);
});
