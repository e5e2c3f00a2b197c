/**
 * Rate counters in Redis, shared by every instance: each hit one atomic step (RATE_HIT_BATCH
 * in redis/scripts.ts), whatever the number of windows, so N instances admit exactly `limit`
 * per window between them.
 *
 * The hits and refunds asked for in one event-loop turn go as one script call (RATE_HIT_BATCH,
 * counting them in the order asked, as one call each would), sent once the turn's I/O is
 * handled (setImmediate): under load one round trip, one timeout and one breaker decision for
 * dozens of requests, where one each cost a third of a counted request's CPU (bench/README.md).
 * A batch fails or times out as a whole: every hit in it is then StoreUnavailable. On a Cluster
 * a script's keys must share a slot, so a batch there holds one subject's hits (its windows
 * share a slot by their hash tag); others go as their own batches, to their own primaries.
 *
 * A limit must never hold a request up for long: each call here has its own short timeout
 * (`limits.storeTimeoutMs`, far below the command timeout sign-in and refresh wait for) and
 * its own circuit breaker, so a Redis that stalls or is gone costs one short wait per call
 * until the breaker opens, and none after; the caller (limits/limiter.ts) then applies the
 * limit's failure policy. This breaker is separate from the connection's: a Redis too slow
 * for limits may still be fine for sign-in. On a Cluster there is one per primary (the one a
 * subject's windows live on), as the connection's, so a lost shard sends only its own
 * subjects' limits to their failure policy.
 */
import { ConsecutiveBreaker, TimeoutStrategy, circuitBreaker, handleAll, timeout, wrap, type IPolicy } from 'cockatiel';
import { StoreUnavailable } from '../../errors/errors.js';
import type { RedisConnection } from '../redis/client.js';
import type { CounterWindow, RateCounters, Tally } from './store.js';

export interface RedisRateCounterSettings {
  timeoutMs: number;
  breakerFailures: number;
  breakerCooldownMs: number;
}

/**
 * Hits per script call at most: a burst of thousands in one turn goes as several calls, so that
 * no one script holds Redis (which runs nothing else meanwhile) for long, and a call's arguments
 * stay far below what a JavaScript call can spread.
 */
const MAX_BATCH = 256;

interface Pending {
  readonly subject: string;
  readonly windows: readonly CounterWindow[];
  readonly cost: number;
  resolve(reply: number[]): void;
  reject(err: unknown): void;
}

export class RedisRateCounters implements RateCounters {
  readonly #redis: RedisConnection;
  readonly #settings: RedisRateCounterSettings;
  /** By primary on a Cluster (`''` for a single server): at most one per primary. */
  readonly #policies = new Map<string, IPolicy>();
  /** The turn's hits not sent yet, by batch (`''` for all on a single server, the subject on a Cluster). */
  #pending = new Map<string, Pending[]>();

  constructor(redis: RedisConnection, settings: RedisRateCounterSettings) {
    this.#redis = redis;
    this.#settings = settings;
  }

  #policyFor(key: string): IPolicy {
    const node = this.#redis.nodeOf(key) ?? '';
    let policy = this.#policies.get(node);
    if (policy === undefined) {
      const { breakerCooldownMs, breakerFailures, timeoutMs } = this.#settings;
      policy = wrap(
        circuitBreaker(handleAll, { halfOpenAfter: breakerCooldownMs, breaker: new ConsecutiveBreaker(breakerFailures) }),
        // abortOnReturn off: nothing reads the call's abort signal, and aborting it after every
        // call builds a DOMException with a stack, 2 % of a counted request's CPU (bench/README.md).
        timeout(timeoutMs, { strategy: TimeoutStrategy.Aggressive, abortOnReturn: false }),
      );
      this.#policies.set(node, policy);
    }
    return policy;
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
    // Hits asked for before the clear are sent before it, on the same connection: they count
    // first and are cleared, as they would be with one call each.
    this.#flush();
    const keys = windows.map((w) => this.#redis.keys.rateWindow(subject, w.ms));
    await this.#guarded(keys[0] ?? subject, () => this.#redis.run((c) => c.del(...keys)));
  }

  #call(subject: string, windows: readonly CounterWindow[], cost: number): Promise<number[]> {
    return new Promise((resolve, reject) => {
      const batch = this.#redis.cluster ? subject : '';
      const queued = this.#pending.get(batch);
      if (queued !== undefined) queued.push({ subject, windows, cost, resolve, reject });
      else {
        if (this.#pending.size === 0) setImmediate(this.#flush);
        this.#pending.set(batch, [{ subject, windows, cost, resolve, reject }]);
      }
    });
  }

  readonly #flush = (): void => {
    if (this.#pending.size === 0) return;
    const batches = this.#pending;
    this.#pending = new Map();
    for (const hits of batches.values()) {
      for (let at = 0; at < hits.length; at += MAX_BATCH) this.#send(hits.slice(at, at + MAX_BATCH));
    }
  };

  #send(hits: Pending[]): void {
    const keys: string[] = [];
    const args: number[] = [];
    for (const { subject, windows, cost } of hits) {
      for (const w of windows) keys.push(this.#redis.keys.rateWindow(subject, w.ms));
      args.push(windows.length, cost);
      for (const w of windows) args.push(w.limit);
      for (const w of windows) args.push(w.ms);
    }
    this.#guarded(keys[0] ?? hits[0]!.subject, () => this.#redis.run((c) => c.gwRateHitBatch(keys.length, ...keys, ...args))).then(
      (reply) => {
        let at = 0;
        for (const hit of hits) {
          const size = 1 + 2 * hit.windows.length;
          hit.resolve(reply.slice(at, at + size));
          at += size;
        }
      },
      (err: unknown) => {
        for (const hit of hits) hit.reject(err);
      },
    );
  }

  /** Every failure, the breaker's and the timeout's included, leaves as StoreUnavailable. `key`: one the call touches (all share its slot). */
  async #guarded<T>(key: string, call: () => Promise<T>): Promise<T> {
    try {
      return await this.#policyFor(key).execute(call);
    } catch (err) {
      throw err instanceof StoreUnavailable ? err : new StoreUnavailable(err);
    }
  }
}
