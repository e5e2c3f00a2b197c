/**
 * Refresh-token store in process memory, for a gateway that runs alone. JavaScript runs one
 * turn at a time and rotate() does not await between reading and writing, so each call is
 * atomic as the contract requires. Entries are bounded by count (lru-cache `max`) and leave
 * when their own expiry passes, measured on the injected clock.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import { latestReset } from '../revocation/store.js';
import type { MemoryRevocationStore } from '../revocation/memory.js';
import { grantText, type NewFamily, type PresentedToken, type RefreshTokenStatus, type RefreshTokenStore, type RotateRequest, type RotateResult } from './store.js';
import { entryBound } from '../../util/lru.js';

interface TokenEntry {
  familyId: string;
  accountId: string;
  keyId: string;
  secretHash: string;
  expiresAt: number;
  /** Set once consumed. */
  rotatedAt?: number;
  successorId?: string;
}

interface FamilyEntry {
  createdAt: number;
  /** The DPoP key thumbprint the family is bound to (NewFamily.dpopThumbprint). */
  dpopThumbprint?: string;
  expiresAt: number;
  revoked: boolean;
  /** The token id that may be rotated next. */
  currentTokenId: string;
  /**
   * The pair of the latest rotation, for a duplicate of it: kept once per family, not on each
   * consumed token, which stays until the family ends (as in scripts.ts ROTATE).
   */
  sealedPair?: string;
  /** The family's granted scopes (grantText): '' when not narrowed. */
  grant: string;
}

export interface MemoryTokenStoreOptions {
  clock: Clock;
  /** Most tokens kept; past it the least recently used go first (their holders sign in again). */
  maxTokens: number;
  /** Where resets are recorded; rotate refuses families started at or before one. */
  resets: MemoryRevocationStore;
}

export class MemoryRefreshTokenStore implements RefreshTokenStore {
  readonly #tokens: LRUCache<string, TokenEntry>;
  readonly #families: LRUCache<string, FamilyEntry>;
  readonly #resets: MemoryRevocationStore;

  constructor({ clock, maxTokens, resets }: MemoryTokenStoreOptions) {
    // ttlResolution 0: read the injected clock on every check, not a copy up to 1 ms old.
    const perf = { now: () => clock.now() };
    this.#tokens = new LRUCache({ ...entryBound(maxTokens), ttl: 1, perf, ttlResolution: 0, ttlAutopurge: false });
    this.#families = new LRUCache({ ...entryBound(maxTokens), ttl: 1, perf, ttlResolution: 0, ttlAutopurge: false });
    this.#resets = resets;
  }

  async createFamily({ familyId, accountId, keyId, familyExpiresAt, token, scopes, dpopThumbprint }: NewFamily, now: number): Promise<void> {
    const entry: FamilyEntry = { createdAt: now, expiresAt: familyExpiresAt, revoked: false, currentTokenId: token.tokenId, grant: grantText(scopes) };
    if (dpopThumbprint !== undefined) entry.dpopThumbprint = dpopThumbprint;
    this.#families.set(familyId, entry, { ttl: ttlUntil(familyExpiresAt, now) });
    const expiresAt = Math.min(token.expiresAt, familyExpiresAt);
    this.#tokens.set(token.tokenId, { familyId, accountId, keyId, secretHash: token.secretHash, expiresAt }, { ttl: ttlUntil(expiresAt, now) });
  }

  async rotate(req: RotateRequest): Promise<RotateResult> {
    const token = this.#tokens.get(req.tokenId);
    if (token === undefined || token.secretHash !== req.secretHash || token.familyId !== req.familyId
      || token.accountId !== req.accountId || token.keyId !== req.keyId) {
      return { outcome: 'invalid' };
    }
    const family = this.#families.get(token.familyId);
    if (family === undefined || family.revoked || family.expiresAt <= req.now) return { outcome: 'invalid' };
    if (family.grant !== grantText(req.scopes)) return { outcome: 'invalid' };
    if (family.createdAt <= latestReset(this.#resets.readNow(token.accountId), token.keyId)) return { outcome: 'invalid' };
    if (family.dpopThumbprint !== undefined && family.dpopThumbprint !== req.dpopThumbprint) return { outcome: 'dpop_mismatch' };

    if (token.rotatedAt === undefined) {
      if (token.expiresAt <= req.now) return { outcome: 'invalid' };
      const expiresAt = Math.min(req.successor.expiresAt, family.expiresAt);
      this.#tokens.set(req.successor.tokenId, {
        familyId: token.familyId, accountId: token.accountId, keyId: token.keyId,
        secretHash: req.successor.secretHash, expiresAt,
      }, { ttl: ttlUntil(expiresAt, req.now) });
      token.rotatedAt = req.now;
      token.successorId = req.successor.tokenId;
      family.currentTokenId = req.successor.tokenId;
      family.sealedPair = req.sealedPair;
      if (family.dpopThumbprint === undefined && req.dpopThumbprint !== undefined) family.dpopThumbprint = req.dpopThumbprint;
      // The consumed entry stays until its family ends, so a late replay is still recognised.
      this.#tokens.set(req.tokenId, token, { ttl: ttlUntil(family.expiresAt, req.now) });
      return { outcome: 'rotated' };
    }

    if (req.now - token.rotatedAt < req.graceMs && family.currentTokenId === token.successorId && family.sealedPair !== undefined) {
      return { outcome: 'replayed', sealedPair: family.sealedPair };
    }
    family.revoked = true;
    return { outcome: 'reused', familyId: token.familyId };
  }

  async revokeFamily(presented: PresentedToken): Promise<boolean> {
    const token = this.#presented(presented);
    const family = token === undefined ? undefined : this.#families.get(token.familyId);
    if (family === undefined || family.revoked) return false;
    family.revoked = true;
    return true;
  }

  async inspect(presented: PresentedToken, now: number): Promise<RefreshTokenStatus | undefined> {
    const token = this.#presented(presented);
    if (token === undefined) return undefined;
    const family = this.#families.get(token.familyId);
    const active = family !== undefined && !family.revoked && family.expiresAt > now && token.rotatedAt === undefined && token.expiresAt > now
      && family.createdAt > latestReset(this.#resets.readNow(token.accountId), token.keyId);
    return { active, expiresAt: token.expiresAt };
  }

  /** The stored token when the presented one names it exactly and its secret matches. */
  #presented(req: PresentedToken): TokenEntry | undefined {
    const token = this.#tokens.get(req.tokenId);
    if (token === undefined || token.secretHash !== req.secretHash || token.familyId !== req.familyId
      || token.accountId !== req.accountId || token.keyId !== req.keyId) return undefined;
    return token;
  }
}

/** lru-cache reads a ttl of 0 as "never expires"; an entry already due gets the shortest one. */
function ttlUntil(at: number, now: number): number {
  return Math.max(1, at - now);
}
