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
