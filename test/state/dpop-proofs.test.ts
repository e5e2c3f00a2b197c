/**
 * DPoP proofs seen: the contract (test/contracts/dpop-proofs.contract.ts) against memory and a
 * real redis-server, then what each promises beyond it: memory forgets a proof once its time has
 * passed on the injected clock; Redis keeps each under one key whose TTL is its time.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryDpopProofStore } from '../../src/state/dpop-proofs/memory.js';
import { RedisDpopProofStore } from '../../src/state/dpop-proofs/redis.js';
import { runDpopProofContract } from '../contracts/dpop-proofs.contract.js';
import { ManualClock } from '../helpers/clock.js';
import { rawRedisClient, redisSuite, serverWithConnection } from '../helpers/redis.js';

runDpopProofContract('memory', async () => ({ store: new MemoryDpopProofStore({ clock: new ManualClock(Date.now()), maxEntries: 10_000 }), close: async () => {} }));

runDpopProofContract('redis', async () => {
  const { redis, close } = await serverWithConnection();
  return { store: new RedisDpopProofStore(redis), close };
}, redisSuite());

test('memory forgets a proof once its time has passed on its clock', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 28));
  const store = new MemoryDpopProofStore({ clock, maxEntries: 1000 });
  const at = clock.now();
  assert.equal(await store.remember('p', at + 60_000, at), true);
  clock.advance(59_999);
  assert.equal(await store.remember('p', at + 60_000, clock.now()), false);
  clock.advance(2);
  assert.equal(await store.remember('p', clock.now() + 60_000, clock.now()), true);
});

test('Redis keeps a proof under one key whose TTL is the rest of its time', redisSuite(), async (t) => {
  const { redis, server, close } = await serverWithConnection();
  t.after(close);
  const now = Date.now();
  await new RedisDpopProofStore(redis).remember('proof_ttl', now + 60_000, now);
  const raw = await rawRedisClient(t, server);
  const ttl = await raw.pttl(redis.keys.dpopProof('proof_ttl'));
  assert.ok(ttl > 50_000 && ttl <= 60_000, `TTL ${ttl}`);
});
