/**
 * The owner API's objects as the dashboard reads them: the answers of its operations, from
 * owner-api.generated.ts (`npm run generate:owner-types`, made from the server's own schemas:
 * docs/owner.md, "Operations", and /openapi.json describe them). So a field the gateway stops
 * answering, or answers in another type, fails the dashboard's type check rather than the page.
 * Times are ISO 8601 strings in UTC; optional fields are left out, never null.
 */
import type { OwnerAnswer } from './owner-api.generated.js';

export type { Role, ServedSignRecord, SignRecord, Usage } from './owner-api.generated.js';

/** Every listing's answer (`GET …/keys`, `…/roles`, …); `nextCursor` is absent on the last page. */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

export type Session = OwnerAnswer<'getSession'>;
export type Owner = Session['owner'];
/** `name` is "" when the account has none. */
export type Account = OwnerAnswer<'getAccount'>;
export type Key = OwnerAnswer<'getKey'>;
export type KeyWithSecret = OwnerAnswer<'createKey'>;
export type Reset = OwnerAnswer<'resetKey'>;
export type SettingsToken = OwnerAnswer<'getSettingsToken'>;
export type SettingsTokenWithToken = OwnerAnswer<'createSettingsToken'>;
export type Webhook = OwnerAnswer<'getWebhook'>;
export type WebhookWithSecret = OwnerAnswer<'createWebhook'>;
export type WebhookAttempt = OwnerAnswer<'listWebhookDeliveries'>['items'][number];
export type WebhookTestResult = OwnerAnswer<'sendTestWebhook'>;
export type AuditEvent = OwnerAnswer<'listAudit'>['items'][number];
export type Invite = OwnerAnswer<'revokeInvite'>;
export type OwnSession = OwnerAnswer<'listOwnSessions'>['items'][number];
export type SsoOptions = OwnerAnswer<'getSsoOptions'>;
