/**
 * The webhook endpoints' service, as the owner operations (createWebhook, listWebhooks,
 * getWebhook, updateWebhook, deleteWebhook, listWebhookDeliveries, sendTestWebhook,
 * rollWebhookSecret) are to call it: input checked (the URL by the address rules,
 * owner/webhook-address.ts; event types from WEBHOOK_EVENT_TYPES), the secret made here and
 * answered only by create and roll. Access checks and auditing belong to the owner pipeline
 * the operations run in (not wired yet).
 */
import { randomBytes } from 'node:crypto';
import { Conflict, InvalidRequest, NotFound } from '../errors/errors.js';
import type { AttemptRecordDoc, EndpointView, WebhookEndpoint, WebhookEndpointStore } from '../state/webhooks/endpoints.js';
import type { Clock } from '../util/clock.js';
import { checkWebhookUrl, type WebhookNetworkPolicy } from './webhook-address.js';
import type { Attempt } from './webhook-delivery.js';
import { TEST_EVENT_TYPE, WEBHOOK_EVENT_TYPES } from './webhook-events.js';
import { newDeliveryId } from './webhook-notices.js';
import type { WebhookSender } from './webhook-sender.js';
import { newWebhookSecret } from './webhook-signing.js';

export interface EndpointInput {
  url?: string;
  description?: string;
  events?: readonly string[];
  enabled?: boolean;
}

export interface WebhookService {
  create(accountId: string, input: EndpointInput): Promise<EndpointView & { secret: string }>;
  list(accountId: string): Promise<EndpointView[]>;
  get(accountId: string, id: string): Promise<EndpointView>;
  update(accountId: string, id: string, input: EndpointInput): Promise<EndpointView>;
  remove(accountId: string, id: string): Promise<void>;
  deliveries(accountId: string, id: string): Promise<AttemptRecordDoc[]>;
  sendTest(accountId: string, id: string): Promise<Attempt>;
  rollSecret(accountId: string, id: string): Promise<EndpointView & { secret: string }>;
}

export interface WebhookServiceDeps {
  store: WebhookEndpointStore;
  policy: WebhookNetworkPolicy;
  clock: Clock;
  sender: Pick<WebhookSender, 'sendNow'>;
}

function checked(input: EndpointInput, policy: WebhookNetworkPolicy): EndpointInput {
  if (input.url !== undefined) {
    if (typeof input.url !== 'string' || input.url.length > 2048) throw new InvalidRequest('url must be a URL of at most 2048 characters', { field: 'url' });
    const refused = checkWebhookUrl(input.url, policy);
    if (refused !== undefined) throw new InvalidRequest(refused, { field: 'url' });
  }
  const unknown = (input.events ?? []).filter((e) => !WEBHOOK_EVENT_TYPES.includes(e));
  if (unknown.length > 0) throw new InvalidRequest(`unknown event types: ${unknown.slice(0, 5).join(', ')}`, { field: 'events' });
  return input;
}

function view({ secret: _secret, ...rest }: WebhookEndpoint): EndpointView {
  return rest;
}

export function createWebhookService({ store, policy, clock, sender }: WebhookServiceDeps): WebhookService {
  async function found(accountId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = await store.find(accountId, id);
    if (endpoint === undefined) throw new NotFound('No webhook endpoint with this id in this account.');
    return endpoint;
  }
  const at = () => new Date(clock.now()).toISOString();

  return {
    async create(accountId, input) {
      const { url, description = '', events = [], enabled = true } = checked(input, policy);
      if (url === undefined) throw new InvalidRequest('url is required', { field: 'url' });
      const now = at();
      const endpoint: WebhookEndpoint = { id: `whe_${randomBytes(9).toString('base64url')}`, url, description, events: [...new Set(events)], enabled, secret: newWebhookSecret(), createdAt: now, updatedAt: now };
      if (!(await store.add(accountId, endpoint))) throw new Conflict('This account has as many webhook endpoints as it may have.');
      return { ...view(endpoint), secret: endpoint.secret };
    },
    list: (accountId) => store.list(accountId),
    get: async (accountId, id) => view(await found(accountId, id)),
    async update(accountId, id, input) {
      const { url, description, events, enabled } = checked(input, policy);
      const endpoint = await found(accountId, id);
      const next: WebhookEndpoint = { ...endpoint, url: url ?? endpoint.url, description: description ?? endpoint.description, events: events === undefined ? endpoint.events : [...new Set(events)], enabled: enabled ?? endpoint.enabled, updatedAt: at() };
      if (!(await store.update(accountId, next))) throw new NotFound('No webhook endpoint with this id in this account.');
      return view(next);
    },
    async remove(accountId, id) {
      if (!(await store.remove(accountId, id))) throw new NotFound('No webhook endpoint with this id in this account.');
    },
    async deliveries(accountId, id) {
      await found(accountId, id);
      return store.log(accountId, id);
    },
    async sendTest(accountId, id) {
      const endpoint = await found(accountId, id);
      const body = JSON.stringify({ type: TEST_EVENT_TYPE, timestamp: at(), data: { accountId, endpointId: id } });
      return sender.sendNow({ id: newDeliveryId(), accountId, endpointId: id, type: TEST_EVENT_TYPE, body, createdAt: clock.now() }, endpoint);
    },
    async rollSecret(accountId, id) {
      const endpoint = await found(accountId, id);
      const next = { ...endpoint, secret: newWebhookSecret(), updatedAt: at() };
      if (!(await store.update(accountId, next))) throw new NotFound('No webhook endpoint with this id in this account.');
      return { ...view(next), secret: next.secret };
    },
  };
}
