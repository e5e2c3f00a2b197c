/**
 * The owner API's shapes, written by hand after the gateway's `GET /openapi.json` (the names
 * are docs/owner.md's: Session, Account, Key, …). test/client/owner-conformance.test.ts holds
 * every field list here to the document, and every answer the tests receive to its schema;
 * examples/owner-api-types.ts holds every method's answer and input here to exactly the type
 * generated from the server's schemas (./api.generated.ts, `npm run generate:owner-types`).
 * Times are ISO 8601 strings in UTC (`2026-11-23T21:00:00.000Z`); optional fields are left out,
 * never `null`.
 */
import type { CallOptions, RateLimitInfo, RetryOptions } from '../types.js';

export type { CallOptions, RateLimitInfo, RateLimitItem, RetryOptions } from '../types.js';

interface OwnerClientCommonOptions {
  /** The gateway's base URL, e.g. `https://gateway.example.com`. */
  baseUrl: string | URL;
  /** Per-call time limit, retries, waits and a sign-in included; default 30,000. */
  timeoutMs?: number;
  /** Retry policy for idempotent calls; `false` turns retries off. */
  retry?: RetryOptions | false;
  /** A fetch implementation; default the platform's `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** Called with the RateLimit fields of every answer that carries them. */
  onRateLimit?: (info: RateLimitInfo) => void;
}

/** An operator: every call carries `Authorization: Bearer gwadm_…`. */
export interface OperatorCredentials {
  adminToken: string;
  email?: never;
  password?: never;
}

/**
 * An owner: the client signs in at `POST /owner/v1/session` on its first call, keeps the
 * session cookie and CSRF token in memory, and signs in again (once) when the session ends.
 * The password stays in memory for that.
 */
export interface OwnerCredentials {
  email: string;
  password: string;
  adminToken?: never;
}

export type OwnerClientOptions = OwnerClientCommonOptions & (OperatorCredentials | OwnerCredentials);

/** `limit` 1–100 (default 50); `cursor` the previous page's `nextCursor`, passed back as given. */
export interface PageQuery {
  limit?: number;
  cursor?: string;
}

/** Every listing's answer; `nextCursor` is absent on the last page. */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/** An iterator over every item of a listing: `limit` is the size of each page fetched. */
export interface IterateQuery {
  limit?: number;
}

export interface Owner {
  id: string;
  email: string;
  mustChangePassword: boolean;
  createdAt: string;
  /** When the owner confirmed their email by mail; absent: not confirmed. */
  emailVerifiedAt?: string;
}

export interface Account {
  id: string;
  /** `""` when the account has none. */
  name: string;
  enabled: boolean;
  /** Absent for accounts written by hand in the data file. */
  createdAt?: string;
}

/** `POST /owner/v1/session`, `GET /owner/v1/session`, `POST /owner/v1/session/password`. */
export interface Session {
  owner: Owner;
  /** The accounts this owner manages. */
  accounts: Account[];
  csrfToken: string;
  idleExpiresAt: string;
  expiresAt: string;
}

export interface SignedOut {
  signedOut: true;
}

/** One of the owner's sessions (`GET /owner/v1/sessions`): never its id or cookie. */
export interface OwnSession {
  /** `ses_` and 24 hex digits: what endSession takes. */
  id: string;
  createdAt: string;
  /** To the minute. */
  lastSeenAt: string;
  idleExpiresAt: string;
  expiresAt: string;
  ip?: string;
  userAgent?: string;
  /** The session this client holds. */
  current: boolean;
}

export interface OwnSessions {
  items: OwnSession[];
}

/** `GET /owner/v1/sso`: single sign-on, for a browser's sign-in page. */
export interface SsoOptions {
  enabled: boolean;
  displayName?: string;
  startPath?: string;
}

export interface ChangePasswordInput {
  currentPassword: string;
  /** 15 to 256 characters. */
  newPassword: string;
}

export interface CreateAccountInput {
  /** `[A-Za-z0-9._:@-]{1,128}`; default `acct_` + 16 base62 characters. */
  id?: string;
  /** 1 to 100 characters. */
  name: string;
}

/** `enabled` is the operator's; owners may rename. */
export interface UpdateAccountInput {
  name?: string;
  enabled?: boolean;
}

export interface AccountDeleted {
  id: string;
  deleted: true;
}

export interface Member {
  ownerId: string;
  email: string;
  addedAt: string;
}

export interface MemberRemoved {
  ownerId: string;
  removed: true;
}

export interface AddOwnerInput {
  email: string;
  /** 15 to 256 characters; the owner must change it before anything else. */
  initialPassword: string;
}

export type InviteStatus = 'pending' | 'used' | 'revoked' | 'expired';

export interface Invite {
  id: string;
  email: string;
  createdAt: string;
  expiresAt: string;
  status: InviteStatus;
}

export interface CreateInviteInput {
  email: string;
}

/** `token` (`gwinv_…`) and `url` are shown this once. */
export interface InviteWithToken {
  invite: Invite;
  token: string;
  url: string;
}

export interface AcceptInviteInput {
  token: string;
  /** The new owner's password, or an existing owner's own. */
  password: string;
}

export interface InviteAccepted {
  ownerId: string;
  accountId: string;
}

export interface RequestPasswordResetInput {
  email: string;
}

/** The one answer for every email, with an owner or without. */
export interface PasswordResetRequested {
  accepted: true;
}

export interface CompletePasswordResetInput {
  /** `gwrst_…`, from the reset mail's link (its fragment). */
  token: string;
  password: string;
}

export interface PasswordResetCompleted {
  reset: true;
}

export interface VerifyEmailInput {
  /** `gwver_…`, from the verification mail's link (its fragment). */
  token: string;
}

export interface EmailVerified {
  emailVerifiedAt: string;
}

/** An API key: never its secret nor a digest. */
export interface Key {
  /** `key_…` */
  id: string;
  /** `gwk_…`, what `/api/signin` takes. */
  apiKey: string;
  name: string;
  description: string;
  enabled: boolean;
  scopes: string[];
  createdAt?: string;
  /** Until when the secret before the latest roll still signs in. */
  previousValidUntil?: string;
  /** The key's last sign-in, to within 5 minutes; absent while none is known. */
  lastUsedAt?: string;
  /** The client certificate the key is bound to (mTLS): SHA-256, 64 lowercase hex digits; absent while unbound. */
  certificateSha256?: string;
  /** The key signs in and refreshes only with a DPoP proof (see the README, "DPoP"); absent: it need not. */
  requireDpop?: true;
  /** When a secret-scanning report named the key's secret: it signs in no more until its secret is rolled (`roll` clears it). */
  compromisedAt?: string;
}

export interface CreateKeyInput {
  name: string;
  description?: string;
  scopes?: string[];
  /** Binds the key to one client certificate: its SHA-256 as 64 hex digits (pairs may be separated by ":"). */
  certificateSha256?: string;
  /** Sign-in and refresh only with a DPoP proof. */
  requireDpop?: boolean;
}

export interface UpdateKeyInput {
  name?: string;
  description?: string;
  enabled?: boolean;
  scopes?: string[];
  /** As CreateKeyInput's; null unbinds the key. */
  certificateSha256?: string | null;
  /** true: sign-in and refresh only with a DPoP proof (the key's tokens so far stop); false: no longer. */
  requireDpop?: boolean;
}

/** `apiSecret` (`gwsk_…`) is shown this once. */
export interface KeyWithSecret {
  key: Key;
  apiSecret: string;
}

export interface KeyDeleted {
  id: string;
  deleted: true;
}

export interface RollKeyInput {
  /** 0 to 2,592,000 (30 days): how long the old secret still signs in. */
  overlapSeconds: number;
}

/** `POST …/reset` and `POST …/keys/{keyId}/reset`. */
export interface Reset {
  scope: 'key' | 'account';
  accountId: string;
  /** Key scope only. */
  keyId?: string;
  resetAt: string;
}

export type SettingsTokenStatus = 'active' | 'revoked' | 'expired';

/** An API settings token: never the token itself. */
export interface SettingsToken {
  /** `stk_…` */
  id: string;
  name: string;
  /** The token's first 9 characters. */
  start: string;
  scopes: string[];
  createdAt: string;
  expiresAt?: string;
  lastUsedAt?: string;
  revokedAt?: string;
  status: SettingsTokenStatus;
}

export interface CreateSettingsTokenInput {
  name: string;
  scopes?: string[];
  /** 60 to 315,360,000 (10 years); absent: no expiry (unless the gateway caps it). */
  expiresInSeconds?: number;
}

/** `token` (`gwst_…`) is shown this once. */
export interface SettingsTokenWithToken {
  settingsToken: SettingsToken;
  token: string;
}

/** A webhook endpoint: never its signing secret. */
export interface Webhook {
  /** `whe_…` */
  id: string;
  url: string;
  description: string;
  /** Event types sent to it (`key.created`, `key.reset`, …); empty: all. */
  events: string[];
  enabled: boolean;
  /** After a roll with an overlap: until when the replaced secret signs each delivery too. */
  previousValidUntil?: string;
  createdAt: string;
  updatedAt: string;
}

/** The owner events a webhook endpoint may ask for (docs/webhooks.md). */
export type WebhookEventType = 'invite.accepted' | 'key.created' | 'key.leak_reported' | 'key.reset' | 'key.rolled' | 'member.added' | 'member.removed' | 'settings_token.created' | 'settings_token.leak_reported' | 'settings_token.revoked';

export interface CreateWebhookInput {
  /** https:// (http:// only where the gateway allows it); a global address unless the operator allows more. */
  url: string;
  description?: string;
  /** Absent or empty: all. */
  events?: WebhookEventType[];
  enabled?: boolean;
}

export interface UpdateWebhookInput {
  url?: string;
  description?: string;
  events?: WebhookEventType[];
  enabled?: boolean;
}

/** `secret` (`whsec_…`, Standard Webhooks) is shown this once. */
export interface WebhookWithSecret {
  webhook: Webhook;
  secret: string;
}

export interface RollWebhookSecretInput {
  /** 0 to 2,592,000 (30 days): how long deliveries are signed with the replaced secret too. */
  overlapSeconds?: number;
}

export interface WebhookDeleted {
  id: string;
  deleted: true;
}

/** One delivery attempt, as the endpoint's log keeps it. */
export interface WebhookAttempt {
  deliveryId: string;
  type: string;
  at: string;
  attempt: number;
  ok: boolean;
  status?: number;
  durationMs: number;
  error?: string;
}

/** How a test send went. */
export interface WebhookTestResult {
  deliveryId: string;
  ok: boolean;
  status?: number;
  durationMs: number;
  error?: string;
}

/** A role as the owner API has it (`/api/roles` shows `public` as 0 or 1). */
export interface Role {
  /** 0 … 2^53−1; roles are listed in id order. */
  id: number;
  slug: string;
  name: string;
  description: string;
  public: boolean;
}

/** What a role is created or replaced with; `description` defaults to `""`. */
export interface RoleInput {
  id: number;
  /** 1 to 256 of `a-z 0-9 . _ -`, starting with a letter or digit, unique in the account. */
  slug: string;
  name: string;
  description?: string;
  public: boolean;
}

export interface RoleQuery extends PageQuery {
  /** Only roles whose name contains this (case-insensitive). */
  name?: string;
}

export interface RoleIterateQuery extends IterateQuery {
  name?: string;
}

export interface RoleDeleted {
  id: number;
  deleted: true;
}

export interface SignRecord {
  /** Lowercase. */
  address: string;
  signedNonce: number;
  signedAt: string;
  signedExpiredAt: string;
}

/** Times in ISO 8601 with `Z` or an offset; `signedExpiredAt` after `signedAt`. */
export interface SignRecordInput {
  /** `0x` and 40 hex digits, any case. */
  address: string;
  signedNonce: number;
  signedAt: string;
  signedExpiredAt: string;
}

export type SignRecordUpdate = Omit<SignRecordInput, 'address'>;

export interface SignRecordDeleted {
  address: string;
  deleted: true;
}

/** A sign record exactly as `/api/sign` answers it to the account's keys (its `message`). */
export interface ServedSignRecord {
  /** The address as given, case kept. */
  did: string;
  signedNonce: number;
  /** `YYYY-MM-DD HH:MM:SS` in the gateway's `data.timeZone`. */
  signedAt: string;
  signedExpiredAt: string;
}

/** Calls by the class of the status they were answered with (a 429 is 4xx, a switched WebSocket 1xx). */
export interface UsageStatuses {
  '1xx': number;
  '2xx': number;
  '3xx': number;
  '4xx': number;
  '5xx': number;
}

/** One key's (or API settings token's) counts over the window. */
export interface KeyUsage {
  /** A key id, or a settings token id (`stk_…`). */
  keyId: string;
  /** Calls admitted. */
  requests: number;
  /** Calls refused with 429 (not in `requests`). */
  rateLimited: number;
  /** The same calls by the class of their answer's status, counted when the answer ended. */
  statuses: UsageStatuses;
}

/** One step (an hour, or a UTC day) of the window, summed over the keys of `items`. */
export interface UsageStep {
  /** ISO 8601: the step's start (the window's start, for the first). */
  start: string;
  requests: number;
  rateLimited: number;
  statuses: UsageStatuses;
}

export interface Usage {
  /** ISO 8601: the start of the oldest bucket read (a 5-minute one with `hours`, a UTC day with `days`). */
  from: string;
  /** ISO 8601: when the gateway answered. */
  to: string;
  /** 300 with `hours`, 86400 with `days`. */
  bucketSeconds: number;
  /** Length of a step of `series`: 3600 with `hours`, 86400 with `days`. */
  stepSeconds: number;
  /** False while the gateway counts nothing (`usage.enabled` off): `items` is then empty and every step 0. */
  enabled: boolean;
  /** Keys with any count in the window, by key id (only `keyId`, when asked for). */
  items: KeyUsage[];
  /** Every step of the window, oldest first (`hours` + 1 or `days` + 1 of them; the last is the one now is in). */
  series: UsageStep[];
}

export interface UsageQuery {
  /** 1 to 24 (24 if neither this nor `days` is given); steps of an hour. */
  hours?: number;
  /** Instead of `hours`: 1 to 30; steps of a UTC day. */
  days?: number;
  /** Only this key's (or settings token's) counts. */
  keyId?: string;
}

export interface AuditEvent {
  id: string;
  at: string;
  /** `account.update`, `key.create`, `key.roll`, `role.create`, … */
  action: string;
  /** `email`: an owner's, while the owner exists. */
  actor: { type: 'owner' | 'operator' | 'system'; id?: string; email?: string };
  target: { type: string; id: string };
  ip?: string;
  requestId?: string;
  /** Each changed field's value before and after (never a secret). */
  changes?: Record<string, [before: unknown, after: unknown]>;
}

/*
 * The client's method groups. Every method takes the per-call options last (an AbortSignal,
 * a time limit, a retry policy) and throws the typed errors of `@auth-gateway/client/owner`.
 * `all` iterates over every page of a listing, one request per page, each page with `options`.
 */

/** Accounts: `create`, `delete` and `update({enabled})` are the operator's. */
export interface AccountsApi {
  list(query?: PageQuery, options?: CallOptions): Promise<Page<Account>>;
  all(query?: IterateQuery, options?: CallOptions): AsyncGenerator<Account, void, undefined>;
  create(input: CreateAccountInput, options?: CallOptions): Promise<Account>;
  get(accountId: string, options?: CallOptions): Promise<Account>;
  update(accountId: string, input: UpdateAccountInput, options?: CallOptions): Promise<Account>;
  delete(accountId: string, options?: CallOptions): Promise<AccountDeleted>;
  /** Ends every token of every key of the account and revokes its settings tokens for good. */
  reset(accountId: string, options?: CallOptions): Promise<Reset>;
}

export interface MembersApi {
  list(accountId: string, query?: PageQuery, options?: CallOptions): Promise<Page<Member>>;
  all(accountId: string, query?: IterateQuery, options?: CallOptions): AsyncGenerator<Member, void, undefined>;
  /** The operator's: a new owner with an initial password (an existing owner joins by an invite). */
  addOwner(accountId: string, input: AddOwnerInput, options?: CallOptions): Promise<Member>;
  remove(accountId: string, ownerId: string, options?: CallOptions): Promise<MemberRemoved>;
}

export interface InvitesApi {
  list(accountId: string, query?: PageQuery, options?: CallOptions): Promise<Page<Invite>>;
  all(accountId: string, query?: IterateQuery, options?: CallOptions): AsyncGenerator<Invite, void, undefined>;
  create(accountId: string, input: CreateInviteInput, options?: CallOptions): Promise<InviteWithToken>;
  revoke(accountId: string, inviteId: string, options?: CallOptions): Promise<Invite>;
  /** Sent without the client's credentials: the invite's token and a password are the credential. */
  accept(input: AcceptInviteInput, options?: CallOptions): Promise<InviteAccepted>;
}

/** The mail-based flows (docs/mail.md): sent without the client's credentials, the mailed token is the credential. */
export interface MailFlowsApi {
  /** Answered alike whether the email has an owner; with mail on, an owner gets a reset link. */
  requestPasswordReset(input: RequestPasswordResetInput, options?: CallOptions): Promise<PasswordResetRequested>;
  /** Sets the password; every session of the owner ends. */
  completePasswordReset(input: CompletePasswordResetInput, options?: CallOptions): Promise<PasswordResetCompleted>;
  verifyEmail(input: VerifyEmailInput, options?: CallOptions): Promise<EmailVerified>;
}

export interface KeysApi {
  list(accountId: string, query?: PageQuery, options?: CallOptions): Promise<Page<Key>>;
  all(accountId: string, query?: IterateQuery, options?: CallOptions): AsyncGenerator<Key, void, undefined>;
  /** The answer's `apiSecret` is shown this once. */
  create(accountId: string, input: CreateKeyInput, options?: CallOptions): Promise<KeyWithSecret>;
  get(accountId: string, keyId: string, options?: CallOptions): Promise<Key>;
  update(accountId: string, keyId: string, input: UpdateKeyInput, options?: CallOptions): Promise<Key>;
  delete(accountId: string, keyId: string, options?: CallOptions): Promise<KeyDeleted>;
  /** A new secret, shown this once; the old one signs in for `overlapSeconds` more. */
  roll(accountId: string, keyId: string, input: RollKeyInput, options?: CallOptions): Promise<KeyWithSecret>;
  /** Ends every token the key has issued. */
  reset(accountId: string, keyId: string, options?: CallOptions): Promise<Reset>;
}

export interface SettingsTokensApi {
  list(accountId: string, query?: PageQuery, options?: CallOptions): Promise<Page<SettingsToken>>;
  all(accountId: string, query?: IterateQuery, options?: CallOptions): AsyncGenerator<SettingsToken, void, undefined>;
  /** The answer's `token` is shown this once. */
  create(accountId: string, input: CreateSettingsTokenInput, options?: CallOptions): Promise<SettingsTokenWithToken>;
  get(accountId: string, tokenId: string, options?: CallOptions): Promise<SettingsToken>;
  revoke(accountId: string, tokenId: string, options?: CallOptions): Promise<SettingsToken>;
}

export interface WebhooksApi {
  list(accountId: string, options?: CallOptions): Promise<{ items: Webhook[] }>;
  /** The answer's `secret` is shown this once. */
  create(accountId: string, input: CreateWebhookInput, options?: CallOptions): Promise<WebhookWithSecret>;
  get(accountId: string, webhookId: string, options?: CallOptions): Promise<Webhook>;
  update(accountId: string, webhookId: string, input: UpdateWebhookInput, options?: CallOptions): Promise<Webhook>;
  delete(accountId: string, webhookId: string, options?: CallOptions): Promise<WebhookDeleted>;
  /** The newest 50 attempts, newest first. */
  deliveries(accountId: string, webhookId: string, options?: CallOptions): Promise<{ items: WebhookAttempt[] }>;
  /** Sends a signed `webhook.test` event now; at most one per endpoint every 5 s (else 429). */
  sendTest(accountId: string, webhookId: string, options?: CallOptions): Promise<WebhookTestResult>;
  /** A new signing secret, shown this once; the replaced one goes on signing for `overlapSeconds` (0 by default). */
  rollSecret(accountId: string, webhookId: string, input?: RollWebhookSecretInput, options?: CallOptions): Promise<WebhookWithSecret>;
}

export interface RolesApi {
  list(accountId: string, query?: RoleQuery, options?: CallOptions): Promise<Page<Role>>;
  all(accountId: string, query?: RoleIterateQuery, options?: CallOptions): AsyncGenerator<Role, void, undefined>;
  get(accountId: string, roleId: number, options?: CallOptions): Promise<Role>;
  create(accountId: string, input: RoleInput, options?: CallOptions): Promise<Role>;
  /** Replaces the role `roleId`; a different `input.id` moves it (roles are listed in id order). */
  replace(accountId: string, roleId: number, input: RoleInput, options?: CallOptions): Promise<Role>;
  delete(accountId: string, roleId: number, options?: CallOptions): Promise<RoleDeleted>;
}

/** The owner API has no listing of sign records: they are looked up by address. */
export interface SignRecordsApi {
  create(accountId: string, input: SignRecordInput, options?: CallOptions): Promise<SignRecord>;
  get(accountId: string, address: string, options?: CallOptions): Promise<SignRecord>;
  replace(accountId: string, address: string, input: SignRecordUpdate, options?: CallOptions): Promise<SignRecord>;
  delete(accountId: string, address: string, options?: CallOptions): Promise<SignRecordDeleted>;
  /** What `/api/sign?address=` answers for the address to the account's keys; NotFoundError when nothing. */
  served(accountId: string, address: string, options?: CallOptions): Promise<ServedSignRecord>;
}

/** Per-key usage from the gateway's own counters (a few seconds behind). */
export interface UsageApi {
  get(accountId: string, query?: UsageQuery, options?: CallOptions): Promise<Usage>;
}

/** The account's audit log, newest first. */
export interface AuditApi {
  list(accountId: string, query?: PageQuery, options?: CallOptions): Promise<Page<AuditEvent>>;
  all(accountId: string, query?: IterateQuery, options?: CallOptions): AsyncGenerator<AuditEvent, void, undefined>;
}

/** A passkey of the owner's, as listed (docs/owner.md, "Second factors"); registered in a browser. */
export interface Passkey {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt?: string;
}

/** The signed-in owner's second factors, and whether one is required of them. */
export interface SecondFactors {
  totp: { enabled: boolean; enabledAt?: string };
  recoveryCodesLeft: number;
  passkeys: Passkey[];
  required: boolean;
}

/** A TOTP enrollment started: the secret, its `otpauth://` URI and a QR code of it (an SVG data URL); shown once. */
export interface TotpEnrollment {
  secret: string;
  uri: string;
  qrCode: string;
}

/** Ten one-time recovery codes: shown once. */
export interface RecoveryCodes {
  recoveryCodes: string[];
}

/** A current TOTP code, or an unused recovery code. */
export interface CodeInput {
  code: string;
}

/** An account's requirement that every owner of it use a second factor. */
export interface SecondFactorRequirement {
  required: boolean;
}

export interface PasskeyDeleted {
  deleted: true;
}

export interface MemberFactorsReset {
  ownerId: string;
  reset: true;
}

/**
 * The owner's second factors (owners only, but the requirement: an operator's too). Passkeys
 * are registered and used in a browser (the dashboard); here they are listed and removed.
 */
export interface SecondFactorsApi {
  get(options?: CallOptions): Promise<SecondFactors>;
  /** A new TOTP secret, pending until confirmed. */
  startTotp(options?: CallOptions): Promise<TotpEnrollment>;
  /** Turns TOTP on with a code of the pending secret; answers the recovery codes. */
  confirmTotp(input: CodeInput, options?: CallOptions): Promise<RecoveryCodes>;
  disableTotp(input: CodeInput, options?: CallOptions): Promise<SecondFactors>;
  regenerateRecoveryCodes(input: CodeInput, options?: CallOptions): Promise<RecoveryCodes>;
  deletePasskey(passkeyId: string, options?: CallOptions): Promise<PasskeyDeleted>;
  getRequirement(accountId: string, options?: CallOptions): Promise<SecondFactorRequirement>;
  setRequirement(accountId: string, input: SecondFactorRequirement, options?: CallOptions): Promise<SecondFactorRequirement>;
  /** Operators: removes every second factor of a member who lost them all. */
  resetMember(accountId: string, ownerId: string, options?: CallOptions): Promise<MemberFactorsReset>;
}
