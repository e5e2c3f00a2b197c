/**
 * The owner API's webhook endpoints: list, create (the signing secret in this answer only),
 * read, change, delete, the delivery log, a test send and a secret roll (src/owner/webhooks.ts
 * does the work; docs/webhooks.md says what is sent and how to verify it).
 */
import { z } from 'zod';
import { NotFound } from '../../../errors/errors.js';
import type { OwnerServices } from '../../../owner/service.js';
import { WEBHOOK_EVENT_TYPES } from '../../../owner/webhook-events.js';
import type { WebhookService } from '../../../owner/webhooks.js';
import { ID, isoTime } from '../../../state/owners/records.js';
import { operation, type Operation } from '../../owner/operation.js';
import { ROLL_OVERLAP_MAX_SECONDS } from './keys.js';
import { accountParams, actorOf, callerOf, safeText } from './schemas.js';

const webhookParams = z.strictObject({ accountId: ID, webhookId: ID });

const eventType = z.enum(WEBHOOK_EVENT_TYPES as [string, ...string[]]);

export const webhookView = z.strictObject({
  id: z.string(),
  url: z.string(),
  description: z.string(),
  events: z.array(z.string()).meta({ description: 'Event types sent to this endpoint; empty: all.' }),
  enabled: z.boolean(),
  previousValidUntil: isoTime.optional().meta({ description: 'After a roll with an overlap: until when the replaced secret signs each delivery too.' }),
  createdAt: isoTime,
  updatedAt: isoTime,
});

const withSecret = z.strictObject({
  webhook: webhookView,
  secret: z.string().regex(/^whsec_/).meta({ description: 'The signing secret (`whsec_…`, Standard Webhooks): in this answer only.' }),
});

const attemptView = z.strictObject({
  deliveryId: z.string(),
  type: z.string(),
  at: z.string(),
  attempt: z.number().int(),
  ok: z.boolean(),
  status: z.number().int().optional(),
  durationMs: z.number().int(),
  error: z.string().optional(),
});

const fields = {
  url: z.string().min(1).max(2048).meta({ description: 'https:// (http:// only with webhooks.allowHttp); a global address unless the operator allows more (docs/webhooks.md).' }),
  description: safeText(200),
  events: z.array(eventType).max(32),
  enabled: z.boolean(),
};

function webhooksOf(owner: OwnerServices): WebhookService {
  if (owner.webhooks === undefined) throw new NotFound('Webhooks are not available on this gateway.');
  return owner.webhooks;
}

export function webhookOperations(owner: OwnerServices): Operation[] {
  const tag = 'Webhooks';
  const path = '/owner/v1/accounts/{accountId}/webhooks';
  return [
    operation({
      operationId: 'listWebhooks', method: 'get', path, tag, auth: 'caller',
      summary: 'List the account\'s webhook endpoints (never their secrets).',
      params: accountParams, response: z.strictObject({ items: z.array(webhookView) }), errors: [404],
      handle: ({ params, caller }) => webhooksOf(owner).list(callerOf(caller), params.accountId),
    }),
    operation({
      operationId: 'createWebhook', method: 'post', path, tag, auth: 'caller',
      summary: 'Add a webhook endpoint for the account\'s owner events; its signing secret is in this answer only.',
      params: accountParams,
      body: z.strictObject({ url: fields.url, description: fields.description.optional(), events: fields.events.optional(), enabled: fields.enabled.optional() }),
      status: 201, response: withSecret, errors: [404, 409],
      handle: ({ params, body, caller, meta }) => webhooksOf(owner).create(actorOf({ caller, meta }), params.accountId, body),
    }),
    operation({
      operationId: 'getWebhook', method: 'get', path: `${path}/{webhookId}`, tag, auth: 'caller',
      summary: 'Read one webhook endpoint (never its secret).',
      params: webhookParams, response: webhookView, errors: [404],
      handle: ({ params, caller }) => webhooksOf(owner).get(callerOf(caller), params.accountId, params.webhookId),
    }),
    operation({
      operationId: 'updateWebhook', method: 'patch', path: `${path}/{webhookId}`, tag, auth: 'caller',
      summary: 'Change a webhook endpoint\'s URL, description, event types or whether it is enabled.',
      params: webhookParams,
      body: z.strictObject({ url: fields.url.optional(), description: fields.description.optional(), events: fields.events.optional(), enabled: fields.enabled.optional() }),
      response: webhookView, errors: [404, 409],
      handle: ({ params, body, caller, meta }) => webhooksOf(owner).update(actorOf({ caller, meta }), params.accountId, params.webhookId, body),
    }),
    operation({
      operationId: 'deleteWebhook', method: 'delete', path: `${path}/{webhookId}`, tag, auth: 'caller',
      summary: 'Delete a webhook endpoint: nothing more is sent to it, its queued deliveries are dropped.',
      params: webhookParams, response: z.strictObject({ id: z.string(), deleted: z.literal(true) }), errors: [404, 409],
      handle: ({ params, caller, meta }) => webhooksOf(owner).remove(actorOf({ caller, meta }), params.accountId, params.webhookId),
    }),
    operation({
      operationId: 'listWebhookDeliveries', method: 'get', path: `${path}/{webhookId}/deliveries`, tag, auth: 'caller',
      summary: 'The endpoint\'s delivery log: its newest 50 attempts, newest first, with status, duration and error.',
      params: webhookParams, response: z.strictObject({ items: z.array(attemptView) }), errors: [404],
      handle: ({ params, caller }) => webhooksOf(owner).deliveries(callerOf(caller), params.accountId, params.webhookId),
    }),
    operation({
      operationId: 'sendTestWebhook', method: 'post', path: `${path}/{webhookId}/test`, tag, auth: 'caller',
      summary: 'Send a signed `webhook.test` event to the endpoint now (also when disabled) and answer how it went; logged like any attempt. One per endpoint every 5 s.',
      params: webhookParams,
      response: z.strictObject({ deliveryId: z.string(), ok: z.boolean(), status: z.number().int().optional(), durationMs: z.number().int(), error: z.string().optional() }),
      errors: [404, 429],
      handle: ({ params, caller, meta }) => webhooksOf(owner).sendTest(actorOf({ caller, meta }), params.accountId, params.webhookId),
    }),
    operation({
      operationId: 'rollWebhookSecret', method: 'post', path: `${path}/{webhookId}/roll-secret`, tag, auth: 'caller',
      summary: 'Give a webhook endpoint a new signing secret (in this answer only); the next attempt is signed with it, and for overlapSeconds with the replaced one too.',
      params: webhookParams,
      body: z.strictObject({ overlapSeconds: z.number().int().min(0).max(ROLL_OVERLAP_MAX_SECONDS).optional() }).optional(),
      response: withSecret, errors: [404, 409],
      handle: ({ params, body, caller, meta }) => webhooksOf(owner).rollSecret(actorOf({ caller, meta }), params.accountId, params.webhookId, body ?? {}),
    }),
  ];
}
