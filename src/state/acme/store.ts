/**
 * What ACME (tls/acme.ts) keeps in the gateway's state: the account key, the certificate it
 * obtained, the order lock, and the HTTP-01 answers a CA's validation may ask any instance for.
 * Implementations: a file beside the data file for a gateway alone (file.ts; its lock and its
 * answers are this process's), and Redis for several instances or workers (redis.ts: one lock,
 * so one instance orders; the certificate announced, so all serve it; the answers shared, so
 * the instance the CA reaches knows them). test/contracts/acme.contract.ts holds both.
 */

/** A certificate chain with its key, PEM, and the names it was ordered for. */
export interface AcmeCertificate {
  serverNames: string[];
  /** The full chain, leaf first. */
  certPem: string;
  keyPem: string;
}

export interface AcmeStore {
  /**
   * The account key kept; when there is none yet, `make`'s is kept and answered. Two instances
   * asking at once both get the one kept (the first written wins), so an order never runs
   * under a key the store does not hold.
   */
  accountKey(make: () => Promise<string>): Promise<string>;
  /** The certificate kept; undefined before the first order, or once it has expired (Redis drops it then). */
  certificate(): Promise<AcmeCertificate | undefined>;
  /** Keeps `certificate` in place of the one kept, and tells the other instances (`onCertificateSaved`). */
  saveCertificate(certificate: AcmeCertificate, expiresAt: number): Promise<void>;
  /**
   * Takes the order lock for `ttlMs` (it lapses by itself if its holder dies); answers the
   * token to release it with, or undefined while another holds it.
   */
  lockOrder(ttlMs: number): Promise<string | undefined>;
  /** Releases the lock if `token` still holds it: a lapsed lock taken over by another is left alone. */
  unlockOrder(token: string): Promise<void>;
  /** Calls `listener` when another instance saved a certificate (never for a single instance's file). */
  onCertificateSaved(listener: () => void): void;
}

/** The HTTP-01 answers waiting for the CA: written by the order, read by the redirect listener. */
export interface ChallengeStore {
  /** Keeps the key authorization for `token` for `ttlMs` at most (an order that dies leaves nothing for long). */
  set(token: string, keyAuthorization: string, ttlMs: number): Promise<void>;
  delete(token: string): Promise<void>;
  /** The key authorization waiting under `token`; undefined when none is. */
  get(token: string): Promise<string | undefined>;
}
