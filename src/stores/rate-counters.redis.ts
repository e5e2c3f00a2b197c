/**
 * Rate counters in Redis, shared by every instance: one atomic script call per hit (RATE_HIT
 * in redis/scripts.ts), whatever the number of windows, so N instances admit exactly `limit`
 * per window between them.
 *
 * A limit must never hold a request up for long: each call here has its own short timeout
 * (`limits.storeTimeoutMs`, far below the command timeout sign-in and refresh wait for) and
 * its own circuit breaker, so a Redis that stalls or is gone costs one short wait per call
 * until the breaker opens, and none after; the caller (limits/limiter.ts) then applies the
 * limit's failure policy. This breaker is separate from the connection's: a Redis too slow
 * for limits may still be fine for sign-in.
 */
import { ConsecutiveBreaker, TimeoutStrategy, circuitBreaker, handleAll, timeout, wrap } from 'cockatiel';
import { StoreUnavailable } from '../errors/errors.js';
import type { RedisConnection } from './redis/client.js';
import type { CounterWindow, RateCounters, Tally } from './rate-counters.js';

export interface RedisRateCounterSettings {
  timeoutMs: number;
  breakerFailures: number;
  breakerCooldownMs: number;
}

export class RedisRateCounters implements RateCounters {
  readonly #redis: RedisConnection;
  readonly #policy;

  constructor(redis: RedisConnection, settings: RedisRateCounterSettings) {
    this.#redis = redis;
    this.#policy = wrap(
      circuitBreaker(handleAll, { halfOpenAfter: settings.breakerCooldownMs, breaker: new ConsecutiveBreaker(settings.breakerFailures) }),
      // abortOnReturn off: nothing reads the call's abort signal, and aborting it after every
      // call builds a DOMException with a stack, 2 % of a counted request's CPU (bench/README.md).
      timeout(settings.timeoutMs, { strategy: TimeoutStrategy.Aggressive, abortOnReturn: false }),
    );
  }

  async hit(subject: string, windows: readonly CounterWindow[], cost: number): Promise<Tally> {
    const reply = await this.#call(subject, windows, cost);
    const counts: number[] = [];
    const resetsInMs: number[] = [];
    for (let i = 0; i < windows.length; i++) {
      counts.push(Number(reply[1 + 2 * i]));
      resetsInMs.push(Number(reply[2 + 2 * i]));
    }
    return { admitted: reply[0] === 1, counts, resetsInMs };
  }

  async refund(subject: string, windows: readonly CounterWindow[], cost: number): Promise<void> {
    await this.#call(subject, windows, -cost);
  }

  async clear(subject: string, windows: readonly CounterWindow[]): Promise<void> {
    const keys = windows.map((w) => this.#redis.keys.rateWindow(subject, w.ms));
    await this.#guarded(() => this.#redis.run((c) => c.del(...keys)));
  }

  #call(subject: string, windows: readonly CounterWindow[], cost: number): Promise<number[]> {
    const args: (string | number)[] = [];
    for (const w of windows) args.push(this.#redis.keys.rateWindow(subject, w.ms));
    args.push(cost);
    for (const w of windows) args.push(w.limit);
    for (const w of windows) args.push(w.ms);
    return this.#guarded(() => this.#redis.run((c) => c.gwRateHit(windows.length, ...args)));
  }

  /** Every failure, the breaker's and the timeout's included, leaves as StoreUnavailable. */
  async #guarded<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await this.#policy.execute(call);
    } catch (err) {
      throw err instanceof StoreUnavailable ? err : new StoreUnavailable(err);
    }
  }
}
