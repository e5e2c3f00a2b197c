/**
 * The DPoP proofs already seen (RFC 9449 §11.1): a proof's `jti` is remembered until its `iat`
 * window ends, and a second use of it within that time is refused, on every instance that shares
 * the store. Keys are digests the caller makes of the proof's key thumbprint and `jti`
 * (auth/dpop.ts), never the client's text, so their length is bounded. Implementations: memory
 * (one process, bounded by count: past the bound the oldest are forgotten early) and Redis
 * (shared, one `SET NX PX` per proof); the contract suite test/contracts/dpop-proofs.contract.ts
 * holds both.
 */

export interface DpopProofStore {
  /**
   * Remembers `id` until `expiresAt` (epoch ms). True when it was not remembered already (the
   * proof is fresh), false when it was (a replay); either way one atomic step, so of two
   * concurrent uses of one proof exactly one is fresh.
   */
  remember(id: string, expiresAt: number, now: number): Promise<boolean>;
}
