/**
 * WebAuthn ceremonies: the contract (test/contracts/ceremonies.contract.ts) against the memory
 * store and a real redis-server, then what only the memory store promises: a bound.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { MemoryCeremonyStore } from '../../src/state/ceremonies/memory.js';
import { RedisCeremonyStore } from '../../src/state/ceremonies/redis.js';
import { systemClock } from '../../src/util/clock.js';
import { runCeremonyStoreContract } from '../contracts/ceremonies.contract.js';
import { ManualClock } from '../helpers/clock.js';
import { connectedRedis, redisSettings, redisSuite, startRedis, type TestRedis } from '../helpers/redis.js';

runCeremonyStoreContract('memory', async () => {
  const clock = new ManualClock();
  return { ceremonies: new MemoryCeremonyStore({ clock }), now: () => clock.now(), elapse: async (ms) => clock.advance(ms), close: async () => {} };
});

const suite = redisSuite();
let server: Promise<TestRedis> | undefined;
after(async () => {
  await (await server?.catch(() => undefined))?.stop();
});

runCeremonyStoreContract('redis', async () => {
  server ??= startRedis();
  const redis = await connectedRedis(redisSettings((await server).url, { keyPrefix: 'ceremonies' }));
  return {
    ceremonies: new RedisCeremonyStore(redis, { clock: systemClock }),
    now: () => Date.now(),
    elapse: (ms) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    close: () => redis.close(),
  };
}, suite);

test('the memory store holds at most `max` ceremonies: the oldest go first', async () => {
  const clock = new ManualClock();
  const ceremonies = new MemoryCeremonyStore({ clock, max: 2 });
  for (const key of ['a', 'b', 'c']) await ceremonies.put(key, { kind: 'authentication', challenge: key, expiresAt: clock.now() + 60_000 });
  assert.equal(await ceremonies.take('a'), undefined);
  assert.equal((await ceremonies.take('c'))?.challenge, 'c');
});
