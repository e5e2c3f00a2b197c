/**
 * Token resets (interface §5.6: "a token suspected to be compromised must be reset by its
 * owner"). A reset of an API key, or of a whole account, kills every token of that scope
 * issued at or before the reset: refresh-token families started by then (the token store
 * checks this in its rotate step) and access tokens whose issue time is not later (the bearer
 * guard checks this through auth/revocation.ts, which caches what `read` returns).
 *
 * Times are epoch milliseconds from the gateway instances' clocks, which must agree (NTP).
 *
 * A store that loses its data loses its resets with it, and a JWT outlives the loss: so each
 * store has an epoch, the time from which it holds every reset, and a token issued under
 * another epoch (each carries its own) is refused as if reset (auth/revocation.ts). The start
 * is also the epoch's identity. Memory: the process's start. Redis:
 * a record made by the first instance that finds none, which is a new deployment or a Redis
 * that lost its data (restart without persistence, failover to an empty replica, eviction,
 * FLUSHALL); every instance checks it on each (re)connection and every `resetCacheTtlMs`.
 */

export interface ResetScope {
  accountId: string;
  /** One API key of the account; absent: every key of the account. */
  keyId?: string;
}

/** The latest reset of an account and of each of its keys; empty when there was none. */
export interface AccountResets {
  /** Reset of the whole account, if any. */
  account?: number;
  /** Resets of single keys, by key id. */
  keys: ReadonlyMap<string, number>;
}

export interface ResetListener {
  /** A reset was recorded, by this instance or another. */
  onReset(scope: ResetScope, at: number): void;
  /** Notices may have been lost (the channel was down): anything cached may be stale. */
  onGap(): void;
}

/** What the store tells the reset cache (auth/revocation.ts): the notices, and each new epoch. */
export interface RevocationListener extends ResetListener {
  /** The store's epoch is (now) the one begun at `startedAt`: tokens issued before it are refused. */
  onEpoch(startedAt: number): void;
}

export interface RevocationStore {
  /**
   * Records the reset and tells every instance (the listeners of `watch`). A later reset
   * of the same scope moves the time forward; an earlier one changes nothing.
   */
  reset(scope: ResetScope, at: number): Promise<void>;
  /** The account's resets as stored now. */
  read(accountId: string): Promise<AccountResets>;
  /**
   * When the store's current epoch began. Redis: made now (with this instance's clock) when no
   * epoch record exists, atomically, so instances racing to make it agree on one. A start that
   * differs from the one this handle knew means the data was lost: the listeners hear `onEpoch`.
   */
  epoch(): Promise<number>;
  /** Registers a listener for resets made anywhere from now on, and for new epochs. */
  watch(listener: RevocationListener): void;
}

/** The time of the latest reset that covers a token of this key, or 0 when none does. */
export function latestReset(resets: AccountResets, keyId: string): number {
  return Math.max(resets.account ?? 0, resets.keys.get(keyId) ?? 0);
}

/**
 * How long a reset must be kept: as long as a token issued before it can live. Refresh
 * families end within refreshFamilyMaxSeconds; access tokens sooner.
 */
export function resetRetentionMs(tokens: { refreshFamilyMaxSeconds: number; clockSkewSeconds: number }): number {
  return (tokens.refreshFamilyMaxSeconds + tokens.clockSkewSeconds) * 1000;
}

export const NO_RESETS: AccountResets = Object.freeze({ keys: new Map<string, number>() });
