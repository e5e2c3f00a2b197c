/**
 * The owner API from a script: an operator makes an account and its first owner, the owner
 * signs in with email and password and manages the account, then the operator deletes it.
 * Every method of OwnerClient is used once, and each result's type is asserted at compile time
 * (`npm run typecheck`); the lines marked `@ts-expect-error` are misuse the types refuse.
 * test/client/owner-example.test.ts runs `ownerExample` against a real gateway.
 *
 * In an application: `import { OwnerClient } from '@auth-gateway/client/owner'` (this file
 * imports the sources, so that it compiles before the package is built).
 */
import { Secret, TOTP } from 'otpauth';
import {
  AuthenticationError, ConflictError, GatewayError, NotFoundError, OwnerClient, PermissionError, RateLimitError,
} from '../src/owner/index.js';
import type {
  Account, AccountDeleted, AuditEvent, CallOptions, EmailVerified, Invite, InviteAccepted, InviteWithToken, Key, KeyDeleted, KeyWithSecret,
  Member, MemberRemoved, OwnSession, OwnSessions, Page, PasswordResetCompleted, PasswordResetRequested, RateLimitInfo, Reset, Role, RoleDeleted, Session, SettingsToken, SettingsTokenWithToken,
  ServedSignRecord, SignedOut, SignRecord, SignRecordDeleted, SsoOptions, Usage, Webhook, WebhookAttempt, WebhookDeleted, WebhookTestResult, WebhookWithSecret,
  MemberFactorsReset, PasskeyDeleted, RecoveryCodes, SecondFactorRequirement, SecondFactors, TotpEnrollment,
} from '../src/owner/index.js';
import { expectType, type Equal, type Expect } from './assert-types.js';

export interface ExampleResult {
  accountId: string;
  /** The actions of the account's audit log, newest first. */
  auditActions: string[];
}

/** `webhookUrl`: where the example's webhook endpoint points (a receiver of yours; the gateway must be allowed to reach it). */
export async function ownerExample({ baseUrl, adminToken, fetch, webhookUrl = 'https://hooks.example.com/gateway' }: { baseUrl: string; adminToken: string; fetch?: typeof globalThis.fetch; webhookUrl?: string }): Promise<ExampleResult> {
  const common = fetch === undefined ? { baseUrl } : { baseUrl, fetch };
  // Per-call options: an AbortSignal, a time limit, a retry policy; every method takes them last.
  const options: CallOptions = { timeoutMs: 10_000, retry: { retries: 1 } };

  // The operator: an admin token, sent as a bearer token; no session, no CSRF token.
  const operator = new OwnerClient({ ...common, adminToken });
  const account = await operator.accounts.create({ name: 'Example Ltd' }, options);
  expectType<Account>()(account);
  const accountId = account.id;
  expectType<Account>()(await operator.accounts.get(accountId));
  expectType<Page<Account>>()(await operator.accounts.list({ limit: 10 }));
  for await (const each of operator.accounts.all({ limit: 10 })) expectType<Account>()(each);
  const first = await operator.members.addOwner(accountId, { email: 'founder@example.com', initialPassword: 'an initial passphrase' });
  expectType<Member>()(first);

  // The owner: email and password; the client signs in on its first call and keeps the session.
  const owner = new OwnerClient({ ...common, email: 'founder@example.com', password: 'an initial passphrase' });
  const session = await owner.signIn();
  expectType<Session>()(session);
  if (session.owner.mustChangePassword) {
    expectType<Session>()(await owner.changePassword({ currentPassword: 'an initial passphrase', newPassword: 'correct horse battery staple' }));
  }
  expectType<Session>()(await owner.getSession());

  // The owner's sessions: where they are signed in; a session of another browser ended.
  const elsewhere = new OwnerClient({ ...common, email: 'founder@example.com', password: 'correct horse battery staple' });
  await elsewhere.signIn();
  const sessions = await owner.listSessions();
  expectType<OwnSessions>()(sessions);
  const otherSession = sessions.items.find((s) => !s.current);
  if (otherSession !== undefined) expectType<OwnSession>()(await owner.endSession(otherSession.id));
  // Whether the dashboard offers single sign-on (anyone may ask).
  expectType<SsoOptions>()(await operator.ssoOptions());

  const renamed = await owner.accounts.update(accountId, { name: 'Example Ltd.' });
  expectType<Account>()(renamed);

  const invited = await owner.invites.create(accountId, { email: 'colleague@example.com' });
  expectType<InviteWithToken>()(invited);
  expectType<Page<Invite>>()(await owner.invites.list(accountId));
  for await (const invite of owner.invites.all(accountId)) expectType<Invite>()(invite);
  // The invitee accepts (any client will do: the token and a password are the credential).
  const accepted = await operator.invites.accept({ token: invited.token, password: 'the colleague passphrase' });
  expectType<InviteAccepted>()(accepted);
  expectType<Page<Member>>()(await owner.members.list(accountId));
  for await (const member of owner.members.all(accountId)) expectType<Member>()(member);
  expectType<MemberRemoved>()(await owner.members.remove(accountId, accepted.ownerId));
  const again = await owner.invites.create(accountId, { email: 'someone@example.com' });
  const revokedInvite = await owner.invites.revoke(accountId, again.invite.id);
  expectType<Invite>()(revokedInvite);
  type _InviteStatus = Expect<Equal<Invite['status'], 'pending' | 'used' | 'revoked' | 'expired'>>;

  // Keys: the secret is in the creation's (and a roll's) answer only.
  const made = await owner.keys.create(accountId, { name: 'ci', description: 'The CI runner', scopes: ['read'] });
  expectType<KeyWithSecret>()(made);
  expectType<string>()(made.apiSecret);
  expectType<Key>()(await owner.keys.get(accountId, made.key.id));
  expectType<Key>()(await owner.keys.update(accountId, made.key.id, { scopes: ['read', 'write'] }));
  expectType<Page<Key>>()(await owner.keys.list(accountId, { limit: 50 }));
  for await (const key of owner.keys.all(accountId)) expectType<Key>()(key);
  const rolled = await owner.keys.roll(accountId, made.key.id, { overlapSeconds: 3600 });
  expectType<KeyWithSecret>()(rolled);
  expectType<string | undefined>()(rolled.key.previousValidUntil);
  const spare = await owner.keys.create(accountId, { name: 'spare' });
  expectType<Reset>()(await owner.keys.reset(accountId, spare.key.id));
  expectType<KeyDeleted>()(await owner.keys.delete(accountId, spare.key.id));

  // API settings tokens: the token is in the creation's answer only.
  const created = await owner.settingsTokens.create(accountId, { name: 'dashboard', scopes: ['read'], expiresInSeconds: 86_400 });
  expectType<SettingsTokenWithToken>()(created);
  expectType<SettingsToken>()(await owner.settingsTokens.get(accountId, created.settingsToken.id));
  expectType<Page<SettingsToken>>()(await owner.settingsTokens.list(accountId));
  for await (const token of owner.settingsTokens.all(accountId)) expectType<SettingsToken>()(token);
  const spareToken = await owner.settingsTokens.create(accountId, { name: 'spare' });
  const revoked = await owner.settingsTokens.revoke(accountId, spareToken.settingsToken.id);
  expectType<'active' | 'revoked' | 'expired'>()(revoked.status);

  // Webhooks: the signing secret is in the creation's (and a roll's) answer only.
  const hook = await owner.webhooks.create(accountId, { url: webhookUrl, events: ['key.created', 'key.leak_reported'] });
  expectType<WebhookWithSecret>()(hook);
  expectType<{ items: Webhook[] }>()(await owner.webhooks.list(accountId));
  expectType<Webhook>()(await owner.webhooks.get(accountId, hook.webhook.id));
  expectType<Webhook>()(await owner.webhooks.update(accountId, hook.webhook.id, { description: 'audit sink' }));
  // A test event now: `ok` says whether the receiver answered 2xx (it is logged either way).
  expectType<WebhookTestResult>()(await owner.webhooks.sendTest(accountId, hook.webhook.id));
  expectType<{ items: WebhookAttempt[] }>()(await owner.webhooks.deliveries(accountId, hook.webhook.id));
  // A new secret; the old one goes on signing for an hour, while the receiver learns the new one.
  expectType<WebhookWithSecret>()(await owner.webhooks.rollSecret(accountId, hook.webhook.id, { overlapSeconds: 3600 }));
  expectType<WebhookDeleted>()(await owner.webhooks.delete(accountId, hook.webhook.id));

  // Roles: ids are the owner's to choose (listed in id order); `public` is a boolean here.
  const role = await owner.roles.create(accountId, { id: 10, slug: 'auditor', name: 'Auditor', public: false });
  expectType<Role>()(role);
  expectType<Role>()(await owner.roles.replace(accountId, 10, { id: 5, slug: 'auditor', name: 'Auditor', description: 'Reads reports.', public: true }));
  expectType<Role>()(await owner.roles.get(accountId, 5));
  expectType<Page<Role>>()(await owner.roles.list(accountId, { name: 'audit' }));
  for await (const each of owner.roles.all(accountId, { name: 'audit', limit: 100 })) expectType<Role>()(each);
  const other = await owner.roles.create(accountId, { id: 11, slug: 'other', name: 'Other', public: true });
  expectType<RoleDeleted>()(await owner.roles.delete(accountId, other.id));

  // Sign records, by address (there is no listing).
  const address = '0xDE709F2102306220921060314715629080E2FB77';
  const record = await owner.signRecords.create(accountId, { address, signedNonce: 1, signedAt: '2026-06-01T10:00:00Z', signedExpiredAt: '2026-07-01T10:00:00Z' });
  expectType<SignRecord>()(record);
  expectType<SignRecord>()(await owner.signRecords.replace(accountId, address, { signedNonce: 2, signedAt: '2026-06-01T10:00:00Z', signedExpiredAt: '2026-08-01T10:00:00Z' }));
  expectType<SignRecord>()(await owner.signRecords.get(accountId, address));
  // Exactly what /api/sign answers the account's keys: `did` as given, times in the gateway's time zone.
  expectType<ServedSignRecord>()(await owner.signRecords.served(accountId, address));
  expectType<SignRecordDeleted>()(await owner.signRecords.delete(accountId, address));

  // Errors are typed: the gateway's code, its sentence, the status and the request id.
  try {
    await owner.keys.get(accountId, 'key_that_is_not_there');
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    expectType<string>()(err.code);
    expectType<number>()(err.status);
    expectType<string | undefined>()(err.requestId);
  }
  try {
    await owner.accounts.delete(accountId);
  } catch (err) {
    // Deleting an account is the operator's: an owner is refused.
    if (!(err instanceof PermissionError)) throw err;
  }

  // Calls and rate-limited calls per key over the last hours (1 to 24), from the gateway's own counters.
  const usage = await owner.usage.get(accountId, { hours: 1 });
  expectType<Usage>()(usage);
  for (const each of usage.items) expectType<number>()(each.requests + each.rateLimited + each.statuses['5xx']);
  const month = await owner.usage.get(accountId, { days: 30, keyId: 'key_1' });
  for (const step of month.series) expectType<string>()(step.start);

  // Second factors: TOTP for this owner (a script that holds the secret computes its codes, here
  // with otpauth), then off again; an account may require one of every owner. Passkeys are
  // registered in a browser: here only listed and removed.
  expectType<SecondFactors>()(await owner.secondFactors.get());
  const enrollment = await owner.secondFactors.startTotp();
  expectType<TotpEnrollment>()(enrollment);
  const enrolled = await owner.secondFactors.confirmTotp({ code: TOTP.generate({ secret: Secret.fromBase32(enrollment.secret) }) });
  expectType<RecoveryCodes>()(enrolled);
  const renewed = await owner.secondFactors.regenerateRecoveryCodes({ code: enrolled.recoveryCodes[0]! });
  expectType<SecondFactors>()(await owner.secondFactors.disableTotp({ code: renewed.recoveryCodes[0]! }));
  try {
    expectType<PasskeyDeleted>()(await owner.secondFactors.deletePasskey('no-such-passkey'));
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
  expectType<SecondFactorRequirement>()(await owner.secondFactors.getRequirement(accountId));
  expectType<SecondFactorRequirement>()(await operator.secondFactors.setRequirement(accountId, { required: false }));
  // An owner who lost every second factor: an operator removes them.
  expectType<MemberFactorsReset>()(await operator.secondFactors.resetMember(accountId, first.ownerId));

  const auditActions: string[] = [];
  expectType<Page<AuditEvent>>()(await owner.audit.list(accountId, { limit: 20 }));
  for await (const event of owner.audit.all(accountId, { limit: 20 })) {
    expectType<AuditEvent>()(event);
    expectType<Record<string, [before: unknown, after: unknown]> | undefined>()(event.changes);
    auditActions.push(event.action);
  }
  expectType<RateLimitInfo | undefined>()(owner.rateLimit);
  expectType<Reset>()(await owner.accounts.reset(accountId));
  expectType<SignedOut>()(await owner.signOut());

  // The mail flows (docs/mail.md): sent with no credential; a reset is asked for with an email
  // alone (the same answer for every email), and the token of its mail's link completes it. A
  // token no mail carried is refused like a used one.
  expectType<PasswordResetRequested>()(await operator.mail.requestPasswordReset({ email: 'founder@example.com' }));
  const madeUp = `${'a'.repeat(43)}.own_none`;
  const refusals = [
    async () => expectType<PasswordResetCompleted>()(await operator.mail.completePasswordReset({ token: `gwrst_${madeUp}`, password: 'a passphrase from the mail' })),
    async () => expectType<EmailVerified>()(await operator.mail.verifyEmail({ token: `gwver_${madeUp}` })),
  ];
  for (const refused of refusals) {
    try {
      await refused();
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  await operator.accounts.update(accountId, { enabled: false });
  expectType<AccountDeleted>()(await operator.accounts.delete(accountId));
  return { accountId, auditActions };
}

/** Never run: each line is a mistake the types must refuse. */
export async function misuse(client: OwnerClient, accountId: string): Promise<void> {
  // @ts-expect-error: either an admin token or email and password, not both
  new OwnerClient({ baseUrl: 'https://gw.example.com', adminToken: 'gwadm_x', email: 'a@example.com', password: 'pw' });
  // @ts-expect-error: an owner needs the password too
  new OwnerClient({ baseUrl: 'https://gw.example.com', email: 'a@example.com' });
  // @ts-expect-error: no credentials at all
  new OwnerClient({ baseUrl: 'https://gw.example.com' });
  // @ts-expect-error: a role id is a number
  await client.roles.get(accountId, '7');
  // @ts-expect-error: `public` is a boolean in the owner API (0 | 1 is /api/roles')
  await client.roles.create(accountId, { id: 1, slug: 'a', name: 'A', public: 1 });
  // @ts-expect-error: a roll must say how long the old secret overlaps
  await client.keys.roll(accountId, 'key_1', {});
  // @ts-expect-error: a key is created without `enabled` (update it after)
  await client.keys.create(accountId, { name: 'ci', enabled: false });
  const key = await client.keys.get(accountId, 'key_1');
  // @ts-expect-error: a key's secret is never in a listing or a read
  void key.apiSecret;
  // @ts-expect-error: a settings token's status is one of three
  const status: SettingsToken['status'] = 'paused';
  void status;
  // @ts-expect-error: sign records are looked up by address; there is no listing
  await client.signRecords.list(accountId);
  // @ts-expect-error: hours is a number (1 to 24)
  await client.usage.get(accountId, { hours: '24' });
  // @ts-expect-error: timeoutMs is a number of milliseconds
  await client.accounts.list({}, { timeoutMs: '5s' });
  // @ts-expect-error: the iterator takes a page size, not a cursor
  client.audit.all(accountId, { cursor: 'abc' });
  const page = await client.accounts.list();
  // @ts-expect-error: nextCursor is absent on the last page
  const next: string = page.nextCursor;
  void next;
  try {
    await client.accounts.list();
  } catch (err) {
    // Every class is a GatewayError; narrowing gives each its fields.
    if (err instanceof RateLimitError) expectType<number | undefined>()(err.retryAfterMs);
    if (err instanceof ConflictError || err instanceof AuthenticationError) expectType<number>()(err.status);
    if (err instanceof GatewayError) expectType<number | undefined>()(err.status);
    // @ts-expect-error: an unknown error has no code until narrowed
    void err.code;
  }
}
