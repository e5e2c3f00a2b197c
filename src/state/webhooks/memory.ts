/** Webhook endpoints in this process's memory: the tests' store, and the model for the others. */
import { DELIVERY_LOG_LENGTH, type AttemptRecordDoc, type EndpointView, MAX_ENDPOINTS, type WebhookEndpoint, type WebhookEndpointStore } from './endpoints.js';

export class MemoryWebhookEndpoints implements WebhookEndpointStore {
  readonly #accounts = new Map<string, Map<string, { endpoint: WebhookEndpoint; log: AttemptRecordDoc[] }>>();

  #of(accountId: string) {
    let endpoints = this.#accounts.get(accountId);
    if (endpoints === undefined) this.#accounts.set(accountId, (endpoints = new Map()));
    return endpoints;
  }

  async add(accountId: string, endpoint: WebhookEndpoint): Promise<boolean> {
    const endpoints = this.#of(accountId);
    if (endpoints.size >= MAX_ENDPOINTS || endpoints.has(endpoint.id)) return false;
    endpoints.set(endpoint.id, { endpoint: structuredClone(endpoint), log: [] });
    return true;
  }

  async list(accountId: string): Promise<EndpointView[]> {
    return [...(this.#accounts.get(accountId)?.values() ?? [])].map(({ endpoint: { secret: _secret, ...view } }) => structuredClone(view));
  }

  async find(accountId: string, id: string): Promise<WebhookEndpoint | undefined> {
    const held = this.#accounts.get(accountId)?.get(id);
    return held === undefined ? undefined : structuredClone(held.endpoint);
  }

  async update(accountId: string, endpoint: WebhookEndpoint): Promise<boolean> {
    const held = this.#accounts.get(accountId)?.get(endpoint.id);
    if (held === undefined) return false;
    held.endpoint = structuredClone(endpoint);
    return true;
  }

  async remove(accountId: string, id: string): Promise<boolean> {
    return this.#accounts.get(accountId)?.delete(id) ?? false;
  }

  async record(accountId: string, id: string, attempt: AttemptRecordDoc): Promise<void> {
    const held = this.#accounts.get(accountId)?.get(id);
    if (held === undefined) return;
    held.log.unshift(structuredClone(attempt));
    held.log.length = Math.min(held.log.length, DELIVERY_LOG_LENGTH);
  }

  async log(accountId: string, id: string): Promise<AttemptRecordDoc[]> {
    return structuredClone(this.#accounts.get(accountId)?.get(id)?.log ?? []);
  }
}
