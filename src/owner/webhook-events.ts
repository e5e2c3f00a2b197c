/**
 * Webhook events, derived from the audit trail like the mail notices (owner/mail-notices.ts):
 * an owner change that writes an event with one of WEBHOOK_ACTIONS becomes one webhook event
 * per account, typed "<object>.<past tense>" (`key.created` from `key.create`). Another part of
 * the owner service raises a webhook just by auditing with one of these actions; nothing here
 * needs to know it. The leak reports (`key.leak_reported`, `settings_token.leak_reported`) are
 * audited under the event type's own name.
 *
 * The payload follows the Standard Webhooks spec: `{type, timestamp, data}`; `data` holds only
 * what the audit event holds (owner/audit.ts keeps secrets out of it), so no secret can leave
 * this way.
 */
import type { AuditEvent } from '../state/owners/records.js';

/** Audit action → webhook event type. */
export const WEBHOOK_ACTIONS: Readonly<Record<string, string>> = {
  'key.create': 'key.created',
  'key.reset': 'key.reset',
  'key.roll': 'key.rolled',
  'key.leak_reported': 'key.leak_reported',
  'settings_token.create': 'settings_token.created',
  'settings_token.revoke': 'settings_token.revoked',
  'settings_token.leak_reported': 'settings_token.leak_reported',
  'member.add': 'member.added',
  'member.remove': 'member.removed',
  'invite.accept': 'invite.accepted',
};

/** Every event type an endpoint may ask for, and the one a test send carries. */
export const WEBHOOK_EVENT_TYPES: readonly string[] = [...new Set(Object.values(WEBHOOK_ACTIONS))].sort();
export const TEST_EVENT_TYPE = 'webhook.test';

export interface WebhookPayload {
  type: string;
  /** When the change happened (ISO 8601), as the spec's `timestamp`. */
  timestamp: string;
  data: {
    accountId: string;
    /** The audit event's id: a receiver can match it to the account's audit log. */
    auditEventId: string;
    actor: AuditEvent['actor'];
    target: AuditEvent['target'];
    changes?: AuditEvent['changes'];
  };
}

/** The webhook event an audit event raises in an account, or undefined: none. */
export function webhookEventOf(accountId: string, event: AuditEvent): WebhookPayload | undefined {
  const type = WEBHOOK_ACTIONS[event.action];
  if (type === undefined) return undefined;
  const data: WebhookPayload['data'] = { accountId, auditEventId: event.id, actor: event.actor, target: event.target };
  if (event.changes !== undefined) data.changes = event.changes;
  return { type, timestamp: event.at, data };
}

/** Whether an endpoint asking for `wanted` (undefined or empty: all) takes events of `type`. */
export function endpointWants(wanted: readonly string[] | undefined, type: string): boolean {
  return type === TEST_EVENT_TYPE || wanted === undefined || wanted.length === 0 || wanted.includes(type);
}
