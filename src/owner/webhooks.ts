/**
 * The owner API's webhook endpoints: createWebhook, listWebhooks, getWebhook, updateWebhook,
 * deleteWebhook, listWebhookDeliveries, sendTestWebhook, rollWebhookSecret. An endpoint lives in
 * its account (state/owners/records.ts), so it is written with its audit event in one store
 * change, on the data file as on Redis, and reached only by the account's members. Its URL is
 * checked by the address rules (owner/webhook-address.ts) at every write and again at every
 * delivery; its signing secret is made here, answered only by create and roll, and sealed at
 * rest under `owner.secondFactorKey` when that is set (owner/secret-box.ts).
 *
 * What a change raises is delivered by the queue and the sender (owner/webhook-notices.ts,
 * owner/webhook-sender.ts); a test send goes out at once, outside the queue, and is logged like
 * any attempt.
 */
import { randomBytes } from 'node:crypto';
import { Conflict, InvalidRequest, NotFound, TooManyRequests } from '../errors/errors.js';
import { WEBHOOK_ENDPOINTS_MAX, type WebhookEndpointRecord } from '../state/owners/records.js';
import type { AccountDoc, OwnerStore } from '../state/owners/store.js';
import type { AttemptRecord, WebhookLogStore } from '../state/webhooks/store.js';
import type { Clock } from '../util/clock.js';
import { loadAccount } from './access.js';
import type { OwnerDeps } from './deps.js';
import { createChangePipeline, editAccount } from './pipeline.js';
import { createSecretBox, type SecretBox } from './secret-box.js';
import type { Actor, Caller } from './types.js';
import { checkWebhookUrl, type WebhookNetworkPolicy } from './webhook-address.js';
import type { Attempt } from './webhook-delivery.js';
import { TEST_EVENT_TYPE, WEBHOOK_EVENT_TYPES } from './webhook-events.js';
import { newDeliveryId } from './webhook-notices.js';
import type { EndpointTarget, WebhookSender } from './webhook-sender.js';
import { newWebhookSecret } from './webhook-signing.js';

/** A test send per endpoint at most this often, per instance: each one is a request to the owner's URL. */
const TEST_SEND_INTERVAL_MS = 5_000;

export type WebhookView = Omit<WebhookEndpointRecord, 'secret' | 'previousSecret'>;

export interface WebhookInput {
  url?: string;
  description?: string;
  events?: readonly string[];
  enabled?: boolean;
}

export interface WebhookService {
  list(caller: Caller, accountId: string): Promise<{ items: WebhookView[] }>;
  get(caller: Caller, accountId: string, webhookId: string): Promise<WebhookView>;
  create(actor: Actor, accountId: string, input: WebhookInput): Promise<{ webhook: WebhookView; secret: string }>;
  update(actor: Actor, accountId: string, webhookId: string, input: WebhookInput): Promise<WebhookView>;
  remove(actor: Actor, accountId: string, webhookId: string): Promise<{ id: string; deleted: true }>;
  deliveries(caller: Caller, accountId: string, webhookId: string): Promise<{ items: AttemptRecord[] }>;
  sendTest(actor: Actor, accountId: string, webhookId: string): Promise<Omit<Attempt, 'body'> & { deliveryId: string }>;
  /** `overlapSeconds`: how long the replaced secret goes on signing beside the new one (0: not at all). */
  rollSecret(actor: Actor, accountId: string, webhookId: string, input?: { overlapSeconds?: number }): Promise<{ webhook: WebhookView; secret: string }>;
}

/** What the webhook parts need besides the owner service's own (services.ts builds them). */
export interface WebhookDeps {
  policy: WebhookNetworkPolicy;
  logs: WebhookLogStore;
  sender: Pick<WebhookSender, 'sendNow'>;
}

export const WEBHOOK_ID_PREFIX = 'whe_';

/** The sealed secret's associated data: a secret copied to another endpoint does not open. */
const sealedFor = (webhookId: string) => `webhook:${webhookId}`;

export function webhookSecretBox(config: OwnerDeps['config']): SecretBox {
  return createSecretBox(config.owner.secondFactorKey);
}

/**
 * Where the sender finds an endpoint at each attempt: its account as stored now (a disabled,
 * deleted or rolled endpoint takes effect on the next attempt), its secret opened. Undefined
 * when the account or the endpoint is gone, or the secret does not open (another key).
 */
export function webhookTargets(store: OwnerStore, box: SecretBox, clock: Clock): (accountId: string, webhookId: string) => Promise<EndpointTarget | undefined> {
  return async (accountId, webhookId) => {
    const account = await store.readAccount(accountId);
    if (account === undefined || account.deletedAt !== undefined || !account.enabled) return undefined;
    const endpoint = account.webhooks.find((w) => w.id === webhookId);
    const secret = endpoint === undefined ? undefined : box.open(endpoint.secret, sealedFor(endpoint.id));
    if (endpoint === undefined || secret === undefined) return undefined;
    const { previousSecret, previousValidUntil } = endpoint;
    const overlapping = previousSecret !== undefined && previousValidUntil !== undefined && Date.parse(previousValidUntil) > clock.now();
    return { url: endpoint.url, secret, enabled: endpoint.enabled, ...(overlapping ? { previousSecret: box.open(previousSecret, sealedFor(endpoint.id)) } : {}) };
  };
}

function view({ secret: _secret, previousSecret: _previous, ...rest }: WebhookEndpointRecord): WebhookView {
  return rest;
}

function findWebhook(doc: AccountDoc, webhookId: string): WebhookEndpointRecord {
  const endpoint = doc.webhooks.find((w) => w.id === webhookId);
  if (endpoint === undefined) throw new NotFound('No webhook endpoint with this id in this account.');
  return endpoint;
}

/** The input as it may be stored: the URL by the address rules, event types from the known list. */
function checked(input: WebhookInput, policy: WebhookNetworkPolicy): WebhookInput {
  if (input.url !== undefined) {
    const refused = checkWebhookUrl(input.url, policy);
    if (refused !== undefined) throw new InvalidRequest(refused, { field: 'url' });
  }
  const unknown = (input.events ?? []).filter((e) => !WEBHOOK_EVENT_TYPES.includes(e));
  if (unknown.length > 0) throw new InvalidRequest(`unknown event types: ${unknown.slice(0, 5).join(', ')} (known: ${WEBHOOK_EVENT_TYPES.join(', ')})`, { field: 'events' });
  return input.events === undefined ? input : { ...input, events: [...new Set(input.events)] };
}

/** Test sends per endpoint in this process: bounded, since endpoints are bounded per account and old entries are swept. */
function createTestThrottle(clock: Clock) {
  const last = new Map<string, number>();
  return (webhookId: string) => {
    const now = clock.now();
    for (const [id, at] of last) if (at <= now - TEST_SEND_INTERVAL_MS) last.delete(id);
    const previous = last.get(webhookId);
    if (previous !== undefined) throw new TooManyRequests(Math.max(1, Math.ceil((previous + TEST_SEND_INTERVAL_MS - now) / 1000)), {});
    last.set(webhookId, now);
  };
}

export function createWebhookService(deps: OwnerDeps, { policy, logs, sender }: WebhookDeps): WebhookService {
  const { store, clock, config } = deps;
  const change = createChangePipeline(deps);
  const box = webhookSecretBox(config);
  const targetOf = webhookTargets(store, box, clock);
  const throttle = createTestThrottle(clock);
  const iso = (now: number) => new Date(now).toISOString();
  const load = (caller: Caller, accountId: string) => loadAccount(store, caller, accountId);

  /** A new secret for the endpoint: answered once, stored sealed. */
  function secretFor(webhookId: string): { secret: string; stored: string } {
    const secret = newWebhookSecret();
    return { secret, stored: box.seal(secret, sealedFor(webhookId)) };
  }

  return {
    list: async (caller, accountId) => ({ items: (await load(caller, accountId)).webhooks.map(view) }),
    get: async (caller, accountId, webhookId) => view(findWebhook(await load(caller, accountId), webhookId)),
    deliveries: async (caller, accountId, webhookId) => {
      findWebhook(await load(caller, accountId), webhookId);
      return { items: await logs.list(webhookId) };
    },

    create: (actor, accountId, input) => change(actor, {
      load: () => load(actor.caller, accountId),
      async persist({ now, event }) {
        const { url, description = '', events = [], enabled = true } = checked(input, policy);
        if (url === undefined) throw new InvalidRequest('url is required', { field: 'url' });
        const id = `${WEBHOOK_ID_PREFIX}${randomBytes(12).toString('base64url')}`;
        const { secret, stored } = secretFor(id);
        const record: WebhookEndpointRecord = { id, url, description, events: [...events], enabled, secret: stored, createdAt: iso(now), updatedAt: iso(now) };
        const events_ = [event({ action: 'webhook.create', target: { type: 'webhook', id }, changes: { url: [undefined, url], events: [undefined, record.events], enabled: [undefined, enabled] } })];
        const saved = await editAccount(store, actor.caller, accountId, (doc) => {
          if (doc.webhooks.length >= WEBHOOK_ENDPOINTS_MAX) throw new Conflict(`An account has at most ${WEBHOOK_ENDPOINTS_MAX} webhook endpoints.`);
          return { doc: { ...doc, webhooks: [...doc.webhooks, record] }, events: events_, result: undefined };
        });
        return { ...saved, result: { webhook: view(record), secret } };
      },
    }),

    update: (actor, accountId, webhookId, input) => change(actor, {
      load: () => load(actor.caller, accountId),
      persist: ({ now, event }) => {
        const { url, description, events, enabled } = checked(input, policy);
        return editAccount(store, actor.caller, accountId, (doc) => {
          const current = findWebhook(doc, webhookId);
          const next: WebhookEndpointRecord = { ...current, url: url ?? current.url, description: description ?? current.description, events: events === undefined ? current.events : [...events], enabled: enabled ?? current.enabled, updatedAt: iso(now) };
          const changes = { url: [current.url, next.url], description: [current.description, next.description], events: [current.events, next.events], enabled: [current.enabled, next.enabled] } as Record<string, [unknown, unknown]>;
          return { doc: { ...doc, webhooks: doc.webhooks.map((w) => (w.id === webhookId ? next : w)) }, events: [event({ action: 'webhook.update', target: { type: 'webhook', id: webhookId }, changes })], result: view(next) };
        });
      },
    }),

    remove: (actor, accountId, webhookId) => change(actor, {
      load: () => load(actor.caller, accountId),
      persist: ({ event }) => editAccount(store, actor.caller, accountId, (doc) => {
        const gone = findWebhook(doc, webhookId);
        return { doc: { ...doc, webhooks: doc.webhooks.filter((w) => w.id !== webhookId) }, events: [event({ action: 'webhook.delete', target: { type: 'webhook', id: webhookId }, changes: { url: [gone.url, undefined] } })], result: { id: webhookId, deleted: true as const } };
      }),
      async notify(result) {
        // Its queued deliveries are dropped by the sender (the endpoint is gone); its log goes now.
        await logs.forget(webhookId);
        return result;
      },
    }),

    rollSecret: (actor, accountId, webhookId, { overlapSeconds = 0 } = {}) => change(actor, {
      load: () => load(actor.caller, accountId),
      persist: ({ now, event }) => {
        const { secret, stored } = secretFor(webhookId);
        return editAccount(store, actor.caller, accountId, (doc) => {
          const { previousSecret: _previous, previousValidUntil: _until, ...current } = findWebhook(doc, webhookId);
          // The secret replaced goes on signing for the overlap, as an API key's goes on signing in.
          const overlap = overlapSeconds > 0 ? { previousSecret: current.secret, previousValidUntil: iso(now + overlapSeconds * 1000) } : {};
          const next: WebhookEndpointRecord = { ...current, ...overlap, secret: stored, updatedAt: iso(now) };
          const events = [event({ action: 'webhook.roll_secret', target: { type: 'webhook', id: webhookId }, changes: { previousValidUntil: [undefined, next.previousValidUntil] } })];
          return { doc: { ...doc, webhooks: doc.webhooks.map((w) => (w.id === webhookId ? next : w)) }, events, result: { webhook: view(next), secret } };
        });
      },
    }),

    async sendTest(actor, accountId, webhookId) {
      findWebhook(await load(actor.caller, accountId), webhookId);
      throttle(webhookId);
      const deliveryId = newDeliveryId();
      const target = await targetOf(accountId, webhookId);
      // Sealed under another owner.secondFactorKey: nothing can be signed, as the sender finds too.
      if (target === undefined) return { deliveryId, ok: false, durationMs: 0, error: 'the signing secret does not open with this gateway\'s owner.secondFactorKey: roll it' };
      const body = JSON.stringify({ type: TEST_EVENT_TYPE, timestamp: iso(clock.now()), data: { accountId, webhookId } });
      // A test send goes even to a disabled endpoint: checking one before enabling it is its point.
      const { body: _answer, ...attempt } = await sender.sendNow({ id: deliveryId, accountId, endpointId: webhookId, type: TEST_EVENT_TYPE, body, createdAt: clock.now() }, { ...target, enabled: true });
      return { deliveryId, ...attempt };
    },
  };
}
