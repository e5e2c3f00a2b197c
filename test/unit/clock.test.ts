/**
 * The timers beside the clock (src/util/clock.ts): the test ManualClock fires them as it
 * advances, in due order and reading their due time, as the system clock's setTimeout would;
 * the system clock's own are real timers, cancelled and refreshed as Node's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { systemClock } from '../../src/util/clock.js';
import { ManualClock } from '../helpers/clock.js';

test('ManualClock: due timers fire in order of due time (then of setting), each reading its due time', () => {
  const clock = new ManualClock(1000);
  const fired: string[] = [];
  const note = (name: string) => () => fired.push(`${name}@${clock.now()}`);
  clock.setTimer(30, note('c'));
  clock.setTimer(10, note('a'));
  clock.setTimer(10, note('b'));
  clock.setTimer(31, note('late'));
  clock.advance(29);
  assert.deepEqual(fired, ['a@1010', 'b@1010']);
  clock.advance(1);
  assert.deepEqual(fired, ['a@1010', 'b@1010', 'c@1030']);
  assert.equal(clock.now(), 1030);
  assert.equal(clock.pendingTimers(), 1);
});

test('ManualClock: a timer set by a firing one fires in the same advance when it falls due', () => {
  const clock = new ManualClock(0);
  const fired: number[] = [];
  clock.setTimer(5, () => {
    fired.push(clock.now());
    clock.setTimer(5, () => fired.push(clock.now()));
    clock.setTimer(50, () => fired.push(clock.now()));
  });
  clock.advance(20);
  assert.deepEqual(fired, [5, 10]);
  assert.equal(clock.now(), 20);
  assert.equal(clock.pendingTimers(), 1);
});

test('ManualClock: cancel, refresh (also after firing, not after cancel), a negative delay, moving back', () => {
  const clock = new ManualClock(0);
  let count = 0;
  const timer = clock.setTimer(10, () => count++);
  clock.advance(8);
  timer.refresh();
  clock.advance(9);
  assert.equal(count, 0, 'refreshed at 8: due at 18');
  clock.advance(1);
  assert.equal(count, 1);
  timer.refresh();
  clock.advance(10);
  assert.equal(count, 2, 'refreshed after firing: fires again');
  timer.cancel();
  timer.refresh();
  clock.advance(100);
  assert.equal(count, 2, 'cancelled stays cancelled');

  const now = clock.setTimer(-5, () => count++);
  assert.equal(count, 2, 'nothing fires until the clock is told to move');
  clock.advance(0);
  assert.equal(count, 3, 'a negative delay is due at once');
  now.cancel();

  clock.setTimer(10, () => count++);
  clock.advance(-60_000);
  assert.equal(count, 3, 'moving back fires nothing');
  clock.advance(60_010);
  assert.equal(count, 4);
});

test('systemClock: a timer fires on real time; a cancelled one does not, nor one refreshed after cancel', async () => {
  const before = Date.now();
  let cancelledFired = false;
  const cancelled = systemClock.setTimer(0, () => { cancelledFired = true; });
  cancelled.cancel();
  cancelled.refresh();
  // A timer is due no earlier than one set before it with the same delay: waiting for this one covers the other.
  await new Promise<void>((resolve) => systemClock.setTimer(0, resolve));
  assert.equal(cancelledFired, false);
  assert.ok(systemClock.now() >= before, 'the wall clock');
});
