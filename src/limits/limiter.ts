/**
 * Deciding one request against its limits: every check counted at once (each an atomic hit on
 * the counters, state/rate-counters/store.ts), then one verdict. The request goes on when every
 * enforced check was admitted; otherwise it is refused with 429, and what the admitted checks
 * took is given back, so a refused request spends nothing anywhere.
 *
 * A limit in dry-run is counted like any other, but over its quota it only reports (a metric
 * and an info line) and never refuses or sends headers.
 *
 * When Redis fails a limit's check (an error, `limits.storeTimeoutMs` without an answer, or an
 * open breaker: never a wait on Redis's own timeouts), the limit's failure policy decides:
 * `memory` counts in this process instead (each instance then admits the limit on its own),
 * `open` admits uncounted, `closed` refuses with 503. While that lasts the limit is degraded:
 * a gauge says so, a warn line says so when it starts (and each minute it goes on), an info
 * line when Redis counts again.
 */
import type { StoreFailurePolicy } from '../config/schema.js';
import { StoreUnavailable, TooManyRequests } from '../errors/errors.js';
import type { CounterWindow, RateCounters, Tally } from '../state/rate-counters/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Clock } from '../util/clock.js';

export interface Limit {
  /** Names it in headers, logs and metrics: `<name>-<seconds>s` per window in the headers. */
  readonly name: string;
  readonly windows: readonly CounterWindow[];
  readonly policy: StoreFailurePolicy;
  readonly dryRun: boolean;
}

/** One subject counted against one limit. */
export interface Check {
  readonly limit: Limit;
  readonly subject: string;
  readonly cost: number;
}

/** The RateLimit-Policy and RateLimit fields for an admitted request (none when nothing enforced counted). */
export type LimitHeaders = Readonly<Record<string, string>> | undefined;

export interface Limiter {
  /** Counts every check; resolves with the response's headers, or throws TooManyRequests / StoreUnavailable. */
  take(checks: readonly Check[]): Promise<LimitHeaders>;
  /** Gives a check's cost back (sign-in: a success is not a failed attempt). Never throws. */
  refund(check: Check): Promise<void>;
  /** Forgets a check's subject (sign-in: a success ends the run of failures). Never throws. */
  clear(check: Check): Promise<void>;
}

export interface LimiterDeps {
  /** The shared store: Redis when configured, else the same object as `memory`. */
  counters: RateCounters;
  /** This process's counters: the store without Redis, the `memory` policy's with it. */
  memory: RateCounters;
  log: Logger;
  metrics: Metrics;
  clock: Clock;
}

/** How the counting of one check went. */
interface Counted {
  check: Check;
  /** Undefined when the limit admitted without counting (`open`) or refused without (`closed`). */
  tally: Tally | undefined;
  store: RateCounters | undefined;
  closed: boolean;
}

/** Made once per limit (madeFor). */
interface Made {
  admitted(): void;
  refused(): void;
  wouldRefuse(): void;
  /** Each window's name in the headers, `"<limit>-<seconds>s"`. */
  names: readonly string[];
  /** Its RateLimit-Policy items. */
  policy: string;
}

const REMIND_MS = 60_000;

export function createLimiter(deps: LimiterDeps): Limiter {
  const state: LimiterState = { ...deps, shared: deps.counters !== deps.memory, degraded: new Map(), made: new WeakMap() };
  // Made once, so that the hot path hands them to map and headersOf without allocating.
  const countOne = (check: Check) => count(state, check);
  const giveBackOne = (counted: Counted) => giveBack(state, counted);
  const madeOf = (limit: Limit) => madeFor(state, limit);
  const { log } = state;

  return {
    async take(checks) {
      if (checks.length === 0) return undefined;
      const results = await Promise.all(checks.map(countOne));
      let refused = false;
      let closed = false;
      let retryMs = 0;
      for (const { check, tally, closed: isClosed } of results) {
        const said = madeOf(check.limit);
        if (isClosed) {
          closed = true;
        } else if (tally === undefined || tally.admitted) {
          said.admitted();
        } else if (check.limit.dryRun) {
          said.wouldRefuse();
          log.info({ limit: check.limit.name, retryAfterMs: refusedForMs(check, tally) }, 'rate limit would refuse (dry run)');
        } else {
          said.refused();
          refused = true;
          retryMs = Math.max(retryMs, refusedForMs(check, tally));
        }
      }
      if (!refused && !closed) return headersOf(results, false, madeOf);
      await Promise.all(results.map(giveBackOne));
      if (closed && !refused) throw new StoreUnavailable(new Error('rate limit store unavailable (closed policy)'));
      throw new TooManyRequests(Math.max(1, Math.ceil(retryMs / 1000)), headersOf(results, true, madeOf) ?? {});
    },

    async refund(check) {
      await spare(state, check, (store) => store.refund(check.subject, check.limit.windows, check.cost));
    },

    async clear(check) {
      await spare(state, check, (store) => store.clear(check.subject, check.limit.windows));
    },
  };
}

/** What the limiter's steps share: its dependencies, and what it knows of each limit. */
interface LimiterState extends LimiterDeps {
  /** Counting in Redis (`counters` is not `memory`). */
  readonly shared: boolean;
  /** Limits currently degraded, by name: since when, and when the log last said so. */
  readonly degraded: Map<string, { since: number; told: number }>;
  readonly made: WeakMap<Limit, Made>;
}

/**
 * What never changes for a limit, made once: its metric children (the hot path only
 * increments) and its header items (the hot path only adds what remains).
 */
function madeFor({ made, metrics }: LimiterState, limit: Limit): Made {
  let m = made.get(limit);
  if (m === undefined) {
    const child = (outcome: string) => metrics.rateLimitDecisions.labels(limit.name, outcome);
    const [admitted, refused, wouldRefuse] = [child('admitted'), child('refused'), child('would_refuse')];
    const names = limit.windows.map((w) => `"${limit.name}-${w.ms / 1000}s"`);
    m = {
      admitted: () => admitted.inc(), refused: () => refused.inc(), wouldRefuse: () => wouldRefuse.inc(),
      names,
      policy: limit.windows.map((w, i) => `${names[i]};q=${w.limit};w=${w.ms / 1000}`).join(', '),
    };
    made.set(limit, m);
  }
  return m;
}

function failed({ metrics, clock, degraded, log }: LimiterState, limit: Limit, err: unknown): void {
  metrics.rateLimitStoreFailures.labels(limit.name, limit.policy).inc();
  const now = clock.now();
  const state = degraded.get(limit.name);
  if (state === undefined) {
    degraded.set(limit.name, { since: now, told: now });
    metrics.rateLimitDegraded.labels(limit.name, limit.policy).set(1);
    log.warn({ limit: limit.name, policy: limit.policy, cause: describe(err) }, 'rate limit degraded: Redis unavailable, applying the failure policy');
  } else if (now - state.told >= REMIND_MS) {
    state.told = now;
    log.warn({ limit: limit.name, policy: limit.policy, forMs: now - state.since }, 'rate limit still degraded: Redis unavailable');
  }
}

function recovered({ metrics, clock, degraded, log }: LimiterState, limit: Limit): void {
  const state = degraded.get(limit.name);
  if (state === undefined) return;
  degraded.delete(limit.name);
  metrics.rateLimitDegraded.labels(limit.name, limit.policy).set(0);
  log.info({ limit: limit.name, forMs: clock.now() - state.since }, 'rate limit counting in Redis again');
}

async function count(state: LimiterState, check: Check): Promise<Counted> {
  const { counters, memory } = state;
  const { limit, subject, cost } = check;
  if (!state.shared) return { check, tally: await memory.hit(subject, limit.windows, cost), store: memory, closed: false };
  try {
    const tally = await counters.hit(subject, limit.windows, cost);
    if (state.degraded.size > 0) recovered(state, limit);
    return { check, tally, store: counters, closed: false };
  } catch (err) {
    failed(state, limit, err);
    switch (limit.policy) {
      case 'memory':
        return { check, tally: await memory.hit(subject, limit.windows, cost), store: memory, closed: false };
      case 'open':
        return { check, tally: undefined, store: undefined, closed: false };
      case 'closed':
        return { check, tally: undefined, store: undefined, closed: !limit.dryRun };
    }
  }
}

/** Gives back what an admitted, counted check took (a refused request spends nothing). */
function giveBack({ log }: LimiterState, counted: Counted): Promise<void> {
  const { tally, store, check } = counted;
  if (tally === undefined || !tally.admitted || store === undefined) return Promise.resolve();
  return store.refund(check.subject, check.limit.windows, check.cost).catch((err: unknown) => {
    log.debug({ limit: check.limit.name, cause: describe(err) }, 'rate limit refund failed');
  });
}

/** Runs a correction on the shared store, and on memory too when it stands in for it. */
async function spare({ shared, degraded, counters, memory, log }: LimiterState, check: Check, act: (store: RateCounters) => Promise<void>): Promise<void> {
  const stores = shared && degraded.has(check.limit.name) && check.limit.policy === 'memory' ? [counters, memory] : [counters];
  await Promise.all(stores.map((store) => act(store).catch((err: unknown) => {
    log.debug({ limit: check.limit.name, cause: describe(err) }, 'rate limit correction failed');
  })));
}

/** How long until every window that refused has room for the cost again. */
function refusedForMs(check: Check, tally: Tally): number {
  let ms = 0;
  check.limit.windows.forEach((w, i) => {
    if (tally.counts[i]! + check.cost > w.limit) ms = Math.max(ms, tally.resetsInMs[i]!);
  });
  return ms;
}

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers-10) of the enforced, counted
 * checks: every window is one policy named `<limit>-<seconds>s`, with its quota `q` and window
 * `w`, and one RateLimit item with what remains (`r`) and the seconds until it resets (`t`).
 */
function headersOf(results: readonly Counted[], givenBack: boolean, madeOf: (limit: Limit) => Made): LimitHeaders {
  let policy = '';
  let state = '';
  for (const { check, tally } of results) {
    if (tally === undefined || check.limit.dryRun) continue;
    const { names, policy: items } = madeOf(check.limit);
    // A refused request's admitted checks were given back: what remains is as before it.
    const spent = givenBack && tally.admitted ? check.cost : 0;
    const sep = policy === '' ? '' : ', ';
    policy += sep + items;
    check.limit.windows.forEach((w, i) => {
      state += `${i === 0 ? sep : ', '}${names[i]};r=${Math.max(0, w.limit - tally.counts[i]! + spent)};t=${Math.ceil(tally.resetsInMs[i]! / 1000)}`;
    });
  }
  return policy === '' ? undefined : { 'RateLimit-Policy': policy, RateLimit: state };
}

function describe(err: unknown): string {
  if (err instanceof StoreUnavailable && err.cause instanceof Error) return err.cause.message;
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
