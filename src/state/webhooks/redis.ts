/**
 * Delivery logs in Redis, shared by every instance: one list per endpoint, newest first,
 * written by one script (WEBHOOK_LOG_RECORD: push, trim to DELIVERY_LOG_LENGTH, TTL from now),
 * read with one LRANGE. Entries that do not parse (written by hand) are left out of a read.
 */
import type { RedisConnection } from '../redis/client.js';
import { attemptRecordSchema, DELIVERY_LOG_LENGTH, DELIVERY_LOG_RETENTION_MS, type AttemptRecord, type WebhookLogStore } from './store.js';

export class RedisWebhookLog implements WebhookLogStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async record(endpointId: string, attempt: AttemptRecord): Promise<void> {
    const json = JSON.stringify(attemptRecordSchema.parse(attempt));
    await this.#redis.run((c) => c.gwWebhookLogRecord(this.#redis.keys.webhookLog(endpointId), json, DELIVERY_LOG_LENGTH, DELIVERY_LOG_RETENTION_MS));
  }

  async list(endpointId: string): Promise<AttemptRecord[]> {
    const entries = await this.#redis.run((c) => c.lrange(this.#redis.keys.webhookLog(endpointId), 0, DELIVERY_LOG_LENGTH - 1));
    return entries.flatMap((json) => {
      try {
        const parsed = attemptRecordSchema.safeParse(JSON.parse(json));
        return parsed.success ? [parsed.data] : [];
      } catch {
        return [];
      }
    });
  }

  async forget(endpointId: string): Promise<void> {
    await this.#redis.run((c) => c.del(this.#redis.keys.webhookLog(endpointId)));
  }
}
