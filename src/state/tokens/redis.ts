/**
 * Refresh-token store in Redis, shared by every gateway instance: each method is one Lua
 * script (state/redis/scripts.ts), so one round trip, and atomic across instances.
 */
import type { RedisConnection } from '../redis/client.js';
import type { NewFamily, RefreshTokenStore, RotateRequest, RotateResult } from './store.js';

export class RedisRefreshTokenStore implements RefreshTokenStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async createFamily({ familyId, accountId, keyId, familyExpiresAt, token, dpopThumbprint }: NewFamily, now: number): Promise<void> {
    const k = this.#redis.keys;
    await this.#redis.run((c) => c.gwCreateFamily(
      k.family(accountId, familyId), k.token(accountId, token.tokenId),
      familyId, keyId, now, familyExpiresAt, token.tokenId, token.secretHash, token.expiresAt, dpopThumbprint ?? '',
    ));
  }

  async rotate(req: RotateRequest): Promise<RotateResult> {
    const k = this.#redis.keys;
    const [outcome, sealedPair] = await this.#redis.run((c) => c.gwRotate(
      k.token(req.accountId, req.tokenId), k.family(req.accountId, req.familyId),
      k.token(req.accountId, req.successor.tokenId), k.resets(req.accountId),
      req.familyId, req.keyId, req.secretHash, req.now, req.graceMs,
      req.successor.tokenId, req.successor.secretHash, req.successor.expiresAt, req.sealedPair, req.dpopThumbprint ?? '',
    ));
    switch (outcome) {
      case 'rotated': return { outcome };
      case 'replayed': return { outcome, sealedPair: sealedPair! };
      case 'reused': return { outcome, familyId: req.familyId };
      case 'dpop_mismatch': return { outcome };
      default: return { outcome: 'invalid' };
    }
  }
}
