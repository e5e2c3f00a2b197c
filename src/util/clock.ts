/** Time as the gateway sees it. Token, cache and limiter code take a Clock so tests move time. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
