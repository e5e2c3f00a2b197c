/**
 * Proofs seen, in Redis, shared by every instance: one `SET NX PX` per proof, atomic in Redis,
 * so a proof replayed at another instance is refused there too.
 */
import type { RedisConnection } from '../redis/client.js';
import type { DpopProofStore } from './store.js';

export class RedisDpopProofStore implements DpopProofStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async remember(id: string, expiresAt: number, now: number): Promise<boolean> {
    const set = await this.#redis.run((c) => c.set(this.#redis.keys.dpopProof(id), '1', 'PX', Math.max(1, expiresAt - now), 'NX'));
    return set === 'OK';
  }
}
