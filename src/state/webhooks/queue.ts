/**
 * The webhook deliveries owed: the mail outbox's durable queue (state/outbox/) holding
 * deliveries instead of mails, with its claims and leases, so a restart loses none and two
 * instances on one Redis deliver each once. Memory (tests), a file of its own without Redis,
 * Redis whenever Redis is configured.
 *
 * A delivery holds the event's body as sent (the same bytes on every attempt, signed afresh
 * each time) and names its endpoint; the endpoint's URL and secret are read when it is sent, so
 * a rolled secret or a disabled endpoint takes effect on the next attempt, and no secret waits
 * in the queue.
 */
import { openFileOutbox } from '../outbox/file.js';
import { MemoryOutbox } from '../outbox/memory.js';
import { RedisOutbox } from '../outbox/redis.js';
import type { Claimed, QueueStore } from '../outbox/store.js';
import type { RedisConnection } from '../redis/client.js';

export interface WebhookDelivery {
  /** "msg_" and random characters: the `webhook-id` of every attempt. */
  id: string;
  accountId: string;
  endpointId: string;
  /** The event type (a metric label, a log field). */
  type: string;
  /** The payload as JSON, exactly as sent. */
  body: string;
  /** Epoch ms. */
  createdAt: number;
}

export type WebhookQueue = QueueStore<WebhookDelivery>;
export type ClaimedDelivery = Claimed<WebhookDelivery>;

export function memoryWebhookQueue(): WebhookQueue {
  return new MemoryOutbox<WebhookDelivery>();
}

export function fileWebhookQueue(file: string): WebhookQueue {
  return openFileOutbox<WebhookDelivery>(file, 'webhooks.queueFile');
}

export function redisWebhookQueue(redis: RedisConnection): WebhookQueue {
  const k = redis.keys;
  return new RedisOutbox<WebhookDelivery>(redis, [k.webhookDeliveries, k.webhookDue, k.webhookClaims]);
}
