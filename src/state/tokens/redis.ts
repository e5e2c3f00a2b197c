/**
 * Refresh-token store in Redis, shared by every gateway instance: each method is one Lua
 * script (state/redis/scripts.ts), so one round trip, and atomic across instances.
 */
import type { RedisConnection } from '../redis/client.js';
import { grantText, type NewFamily, type PresentedToken, type RefreshTokenStatus, type RefreshTokenStore, type RotateRequest, type RotateResult } from './store.js';

export class RedisRefreshTokenStore implements RefreshTokenStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async createFamily({ familyId, accountId, keyId, familyExpiresAt, token, scopes, dpopThumbprint }: NewFamily, now: number): Promise<void> {
    const k = this.#redis.keys;
    await this.#redis.run((c) => c.gwCreateFamily(
      k.family(accountId, familyId), k.token(accountId, token.tokenId),
      familyId, keyId, now, familyExpiresAt, token.tokenId, token.secretHash, token.expiresAt, grantText(scopes), dpopThumbprint ?? '',
    ));
  }

  async rotate(req: RotateRequest): Promise<RotateResult> {
    const k = this.#redis.keys;
    const [outcome, sealedPair] = await this.#redis.run((c) => c.gwRotate(
      k.token(req.accountId, req.tokenId), k.family(req.accountId, req.familyId),
      k.token(req.accountId, req.successor.tokenId), k.resets(req.accountId),
      req.familyId, req.keyId, req.secretHash, req.now, req.graceMs,
      req.successor.tokenId, req.successor.secretHash, req.successor.expiresAt, req.sealedPair, grantText(req.scopes), req.dpopThumbprint ?? '',
    ));
    switch (outcome) {
      case 'rotated': return { outcome };
      case 'replayed': return { outcome, sealedPair: sealedPair! };
      case 'reused': return { outcome, familyId: req.familyId };
      case 'dpop_mismatch': return { outcome };
      default: return { outcome: 'invalid' };
    }
  }

  async revokeFamily(token: PresentedToken): Promise<boolean> {
    const k = this.#redis.keys;
    const revoked = await this.#redis.run((c) => c.gwRevokeFamily(
      k.token(token.accountId, token.tokenId), k.family(token.accountId, token.familyId),
      token.familyId, token.keyId, token.secretHash,
    ));
    return revoked === 1;
  }

  async inspect(token: PresentedToken, now: number): Promise<RefreshTokenStatus | undefined> {
    const k = this.#redis.keys;
    const found = await this.#redis.run((c) => c.gwInspectToken(
      k.token(token.accountId, token.tokenId), k.family(token.accountId, token.familyId), k.resets(token.accountId),
      token.familyId, token.keyId, token.secretHash,
    ));
    if (found.length === 0) return undefined;
    const [expiresAt, consumed, familyExpiresAt, createdAt, revoked, reset] = found.map((v) => (v === null ? Number.NaN : Number(v)));
    // A family gone (expired, or lost) reads as NaN: every comparison with it is false.
    const active = consumed === 0 && revoked === 0 && expiresAt! > now && familyExpiresAt! > now && createdAt! > reset!;
    return { active, expiresAt: expiresAt! };
  }
}
