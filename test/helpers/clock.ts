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
    assert.ok(Number.isFinite(ms) && ms >= 0, 'a clock only moves forward');
    this.#now += ms;
  }
}
