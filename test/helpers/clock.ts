import assert from 'node:assert/strict';
import type { Scheduler, Timer } from '../../src/util/clock.js';

interface Pending {
  due: number;
  /** Order of setting (or of the last refresh): timers due at the same time fire in it. */
  order: number;
  fire: () => void;
}

/** A clock that only moves when told to, with timers that fire as it passes them; for tests. */
export class ManualClock implements Scheduler {
  #now: number;
  #pending = new Set<Pending>();
  #order = 0;
  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  /**
   * Moves the clock by `ms` (back too, for skew tests: then nothing fires). Every timer due on
   * the way fires, in the order of its due time, with the clock reading that time; a timer set
   * or refreshed by one that fires fires too if it falls due before the end.
   */
  advance(ms: number): void {
    assert.ok(Number.isFinite(ms), 'the clock moves by a finite amount (back, for skew tests)');
    const end = this.#now + ms;
    for (let next = this.#nextDue(end); next !== undefined; next = this.#nextDue(end)) {
      this.#pending.delete(next);
      this.#now = Math.max(this.#now, next.due);
      next.fire();
    }
    this.#now = end;
  }
  setTimer(ms: number, fire: () => void): Timer {
    const delay = Math.max(0, ms);
    const timer: Pending = { due: this.#now + delay, order: this.#order++, fire };
    this.#pending.add(timer);
    let cancelled = false;
    return {
      cancel: () => {
        cancelled = true;
        this.#pending.delete(timer);
      },
      refresh: () => {
        if (cancelled) return;
        timer.due = this.#now + delay;
        timer.order = this.#order++;
        this.#pending.add(timer);
      },
    };
  }
  /** How many timers are set and have neither fired nor been cancelled. */
  pendingTimers(): number {
    return this.#pending.size;
  }
  #nextDue(end: number): Pending | undefined {
    let next: Pending | undefined;
    for (const timer of this.#pending) {
      if (timer.due <= end && (next === undefined || timer.due < next.due || (timer.due === next.due && timer.order < next.order))) next = timer;
    }
    return next;
  }
}
