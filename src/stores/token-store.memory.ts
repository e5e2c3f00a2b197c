/**
 * Refresh-token store in process memory, for a gateway that runs alone. JavaScript runs one
 * turn at a time and rotate() does not await between reading and writing, so each call is
 * atomic as the contract requires. Entries are bounded by count (lru-cache `max`) and leave
 * when their own expiry passes, measured on the injected clock.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../util/clock.js';
import type { NewFamily, RefreshTokenStore, RotateRequest, RotateResult } from './token-store.js';

interface TokenEntry {
  familyId: string;
  accountId: string;
  keyId: string;
  secretHash: string;
  expiresAt: number;
  /** Set once consumed. */
  rotatedAt?: number;
  successorId?: string;
  sealedPair?: string;
}

interface FamilyEntry {
  expiresAt: number;
  revoked: boolean;
}

export interface MemoryTokenStoreOptions {
  clock: Clock;
  /** Most tokens kept; past it the least recently used go first (their holders sign in again). */
  maxTokens: number;
}

export class MemoryRefreshTokenStore implements RefreshTokenStore {
  readonly #tokens: LRUCache<string, TokenEntry>;
  readonly #families: LRUCache<string, FamilyEntry>;

  constructor({ clock, maxTokens }: MemoryTokenStoreOptions) {
    const perf = { now: () => clock.now() };
    this.#tokens = new LRUCache({ max: maxTokens, ttl: 1, perf, ttlAutopurge: false });
    this.#families = new LRUCache({ max: maxTokens, ttl: 1, perf, ttlAutopurge: false });
  }

  async createFamily({ familyId, accountId, keyId, familyExpiresAt, token }: NewFamily, now: number): Promise<void> {
    this.#families.set(familyId, { expiresAt: familyExpiresAt, revoked: false }, { ttl: ttlUntil(familyExpiresAt, now) });
    const expiresAt = Math.min(token.expiresAt, familyExpiresAt);
    this.#tokens.set(token.tokenId, { familyId, accountId, keyId, secretHash: token.secretHash, expiresAt }, { ttl: ttlUntil(expiresAt, now) });
  }

  async rotate(req: RotateRequest): Promise<RotateResult> {
    const token = this.#tokens.get(req.tokenId);
    if (token === undefined || token.secretHash !== req.secretHash || token.accountId !== req.accountId || token.keyId !== req.keyId) {
      return { outcome: 'invalid' };
    }
    const family = this.#families.get(token.familyId);
    if (family === undefined || family.revoked || family.expiresAt <= req.now) return { outcome: 'invalid' };

    if (token.rotatedAt === undefined) {
      if (token.expiresAt <= req.now) return { outcome: 'invalid' };
      const expiresAt = Math.min(req.successor.expiresAt, family.expiresAt);
      this.#tokens.set(req.successor.tokenId, {
        familyId: token.familyId, accountId: token.accountId, keyId: token.keyId,
        secretHash: req.successor.secretHash, expiresAt,
      }, { ttl: ttlUntil(expiresAt, req.now) });
      token.rotatedAt = req.now;
      token.successorId = req.successor.tokenId;
      token.sealedPair = req.sealedPair;
      // The consumed entry stays until its family ends, so a late replay is still recognised.
      this.#tokens.set(req.tokenId, token, { ttl: ttlUntil(family.expiresAt, req.now) });
      return { outcome: 'rotated' };
    }

    const successor = token.successorId === undefined ? undefined : this.#tokens.get(token.successorId);
    if (req.now - token.rotatedAt < req.graceMs && successor !== undefined && successor.rotatedAt === undefined && token.sealedPair !== undefined) {
      return { outcome: 'replayed', sealedPair: token.sealedPair };
    }
    family.revoked = true;
    return { outcome: 'reused', familyId: token.familyId };
  }

  async revokeFamily(familyId: string): Promise<void> {
    const family = this.#families.get(familyId);
    if (family !== undefined) family.revoked = true;
  }
}

/** lru-cache reads a ttl of 0 as "never expires"; an entry already due gets the shortest one. */
function ttlUntil(at: number, now: number): number {
  return Math.max(1, at - now);
}
