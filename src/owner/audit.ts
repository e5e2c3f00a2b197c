/**
 * Audit events, made in one place. An event names who did what to which object, when and from
 * where; `changes` takes only fields listed in AUDITED_FIELDS, so a secret, a digest or a
 * password cannot reach the audit trail however a caller builds its change.
 */
import { randomBytes } from 'node:crypto';
import type { AuditEvent } from '../state/owners/records.js';
import type { Logger } from '../telemetry/log.js';
import type { Actor } from './types.js';

/** Fields whose before/after values an event may carry: names, flags, ids, times, scopes. */
export const AUDITED_FIELDS = new Set([
  'name', 'description', 'enabled', 'disabled', 'scopes', 'email', 'id', 'slug', 'public',
  'signedNonce', 'signedAt', 'signedExpiredAt', 'expiresAt', 'previousValidUntil', 'mustChangePassword',
  // A certificate's fingerprint is public (any peer it was shown to can compute it): no secret.
  'certificateSha256', 'requireDpop',
  // Second factors (owner/totp.ts, owner/passkeys.ts): the requirement and a passkey's name, never a secret.
  'requireSecondFactor',
  // Secret-scanning reports (owner/leaks.ts): where the secret was found, never the secret.
  'leakUrl', 'compromisedAt', 'tokenType',
  // Webhook endpoints (owner/webhooks.ts): where events go and which, never the signing secret.
  'url', 'events',
]);

/** The longest `ip` an event holds (state/owners/records.ts). */
const IP_MAX = 64;

/**
 * An event as the owner API answers it: an owner actor also named by email, looked up when
 * listed (events store the id only: the email is not copied into every event, and events made
 * before this field was answered get it too). Absent when the owner no longer exists.
 */
export type AuditEventView = Omit<AuditEvent, 'actor'> & { actor: AuditEvent['actor'] & { email?: string } };

export interface EventInput {
  action: string;
  target: { type: string; id: string };
  changes?: Record<string, [unknown, unknown]>;
}

export function makeEvent(actor: Actor, now: number, { action, target, changes }: EventInput): AuditEvent {
  const kept = changes === undefined
    ? undefined
    : Object.fromEntries(Object.entries(changes).filter(([field, [before, after]]) => AUDITED_FIELDS.has(field) && !Object.is(before, after) && JSON.stringify(before) !== JSON.stringify(after)));
  return {
    // Sortable by time as text: 13 digits of ms cover every date until the year 2286.
    id: `evt_${String(now).padStart(13, '0')}_${randomBytes(6).toString('hex')}`,
    at: new Date(now).toISOString(),
    action,
    actor: actor.caller.kind === 'owner' ? { type: 'owner', id: actor.caller.ownerId } : { type: 'operator' },
    target,
    // An unreadable forwarded address comes as "invalid:" and up to 64 characters of it: kept
    // to what an event holds, so it cannot make the change it records fail.
    ip: actor.meta.ip.slice(0, IP_MAX),
    requestId: actor.meta.requestId,
    ...(kept !== undefined && Object.keys(kept).length > 0 ? { changes: kept } : {}),
  };
}

/** Every event is also a log line, where history outlives the store's cap. */
export function logEvents(log: Logger, accountId: string, events: readonly AuditEvent[]): void {
  for (const event of events) log.info({ audit: { accountId, ...event } }, 'audit');
}
