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
   * The scopes granted to the family when the sign-in narrowed the key's (the token endpoint's
   * `scope`); absent: not narrowed, each refresh gives the key's scopes of the moment. Kept for
   * the family's life: a refresh never widens it (RFC 6749 §6).
   */
  scopes?: readonly string[];
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
   * The family's granted scopes as the presented handle names them (absent: not narrowed). The
   * handle carries them so that the new access token is signed before the one store call; the
   * store holds the family's own, and a family whose grant differs is `invalid`, so editing the
   * handle cannot widen a grant.
   */
  scopes?: readonly string[];
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

/** A grant as the stores compare it: the scopes space-separated, '' for a family not narrowed. */
export function grantText(scopes: readonly string[] | undefined): string {
  return scopes === undefined ? '' : scopes.join(' ');
}

/** A presented refresh token, as parsed from its handle, with its secret's digest. */
export interface PresentedToken {
  tokenId: string;
  accountId: string;
  keyId: string;
  familyId: string;
  /** Hex SHA-256 of the token's secret part; the token counts as presented only when it matches. */
  secretHash: string;
}

/** What introspection (RFC 7662) learns of a refresh token whose secret matched. */
export interface RefreshTokenStatus {
  /** True when a refresh with it would rotate now (reuse detection aside: consumed is inactive). */
  active: boolean;
  /** Epoch ms: its idle expiry, capped at its family's. */
  expiresAt: number;
}

export interface RefreshTokenStore {
  /** Starts a family with its first token; `now` is the family's start, compared with resets. */
  createFamily(family: NewFamily, now: number): Promise<void>;
  /**
   * One atomic step; see RotateResult for the outcomes. A duplicate is `replayed` only while
   * the pair it would get back is still the family's newest (its refresh token unused).
   */
  rotate(request: RotateRequest): Promise<RotateResult>;
  /**
   * Ends the family of a presented token (RFC 7009 revocation), whichever of its tokens it is,
   * consumed or current; true when the family was live until now. One atomic step: a rotation
   * racing it either happened before (its successor is in the family, so ends with it) or finds
   * the family revoked. Unknown tokens and wrong secrets change nothing (false).
   */
  revokeFamily(token: PresentedToken): Promise<boolean>;
  /**
   * The status of a presented token (RFC 7662 introspection), resets of its account or key
   * included; undefined when it is unknown (or gone) or its secret does not match. Changes nothing.
   */
  inspect(token: PresentedToken, now: number): Promise<RefreshTokenStatus | undefined>;
}
