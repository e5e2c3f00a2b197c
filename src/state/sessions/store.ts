/**
 * Owner sessions (src/owner/sessions.ts), by the SHA-256 of the session id the cookie carries,
 * so a leaked store holds nothing a browser could present. Memory without Redis (a restart
 * signs owners out), Redis with it (every instance knows every session). One contract:
 * test/contracts/sessions.contract.ts.
 */
export interface OwnerSession {
  ownerId: string;
  /** The synchronizer token every state-changing call must echo in X-CSRF-Token. */
  csrfToken: string;
  /** Epoch ms. */
  createdAt: number;
  /** Epoch ms: the session ends here whatever its use. */
  expiresAt: number;
  /** Epoch ms: the session ends here unless touched (never later than expiresAt). */
  idleExpiresAt: number;
  /** Epoch ms: its last use the store was told of (each touch; at most a minute behind). Absent in sessions made before it was kept: createdAt. */
  lastSeenAt?: number;
  /** The client address it was made from (at most SESSION_IP_MAX characters). */
  ip?: string;
  /** The User-Agent it was made with (at most SESSION_USER_AGENT_MAX characters). */
  userAgent?: string;
}

/** The longest client address and User-Agent a session keeps (longer ones are cut by the owner service). */
export const SESSION_IP_MAX = 64;
export const SESSION_USER_AGENT_MAX = 256;

/** A live session of an owner, with its digest (the store's key; never shown to owners). */
export interface StoredSession {
  digest: string;
  session: OwnerSession;
}

export interface SessionStore {
  /**
   * Stores a session. With `maxPerOwner`, the owner's oldest sessions (by createdAt) end until
   * the owner holds at most that many, this one included: those are answered (none: empty), so
   * that the caller can record them. Without it the owner's sessions are not counted.
   */
  create(digest: string, session: OwnerSession, options?: { maxPerOwner?: number }): Promise<StoredSession[]>;
  /** The owner's live sessions, newest first: bounded by the cap `create` keeps (and a few ended ones it has not yet pruned never appear). */
  listOwnerSessions(ownerId: string): Promise<StoredSession[]>;
  /** The session, while it lives (unknown, idle too long or past its end: undefined). */
  find(digest: string): Promise<OwnerSession | undefined>;
  /** Moves the idle deadline (capped at expiresAt) and sets lastSeenAt to the store's now. */
  touch(digest: string, idleExpiresAt: number): Promise<void>;
  delete(digest: string): Promise<void>;
  /** Ends every session of the owner except `keep` (a digest): a password change, a removed owner. */
  deleteOwnerSessions(ownerId: string, keep?: string): Promise<void>;
}
