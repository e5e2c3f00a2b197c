/**
 * The owner pipeline's webhook listener (owner/pipeline.ts ChangeListener, beside the mail
 * notices): each audited event with a webhook type (owner/webhook-events.ts) is queued once per
 * enabled endpoint of its account that asks for that type, and the sender is woken. A full
 * queue drops the event (logged, counted): the change itself is made either way.
 */
import { randomBytes } from 'node:crypto';
import type { WebhookDelivery, WebhookQueue } from '../state/webhooks/queue.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import type { WebhookLogStore } from '../state/webhooks/store.js';
import type { ChangeListener } from './pipeline.js';
import type { WebhookNetworkPolicy } from './webhook-address.js';
import { endpointWants, webhookEventOf } from './webhook-events.js';
import type { DeliveryResult, WebhookSender } from './webhook-sender.js';

/** What the listener needs of an account's endpoints. */
export interface EndpointChoice {
  id: string;
  enabled: boolean;
  /** Event types asked for; empty: all. */
  events: readonly string[];
}

export interface WebhookNoticeDeps {
  endpointsOf(accountId: string): Promise<readonly EndpointChoice[]>;
  queue: WebhookQueue;
  /** Deliveries the queue holds at most. */
  maxQueued: number;
  clock: Clock;
  log: Logger;
  wake(): void;
  count?(result: DeliveryResult): void;
}

/** What the owner service is given for webhooks (services.ts builds it): see owner/webhooks.ts. */
export interface WebhookParts {
  policy: WebhookNetworkPolicy;
  logs: WebhookLogStore;
  sender: Pick<WebhookSender, 'sendNow' | 'wake'>;
  queue: WebhookQueue;
  /** Deliveries the queue holds at most (`webhooks.maxQueued`). */
  maxQueued: number;
  count?(result: DeliveryResult): void;
}

/** A delivery's id: `msg_` and random characters, the `webhook-id` of its every attempt. */
export function newDeliveryId(): string {
  return `msg_${randomBytes(12).toString('base64url')}`;
}

export function createWebhookNotices({ endpointsOf, queue, maxQueued, clock, log, wake, count = () => {} }: WebhookNoticeDeps): ChangeListener {
  return async ({ audited }) => {
    const deliveries: WebhookDelivery[] = [];
    for (const { accountId, events } of audited) {
      const payloads = events.map((e) => webhookEventOf(accountId, e)).filter((p) => p !== undefined);
      if (payloads.length === 0) continue;
      const endpoints = (await endpointsOf(accountId)).filter((e) => e.enabled);
      for (const payload of payloads) {
        const body = JSON.stringify(payload);
        for (const endpoint of endpoints.filter((e) => endpointWants(e.events, payload.type))) {
          deliveries.push({ id: newDeliveryId(), accountId, endpointId: endpoint.id, type: payload.type, body, createdAt: clock.now() });
        }
      }
    }
    if (deliveries.length === 0) return;
    if (!(await queue.enqueue(deliveries, maxQueued))) {
      deliveries.forEach(() => count('dropped'));
      log.error({ deliveries: deliveries.map(({ id, endpointId, type }) => ({ id, endpointId, type })) }, 'webhook queue full: events dropped');
      return;
    }
    wake();
  };
}
