import assert from 'node:assert/strict';
import type { Clock } from '../../src/util/clock.js';

/** A clock that only moves when told to; for tests. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    assert.ok(Number.isFinite(ms), 'the clock moves by a finite amount (back, for skew tests)');
    this.#now += ms;
  }
}
