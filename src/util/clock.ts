/** Time as the gateway sees it. Token, cache and limiter code take a Clock so tests move time. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** A timer set with Timers.setTimer. */
export interface Timer {
  /** It will not fire (again). Calling it twice, or after it fired, does nothing. */
  cancel(): void;
  /** Starts its countdown again from now, with the same delay; after it fired too (as Node's refresh). Not after cancel. */
  refresh(): void;
}

/**
 * Timers on the same time as a Clock, so that code which waits (a WebSocket's idle and expiry
 * timers, its close wait) can be driven by a test's clock instead of by real time.
 */
export interface Timers {
  /** Calls `fire` once `ms` have passed (a negative `ms` counts as 0). */
  setTimer(ms: number, fire: () => void): Timer;
}

/** A clock that can also wait: what code that both reads the time and waits on it takes. */
export interface Scheduler extends Clock, Timers {}

/** setTimeout's ceiling: a longer delay (a token from a clock far off) would overflow it and fire at once. */
const MAX_DELAY_MS = 2_147_483_647;

export const systemClock: Scheduler = {
  now: () => Date.now(),
  // Not unref'd: the timers set today end connections (a WebSocket's close wait), which must
  // happen while the process runs, and those connections hold the process open anyway.
  setTimer(ms, fire) {
    const timeout = setTimeout(fire, Math.min(MAX_DELAY_MS, Math.max(0, ms)));
    let cancelled = false;
    return {
      cancel() {
        cancelled = true;
        clearTimeout(timeout);
      },
      refresh() {
        if (!cancelled) timeout.refresh();
      },
    };
  },
};
