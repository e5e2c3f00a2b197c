/**
 * Delivery logs in this process's memory: the embedded default's and the tests'. Bounded:
 * DELIVERY_LOG_LENGTH attempts per endpoint, and endpoints are bounded per account; a deleted
 * endpoint's log goes with it.
 */
import { DELIVERY_LOG_LENGTH, type AttemptRecord, type WebhookLogStore } from './store.js';

export class MemoryWebhookLog implements WebhookLogStore {
  readonly #logs = new Map<string, AttemptRecord[]>();

  async record(endpointId: string, attempt: AttemptRecord): Promise<void> {
    const log = this.#logs.get(endpointId) ?? [];
    log.unshift(structuredClone(attempt));
    log.length = Math.min(log.length, DELIVERY_LOG_LENGTH);
    this.#logs.set(endpointId, log);
  }

  async list(endpointId: string): Promise<AttemptRecord[]> {
    return structuredClone(this.#logs.get(endpointId) ?? []);
  }

  async forget(endpointId: string): Promise<void> {
    this.#logs.delete(endpointId);
  }
}
