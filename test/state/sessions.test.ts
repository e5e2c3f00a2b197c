/**
 * Owner sessions: the contract (test/contracts/sessions.contract.ts) against the memory
 * store, then what only it promises: a bound on how many sessions it holds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { runSessionStoreContract } from '../contracts/sessions.contract.js';
import { ManualClock } from '../helpers/clock.js';

runSessionStoreContract('memory', async () => {
  const clock = new ManualClock();
  return {
    sessions: new MemorySessionStore({ clock }),
    now: () => clock.now(),
    elapse: async (ms) => clock.advance(ms),
    close: async () => {},
  };
});

test('the memory store holds at most `max` sessions: the oldest go first', async () => {
  const clock = new ManualClock();
  const sessions = new MemorySessionStore({ clock, max: 3 });
  const at = clock.now();
  for (const d of ['d1', 'd2', 'd3', 'd4']) {
    await sessions.create(d, { ownerId: 'o', csrfToken: 'c', createdAt: at, idleExpiresAt: at + 60_000, expiresAt: at + 600_000 });
  }
  assert.equal(await sessions.find('d1'), undefined);
  assert.notEqual(await sessions.find('d4'), undefined);
});

test('one owner\'s flood of sign-ins pushes out no other owner\'s session: each owner holds at most the cap', async () => {
  const clock = new ManualClock();
  // Room for ten owners at a cap of 3: the bound the service sizes the cache by.
  const sessions = new MemorySessionStore({ clock, max: 30 });
  const session = (ownerId: string) => {
    const at = clock.now();
    return { ownerId, csrfToken: 'c', createdAt: at, idleExpiresAt: at + 60_000, expiresAt: at + 600_000 };
  };
  const others = ['own_b', 'own_c', 'own_d'];
  for (const owner of others) for (const n of [1, 2, 3]) await sessions.create(`${owner}-${n}`, session(owner), { maxPerOwner: 3 });
  let evicted = 0;
  for (let i = 0; i < 5000; i++) {
    clock.advance(1);
    evicted += (await sessions.create(`flood-${i}`, session('own_a'), { maxPerOwner: 3 })).length;
  }
  assert.equal(evicted, 4997, 'every flood session but the last three was ended as the cap\'s eviction');
  for (const owner of others) {
    assert.equal((await sessions.listOwnerSessions(owner)).length, 3, `${owner} keeps every session`);
    for (const n of [1, 2, 3]) assert.notEqual(await sessions.find(`${owner}-${n}`), undefined);
  }
  assert.deepEqual((await sessions.listOwnerSessions('own_a')).map((s) => s.digest), ['flood-4999', 'flood-4998', 'flood-4997']);
});
