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
}

export interface SessionStore {
  create(digest: string, session: OwnerSession): Promise<void>;
  /** The session, while it lives (unknown, idle too long or past its end: undefined). */
  find(digest: string): Promise<OwnerSession | undefined>;
  /** Moves the idle deadline (capped at expiresAt). */
  touch(digest: string, idleExpiresAt: number): Promise<void>;
  delete(digest: string): Promise<void>;
  /** Ends every session of the owner except `keep` (a digest): a password change, a removed owner. */
  deleteOwnerSessions(ownerId: string, keep?: string): Promise<void>;
}
