/**
 * Rate counters: fixed windows counted from their first request. A window of `ms` opens when
 * its subject is first counted, admits at most `limit` units (a unit is a request or a share of
 * its cost) and ends `ms` later; the next unit opens the next window.
 *
 * Why fixed windows (docs/rate-limits.md has the longer story): they admit exactly `limit`
 * per window whatever the interleaving of instances, each costs one small counter per window,
 * and the wait they announce (Retry-After) is exact. Their known flaw, up to twice the limit
 * across a window's edge, is why a limit usually pairs a short burst window with a sustained
 * one: the short window caps how fast that doubling can come.
 *
 * A hit counts in every window of the subject or in none: it is admitted only when each window
 * has room for its cost, so a request refused by its burst window spends nothing of its
 * sustained one. Implementations: memory (one process, bounded LRU) and Redis (one atomic
 * script per hit, shared by every instance); test/contracts/rate-counters.contract.ts holds
 * both to the same behaviour.
 */

export interface CounterWindow {
  /** Units admitted per window. */
  readonly limit: number;
  /** Length of the window. */
  readonly ms: number;
}

export interface Tally {
  /** Every window had room for the cost, and it was added to each. */
  admitted: boolean;
  /** Per window, in the order given: units counted in it so far (this hit included if admitted). */
  counts: number[];
  /** Per window: milliseconds until it ends and its count starts again from 0. */
  resetsInMs: number[];
}

export interface RateCounters {
  /** Adds `cost` (≥ 1) to every window of `subject` when each has room for it; one atomic step. */
  hit(subject: string, windows: readonly CounterWindow[], cost: number): Promise<Tally>;
  /**
   * Gives back `cost` units taken earlier, to the windows still open (never below 0, never
   * opening one). A window given back to 0 is forgotten, so an attempt refused or given back
   * leaves nothing stored; the next unit opens a new window.
   */
  refund(subject: string, windows: readonly CounterWindow[], cost: number): Promise<void>;
  /** Forgets every window of `subject`. */
  clear(subject: string, windows: readonly CounterWindow[]): Promise<void>;
}
