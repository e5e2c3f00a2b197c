/**
 * Per-key usage counting, as a decorator over RateLimits: every call a route quota is asked
 * about with an identity (proxied routes, WebSocket handshakes, /api/sign, /api/roles) counts as
 * one request when admitted, or one rate-limited call when refused with TooManyRequests. Public
 * routes (no identity) are not counted, nor sign-in and refresh (they have no key identity yet).
 *
 * Why a decorator over `RateLimits.route` rather than a middleware: it is the one place every
 * authenticated call passes, proxied and own routes alike, and it sees the limit's verdict, so
 * nothing is counted twice or missed. It wraps whatever createRateLimits answers, `limits.mode`
 * "off" included: counting usage is not a rate limit.
 *
 * Each counted call is counted once more when its answer ends, by the class of the status the
 * client got (2xx, 4xx…): the exchange (http/exchange.ts), which writes every request's record
 * once with its final status, tells the recorder (`answered`), which knows the calls it counted
 * by their request (a WeakMap: a call whose answer never ends is forgotten with its request).
 * So a 429 counts as rate-limited and 4xx, a proxied call the backend answered 503 as a request
 * and 5xx, a WebSocket handshake switched as a request and 1xx.
 *
 * Recording is a synchronous increment in a Map, never a store call: the recorder sends what it
 * gathered to the usage store every `usage.flushIntervalMs`, one flush at a time, and once more
 * when stopped. A flush that fails is logged at warn and its counts dropped (no retry queue that
 * an outage could grow). What is held between flushes is one entry per key (and bucket: at most
 * two, one flush interval being far shorter than a bucket) that made calls since the last flush:
 * bounded by the distinct keys calling, not by requests (test/http/owner-usage.test.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { Identity } from '../auth/bearer.js';
import { TooManyRequests } from '../errors/errors.js';
import { noStatuses, statusClassOf, usageBucketOf, type StatusClass, type UsageCounters, type UsageCounts, type UsageEntry } from '../state/usage/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import { limitsAreOff, type RateLimits } from './rate-limits.js';

export interface UsageRecorder {
  /** Counts one call of the identity's key: admitted, or refused by a rate limit; `req` is its request, for `answered`. */
  record(identity: Identity, admitted: boolean, req: IncomingMessage): void;
  /**
   * Counts the class of the status a request was answered with, when `record` counted it (any
   * other request: nothing); once per request (its exchange's end). An arrow: passed on as it is.
   */
  readonly answered: (req: IncomingMessage, status: number) => void;
  /** Sends what was counted so far to the store (waits for a flush under way first); never rejects. */
  flush(): Promise<void>;
  /** Entries held until the next flush (one per key and bucket), for tests of the bound. */
  readonly size: number;
  /** Stops the timer and flushes once more. */
  stop(): Promise<void>;
}

/** RateLimits that also count each identified call's outcome on the recorder. */
export function countUsage(limits: RateLimits, recorder: UsageRecorder): RateLimits {
  return {
    signIn: (apiKey, address) => limits.signIn(apiKey, address),
    ownerSignIn: (email, address, device) => limits.ownerSignIn(email, address, device),
    adminToken: (address) => limits.adminToken(address),
    refresh: (familyId, address) => limits.refresh(familyId, address),
    ownerWrite: (ownerId, accountId) => limits.ownerWrite(ownerId, accountId),
    ownerMail: (email, address) => limits.ownerMail(email, address),
    // No async frame of its own on the hot path: one then() on the limits' answer, and none
    // while limits are off, whose answer is always "admitted" (counted at once, the same count).
    route: limitsAreOff(limits) ? (route, identity, req) => {
      if (identity !== undefined) recorder.record(identity, true, req);
      return limits.route(route, identity, req);
    } : (route, identity, req) => {
      if (identity === undefined) return limits.route(route, identity, req);
      return limits.route(route, identity, req).then((headers) => {
        recorder.record(identity, true, req);
        return headers;
      }, (err: unknown) => {
        // A store failure (503) is no verdict on the call: neither a request served nor a limit.
        if (err instanceof TooManyRequests) recorder.record(identity, false, req);
        throw err;
      });
    },
  };
}

/** bucket start → account id → key id → counts */
type Pending = Map<number, Map<string, Map<string, UsageCounts>>>;

export function createUsageRecorder({ store, clock, log, flushIntervalMs }: {
  store: UsageCounters;
  clock: Clock;
  log: Logger;
  flushIntervalMs: number;
}): UsageRecorder {
  let pending: Pending = new Map();
  let size = 0;
  let flushing: Promise<void> = Promise.resolve();
  let busy = false;

  async function flushOnce(): Promise<void> {
    if (size === 0) return;
    const batch = pending;
    pending = new Map();
    size = 0;
    const entries: UsageEntry[] = [];
    for (const [bucketStart, accounts] of batch) {
      for (const [accountId, keys] of accounts) {
        for (const [keyId, c] of keys) entries.push({ accountId, keyId, bucketStart, ...c });
      }
    }
    try {
      await store.add(entries);
    } catch (err) {
      // Names and messages only (no key ids, no command arguments): see redis/client.ts.
      log.warn({ err: err instanceof Error ? { name: err.name, message: err.message } : String(err), dropped: entries.length },
        'usage counts could not be written to the usage store: this flush\'s counts are dropped');
    }
  }

  function flush(): Promise<void> {
    flushing = flushing.then(async () => {
      busy = true;
      try {
        await flushOnce();
      } finally {
        busy = false;
      }
    });
    return flushing;
  }

  // A timed flush is skipped while one is under way (a slow store): the next tick takes it all.
  const timer = setInterval(() => { if (!busy) void flush(); }, flushIntervalMs);
  timer.unref();

  /** The counts of the key in the current bucket, made on first use. */
  function countsOf(accountId: string, keyId: string): UsageCounts {
    const bucket = usageBucketOf(clock.now());
    let accounts = pending.get(bucket);
    if (accounts === undefined) pending.set(bucket, accounts = new Map());
    let keys = accounts.get(accountId);
    if (keys === undefined) accounts.set(accountId, keys = new Map());
    let counts = keys.get(keyId);
    if (counts === undefined) {
      keys.set(keyId, counts = { requests: 0, rateLimited: 0, statuses: noStatuses() });
      size++;
    }
    return counts;
  }

  // The calls counted and not yet answered, by request: nothing to bound, they go with their request.
  const unanswered = new WeakMap<IncomingMessage, Identity>();

  return {
    record(identity, admitted, req) {
      const counts = countsOf(identity.accountId, identity.keyId);
      if (admitted) counts.requests++;
      else counts.rateLimited++;
      unanswered.set(req, identity);
    },
    answered: (req, status) => {
      const identity = unanswered.get(req);
      if (identity === undefined) return;
      unanswered.delete(req);
      const statusClass: StatusClass | undefined = statusClassOf(status);
      if (statusClass !== undefined) countsOf(identity.accountId, identity.keyId).statuses[statusClass]++;
    },
    flush,
    get size() {
      return size;
    },
    async stop() {
      clearInterval(timer);
      await flush();
    },
  };
}
