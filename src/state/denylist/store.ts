/**
 * Revoked access tokens (RFC 7009 §2): each by its `jti`, until its `exp`. An access token is a
 * JWT checked without a store, so its revocation is a deny list every instance holds in memory
 * whole (auth/denied-tokens.ts): the store keeps the list, and announces each entry to every
 * instance as it is added, so the bearer check asks no store per request.
 *
 * Bounded: at most `maxEntries` live entries. Past that, `deny` refuses (`full`) and records
 * nothing: the caller answers 503 and the token lives until its `exp` (minutes: access tokens
 * are short-lived, and the per-address limits bound how fast one caller fills it). A list that
 * dropped entries to make room would let revoked tokens back in, silently.
 */

export interface DeniedToken {
  jti: string;
  /** Epoch ms: the token's own `exp` (plus clock skew); the entry is dropped then. */
  expiresAt: number;
}

export type DenyOutcome =
  /** Recorded now, and announced to every instance. */
  | 'denied'
  /** Already on the list (its expiry kept as the later of the two); announced again. */
  | 'known'
  /** The list is at its bound: nothing recorded. */
  | 'full';

export interface DenylistListener {
  /** A token was denied, by this instance or another. */
  onDenied(token: DeniedToken): void;
  /** Notices may have been lost (the channel was down): the whole list must be read again. */
  onGap(): void;
}

export interface TokenDenylist {
  /** Adds the token until `expiresAt` and tells every instance (the listeners of `watch`). */
  deny(token: DeniedToken, now: number): Promise<DenyOutcome>;
  /** Every entry whose `expiresAt` is after `now`. */
  list(now: number): Promise<DeniedToken[]>;
  /** Registers a listener for tokens denied anywhere from now on. */
  watch(listener: DenylistListener): void;
}
