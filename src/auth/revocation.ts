/**
 * Honouring token resets on every call, although access tokens are JWTs checked without a
 * store: each token carries its issue time in milliseconds (`iat_ms`), and a token is refused
 * when a reset of its account or key is at or after that time.
 *
 * The resets of an account are read from the store and cached (lru-cache, `ttlMs`, served
 * stale while one fresh copy is fetched), and every reset is pushed to every instance as a
 * notice, remembered for as long as an access token lives: the cached copy and the notices
 * together are the whole state, so a reset is honoured as soon as its notice arrives, and one
 * known before a store outage keeps being honoured through it. After a gap in the notices
 * every copy is read again before it is trusted, but still answers while the store cannot be
 * read. When nothing is known and the store cannot be read, the token is accepted: an outage
 * must not log everyone out (docs/redis.md states this guarantee).
 *
 * Resets from before the store's epoch (state/revocation/store.ts) may be lost, so a token from an
 * earlier epoch is refused. Each access token carries the epoch it was issued under (the
 * `reset_epoch` claim: the epoch record's start, as read from the store), and a token whose
 * epoch is not the store's current one is refused: exact, whatever the instances' clocks say
 * and however soon after a reset the store lost its data, and known to an instance started
 * after the loss too (issue 26). The epoch is read once, then kept current by the store's
 * `onEpoch`, so the check costs one comparison; only an epoch this instance does not know
 * (one lost before it started, or a new one it has not heard of yet) asks the store, once per
 * such epoch: one not current then is remembered as retired. A new epoch (a loss) is announced
 * to the watchers as a gap, so open WebSockets are checked again, and to `whenDataLost`, so
 * every cached credential is dropped.
 *
 * A token with no `reset_epoch` (issued by an earlier version, or while the epoch record could
 * not be read) is judged by its issue time: refused when issued before the epoch began, less
 * `skewMs`, the clock disagreement allowed between instances (so an instance whose clock lags
 * the one that made the record does not have its fresh tokens refused; a start later than this
 * instance's own clock, made by a clock further ahead, counts from when it is first heard).
 */
import { LRUCache } from 'lru-cache';
import { latestReset, type AccountResets, type ResetListener, type ResetScope, type RevocationStore } from '../state/revocation/store.js';
import type { Clock } from '../util/clock.js';
import { entryBound } from '../util/lru.js';

export interface IssuedToken {
  accountId: string;
  keyId: string;
  /** Epoch ms. */
  issuedAtMs: number;
  /** The reset store's epoch the token was issued under (its start); absent: judged by `issuedAtMs`. */
  epoch?: number;
}

export interface Revocations {
  /** Records a reset at the current time; returns that time. */
  reset(scope: ResetScope): Promise<number>;
  /**
   * True when a reset covers this token. Synchronous when the answer is cached. `durable`: the
   * token's validity is kept in a durable store of its own (an API settings token in the owner
   * store), so a token from before the epoch began is not refused for its age alone.
   */
  isRevoked(token: IssuedToken, options?: { durable?: boolean }): boolean | Promise<boolean>;
  /**
   * The store's current epoch, for a token about to be issued (its `reset_epoch`); read from the
   * store when not known yet. Undefined when it cannot be read: the token then goes without.
   */
  currentEpoch(): number | undefined | Promise<number | undefined>;
  /**
   * Called at once when the store's epoch is replaced (it lost its data): whatever was cached
   * from it (credentials, key records, verified tokens) must be dropped.
   */
  whenDataLost(listener: () => void): void;
  /**
   * Told of every reset this instance learns of (its own or another's notice) and of every gap
   * in the notices: for what holds a token longer than one request (an open WebSocket).
   */
  watch(listener: ResetListener): void;
}

export interface RevocationsOptions {
  store: RevocationStore;
  clock: Clock;
  /** How long a cached copy is trusted without a notice. */
  ttlMs: number;
  /** How long a heard notice is remembered: the access-token lifetime plus clock skew. */
  rememberMs: number;
  /** Most accounts cached. */
  max?: number;
  /** Clock disagreement allowed between instances when comparing with the epoch's start. */
  skewMs?: number;
}

interface HeardResets {
  account?: number;
  keys: Map<string, number>;
}

interface CachedResets {
  resets: AccountResets;
  /** The notice epoch the read began in; a gap in the notices starts a new one. */
  epoch: number;
}

export function createRevocations({ store, clock, ttlMs, rememberMs, max = 100_000, skewMs = 0 }: RevocationsOptions): Revocations {
  const listeners: ResetListener[] = [];
  const dataLost: (() => void)[] = [];
  const resets = new KnownResets(store, clock, ttlMs, rememberMs, max);
  const epochs = new StoreEpoch(store, clock, ttlMs, skewMs, () => {
    // Data lost: every cached copy is from before, and what holds a token must check it again.
    resets.distrustCopies();
    for (const listener of dataLost) listener();
    for (const listener of listeners) listener.onGap();
  });

  function remember(scope: ResetScope, at: number): void {
    resets.remember(scope, at);
    for (const listener of listeners) listener.onReset(scope, at);
  }

  store.watch({
    onReset: remember,
    // Notices may have been lost: every cached copy must be read again before it is trusted,
    // but stays the answer while the store cannot be read.
    onGap() {
      resets.distrustCopies();
      for (const listener of listeners) listener.onGap();
    },
    onEpoch: (startedAt) => epochs.begin(startedAt),
  });
  // Not read here: a Redis store is not connected yet (services.warmUp reads it once it is,
  // and the store announces it); the first token asks otherwise.

  return {
    async reset(scope) {
      const at = clock.now();
      await store.reset(scope, at);
      // This instance refuses the old tokens from now on, before its own notice comes back.
      remember(scope, at);
      return at;
    },

    watch(listener) {
      listeners.push(listener);
    },

    whenDataLost(listener) {
      dataLost.push(listener);
    },

    currentEpoch() {
      if (epochs.start !== undefined || clock.now() < epochs.askAgainAt) return epochs.start;
      return epochs.read().then(() => epochs.start);
    },

    isRevoked(token, { durable = false } = {}) {
      if (resets.isHeardOf(token)) return true;
      // Resets lost with the epoch cannot have covered a durable token: its own store records
      // its revocation (and an account reset's) before the reset is made.
      if (durable) return resets.isCoveredByStoredReset(token);
      if (token.epoch !== undefined) {
        // The hot path: the epoch this instance knows, one comparison.
        if (token.epoch === epochs.start) return resets.isCoveredByStoredReset(token);
        const other = epochs.isAnother(token.epoch);
        if (other === true) return true;
        if (other === false) return resets.isCoveredByStoredReset(token);
        return other.then((refused) => refused || resets.isCoveredByStoredReset(token));
      }
      if (epochs.refuseBefore === undefined) {
        // Until the epoch is known (the first token, or a start that found the store
        // unreachable): ask; if it cannot be read, the resets decide, as in any outage.
        if (clock.now() < epochs.askAgainAt) return resets.isCoveredByStoredReset(token);
        return epochs.read().then(() => (epochs.refuseBefore !== undefined && token.issuedAtMs < epochs.refuseBefore) || resets.isCoveredByStoredReset(token));
      }
      if (token.issuedAtMs < epochs.refuseBefore) return true;
      return resets.isCoveredByStoredReset(token);
    },
  };
}

/**
 * The resets this instance knows of: each account's as read from the store (cached), and every
 * notice heard since, kept as long as a token from before it can live. With the cached copy
 * (the resets from before the notices) the notices are the whole state, even while the store
 * is down.
 */
class KnownResets {
  /** The notice epoch: a gap in the notices (or a loss of the store's data) starts a new one. */
  private epoch = 0;
  private readonly cached: LRUCache<string, CachedResets>;
  private readonly heard: LRUCache<string, HeardResets>;

  constructor(store: RevocationStore, clock: Clock, ttlMs: number, rememberMs: number, max: number) {
    const perf = { now: () => clock.now() };
    this.cached = new LRUCache<string, CachedResets>({
      ...entryBound(max),
      ttl: ttlMs,
      perf,
      ttlResolution: 0,
      ttlAutopurge: false,
      // A stale copy is what an outage is answered from, so it is kept until replaced.
      noDeleteOnStaleGet: true,
      allowStaleOnFetchRejection: true,
      noDeleteOnFetchRejection: true,
      fetchMethod: async (accountId) => {
        const started = this.epoch;
        return { resets: await store.read(accountId), epoch: started };
      },
    });
    this.heard = new LRUCache<string, HeardResets>({ ...entryBound(max), ttl: rememberMs, perf, ttlResolution: 0, ttlAutopurge: false });
  }

  /** Every cached copy must be read again before it is trusted (it stays the answer while the store cannot be read). */
  distrustCopies(): void {
    this.epoch++;
  }

  remember({ accountId, keyId }: ResetScope, at: number): void {
    const entry = this.heard.get(accountId) ?? { keys: new Map<string, number>() };
    if (keyId === undefined) entry.account = Math.max(entry.account ?? 0, at);
    else entry.keys.set(keyId, Math.max(entry.keys.get(keyId) ?? 0, at));
    this.heard.set(accountId, entry);
  }

  /** True when a notice heard covers the token. */
  isHeardOf(token: IssuedToken): boolean {
    return covers(this.heard.get(token.accountId), token);
  }

  isCoveredByStoredReset(token: IssuedToken): boolean | Promise<boolean> {
    const { cached } = this;
    const fresh = cached.get(token.accountId);
    if (fresh !== undefined && fresh.epoch === this.epoch) return covers(fresh.resets, token);
    // Expired copy of this epoch: answer from it while one read refreshes it. Copy from
    // before a gap: wait for the read, and fall back to the copy only if the read fails.
    const kept = fresh ?? cached.peek(token.accountId, { allowStale: true });
    const current = kept === undefined || kept.epoch === this.epoch;
    return cached.fetch(token.accountId, { allowStale: current, forceRefresh: !current }).then(
      (entry) => covers(entry?.resets, token),
      // Nothing known and the store unreadable: accept (see the revocation guarantee in docs/redis.md).
      () => false,
    );
  }
}

function covers(resets: AccountResets | undefined, token: IssuedToken): boolean {
  return resets !== undefined && token.issuedAtMs <= latestReset(resets, token.keyId);
}

/** The store's epoch as this instance knows it, read once and then kept current by the store's `onEpoch`. */
class StoreEpoch {
  /** The epoch's start as the store last gave it. */
  start: number | undefined;
  /** Tokens with no epoch claim issued before this are refused; undefined until the store's epoch is first read. */
  refuseBefore: number | undefined;
  /** Before this, no token asks for the epoch again: its last read failed. */
  askAgainAt = 0;
  /**
   * Epochs known not to be the store's: replaced while this instance watched, or found not
   * current when a token of theirs asked. Only the gateway mints epochs (tokens are signed), so
   * there are few; bounded anyway.
   */
  private readonly retired = new LRUCache<number, true>({ max: 1000 });
  private reading: Promise<boolean> | undefined;
  private readonly store: RevocationStore;
  private readonly clock: Clock;
  private readonly ttlMs: number;
  private readonly skewMs: number;
  /** Called when a new epoch replaces a known one: the store lost its data. */
  private readonly onLoss: () => void;

  constructor(store: RevocationStore, clock: Clock, ttlMs: number, skewMs: number, onLoss: () => void) {
    this.store = store;
    this.clock = clock;
    this.ttlMs = ttlMs;
    this.skewMs = skewMs;
    this.onLoss = onLoss;
  }

  begin(startedAt: number): void {
    if (startedAt === this.start) return;
    const previous = this.start;
    this.start = startedAt;
    this.retired.delete(startedAt);
    // A start after this instance's now was made by a clock ahead of it, not by data begun in
    // the future: counted from now, or every token issued here until then would be refused.
    this.refuseBefore = Math.min(startedAt, this.clock.now()) - this.skewMs;
    if (previous !== undefined) {
      this.retired.set(previous, true);
      this.onLoss();
    }
  }

  /**
   * Reads the epoch, one read at a time; true once it was read. A failed read is tried again by
   * a token no sooner than `ttlMs` later (the store's own checks go on meanwhile), so that an
   * unreadable record does not cost every token a round trip.
   */
  read(): Promise<boolean> {
    this.reading ??= this.store.epoch().then((startedAt) => {
      this.begin(startedAt);
      return true;
    }, () => {
      this.askAgainAt = this.clock.now() + this.ttlMs;
      return false;
    }).finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  /**
   * True when the token's epoch is not the store's. One this instance does not know is asked
   * of the store once: a new epoch not heard of yet is taken up, any other is retired. While the
   * store cannot be read, an unknown epoch is refused if this instance knows the current one
   * (the safe side: the token may be from before a loss), and left to the resets if it knows
   * none (as any token is in an outage).
   */
  isAnother(tokenEpoch: number): boolean | Promise<boolean> {
    if (tokenEpoch === this.start) return false;
    if (this.retired.has(tokenEpoch)) return true;
    if (this.clock.now() < this.askAgainAt) return this.start !== undefined;
    return this.read().then((read) => {
      if (tokenEpoch === this.start) return false;
      if (read) this.retired.set(tokenEpoch, true);
      return this.start !== undefined;
    });
  }
}
