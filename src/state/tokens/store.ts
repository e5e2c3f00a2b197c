/**
 * Refresh-token families (RFC 9700 §4.14.2). A family starts at sign-in; each refresh consumes
 * one token and stores its successor in one atomic step, so of many concurrent refreshes with
 * one token exactly one wins, whatever the implementation or the number of gateway instances.
 * The same step honours token resets (state/revocation/store.ts): a family started at or before a
 * reset of its account or key is dead.
 *
 * The store never sees a token: only the SHA-256 of its secret part, compared in the store.
 * (Comparing digests of 256-bit random secrets leaks nothing useful through timing.)
 */

export interface NewFamily {
  familyId: string;
  accountId: string;
  keyId: string;
  /** Epoch ms; no token of the family outlives it, however often it is refreshed. */
  familyExpiresAt: number;
  /** The family's first token. */
  token: NewToken;
  /**
   * RFC 9449 §5: the DPoP key (RFC 7638 thumbprint) the family is bound to; each refresh must then
   * come with a proof by that key. Absent: unbound.
   */
  dpopThumbprint?: string;
}

export interface NewToken {
  tokenId: string;
  /** Hex SHA-256 of the token's secret part. */
  secretHash: string;
  /** Epoch ms of idle expiry; the store caps it at the family's expiry. */
  expiresAt: number;
}

export interface RotateRequest {
  /** The presented token, as parsed from its handle. */
  tokenId: string;
  accountId: string;
  keyId: string;
  secretHash: string;
  /** The family the presented token's handle names; a token of another family is invalid. */
  familyId: string;
  /** Stored only if the presented token is active: becomes the family's current token. */
  successor: NewToken;
  /**
   * The successor pair, encrypted under a key only the presented token's secret yields. Kept
   * with the family until its next rotation (not with the consumed token, which stays until the
   * family ends), so that a duplicate of this refresh arriving less than `graceMs` later (0:
   * never) gets the same pair back.
   */
  sealedPair: string;
  now: number;
  graceMs: number;
  /**
   * The thumbprint of the DPoP proof the refresh came with; absent without one. An unbound
   * family rotated with one is bound to it from then on (RFC 9449 §5: the holder of a refresh
   * token a page got unbound proves its key from its first refresh).
   */
  dpopThumbprint?: string;
}

export type RotateResult =
  /** The presented token was consumed and the successor stored. */
  | { outcome: 'rotated' }
  /** A duplicate within the grace window whose successor is still unused: answer it the same pair. */
  | { outcome: 'replayed'; sealedPair: string }
  /** A consumed token presented again outside the window: the whole family is now revoked. */
  | { outcome: 'reused'; familyId: string }
  /** Unknown, wrong secret, expired, its family revoked, expired or reset. Nothing changed. */
  | { outcome: 'invalid' }
  /**
   * A live token of a DPoP-bound family presented without a proof by the family's key (checked
   * after the secret, before anything else). Nothing changed: the holder of the key may still refresh.
   */
  | { outcome: 'dpop_mismatch' };

export interface RefreshTokenStore {
  /** Starts a family with its first token; `now` is the family's start, compared with resets. */
  createFamily(family: NewFamily, now: number): Promise<void>;
  /**
   * One atomic step; see RotateResult for the outcomes. A duplicate is `replayed` only while
   * the pair it would get back is still the family's newest (its refresh token unused).
   */
  rotate(request: RotateRequest): Promise<RotateResult>;
}
