/**
 * Last sign-ins in Redis, shared by every instance: one hash per account (key id → epoch ms),
 * written by one script (KEY_USE_RECORD: the later time wins, and the TTL starts again), read
 * with one HGETALL.
 */
import { KEY_USE_RETENTION_MS, type KeyUseStore } from './store.js';
import type { RedisConnection } from '../redis/client.js';

export class RedisKeyUseStore implements KeyUseStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async record(accountId: string, keyId: string, at: number): Promise<void> {
    await this.#redis.run((c) => c.gwKeyUseRecord(this.#redis.keys.keyUse(accountId), keyId, at, KEY_USE_RETENTION_MS));
  }

  async read(accountId: string): Promise<Map<string, number>> {
    const fields = await this.#redis.run((c) => c.hgetall(this.#redis.keys.keyUse(accountId)));
    const found = new Map<string, number>();
    // Only whole epoch ms: anything else in the hash (written by hand) is not a time.
    for (const [keyId, text] of Object.entries(fields)) if (/^[0-9]{1,16}$/.test(text)) found.set(keyId, Number(text));
    return found;
  }
}
