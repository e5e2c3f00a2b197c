/**
 * OwnerClient against the gateway's own /openapi.json, three ways:
 * - its methods and its operation table are the same set, and each entry names an operation of
 *   the document by method, path template and operationId (and every owner operation has one);
 * - every method, called once on a real gateway, sends exactly its operation, and each answer
 *   validates against that operation's schema (helpers/openapi.ts);
 * - the hand-written types of owner/types.ts name the document's fields: each list below is held
 *   to its type at compile time (`npm run typecheck`) and to the document's schema here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Secret, TOTP } from 'otpauth';
import { OPERATIONS, type OperationName } from '../../packages/client/src/owner/client.js';
import { OwnerClient } from '../../packages/client/src/owner/index.js';
import type {
  AcceptInviteInput, Account, AccountDeleted, AddOwnerInput, AuditEvent, ChangePasswordInput, CreateAccountInput,
  CreateInviteInput, CreateKeyInput, CreateSettingsTokenInput, Invite, InviteAccepted, InviteStatus, InviteWithToken, Key,
  KeyDeleted, KeyWithSecret, Member, MemberRemoved, Owner, Page, PageQuery, Reset, Role, RoleDeleted, RoleInput, RoleQuery,
  RollKeyInput, ServedSignRecord, Session, SettingsToken, SettingsTokenStatus, SettingsTokenWithToken, SignedOut, SignRecord, SignRecordDeleted,
  SignRecordInput, SignRecordUpdate, UpdateAccountInput, UpdateKeyInput, Usage, KeyUsage, UsageQuery, UsageStatuses, UsageStep,
  CodeInput, MemberFactorsReset, Passkey, PasskeyDeleted, RecoveryCodes, SecondFactorRequirement, SecondFactors, TotpEnrollment,
} from '../../packages/client/src/owner/index.js';
import type { Equal, Expect, OptionalKeys, RequiredKeys } from '../../packages/client/examples/assert-types.js';
import { VERIFY_TOKEN_PREFIX } from '../../src/owner/email-verification.js';
import { makeOneTimeToken } from '../../src/owner/one-time-tokens.js';
import { RESET_TOKEN_PREFIX } from '../../src/owner/password-reset.js';
import { checkedClients } from '../helpers/owner-client.js';
import type { OpenApiDocument } from '../helpers/openapi.js';
import { signIn as signInOwnerSession, startOwnerGateway } from '../helpers/owner.js';
import { softPasskey } from '../helpers/webauthn.js';

/** Every method of a client: its groups' functions (`keys.roll`) and its own (`signOut`). */
function methodsOf(client: OwnerClient): string[] {
  const out: string[] = [];
  for (const [group, value] of Object.entries(client)) {
    for (const [name, fn] of Object.entries(value as object)) if (typeof fn === 'function') out.push(`${group}.${name}`);
  }
  for (const name of Object.getOwnPropertyNames(OwnerClient.prototype)) {
    const descriptor = Object.getOwnPropertyDescriptor(OwnerClient.prototype, name)!;
    if (name !== 'constructor' && typeof descriptor.value === 'function') out.push(name);
  }
  return out.sort();
}

const PASSKEY_CEREMONIES = [
  'POST /owner/v1/session/passkeys/options', 'POST /owner/v1/session/passkeys',
  'POST /owner/v1/session/passkey/options', 'POST /owner/v1/session/passkey',
];

test('every method of OwnerClient is an operation of /openapi.json, and every owner operation has a method', async (t) => {
  const gw = await startOwnerGateway(t);
  const clients = await checkedClients(gw);
  const { document, operations } = clients.conformance;
  const methods = methodsOf(clients.operator());
  assert.deepEqual(methods, Object.keys(OPERATIONS).sort(), 'the methods are the operation table');
  for (const [name, op] of Object.entries(OPERATIONS)) {
    const documented = document.paths[op.path]?.[op.method.toLowerCase()];
    assert.ok(documented !== undefined, `${name}: ${op.method} ${op.path} is in the document`);
    assert.equal(documented.operationId, op.operationId, name);
    const security = JSON.stringify(documented.security ?? []);
    if (op.audience === 'public') assert.equal(security, '[]', `${name} is public`);
    else if (op.audience === 'session') assert.ok(!security.includes('adminToken'), `${name} is for sessions only`);
    else assert.ok(security.includes('adminToken') && security.includes('sessionCookie'), `${name} takes both credentials`);
  }
  // A passkey's ceremonies need a browser's authenticator, and OwnerClient refuses to run in one.
  const covered = new Set([...Object.values(OPERATIONS).map((op) => `${op.method} ${op.path}`), ...PASSKEY_CEREMONIES]);
  // Single sign-on's navigations (303, no envelope) are a browser's, not a client's.
  const owner = operations.filter((op) => op.path.startsWith('/owner/v1/') && op.operation.responses['303'] === undefined).map((op) => op.key);
  assert.ok(owner.length >= 38);
  assert.deepEqual(owner.filter((key) => !covered.has(key)), [], 'every owner operation has a method');
});

test('each method sends its own operation, and every answer validates against its schema', async (t) => {
  // Webhooks may reach 127.0.0.1 here: the test event goes to a closed port, refused at once.
  const gw = await startOwnerGateway(t, { overrides: { webhooks: { allowPrivateNetworks: true, allowHttp: true } } });
  const clients = await checkedClients(gw);
  const op = clients.operator();
  const called = new Set<string>();
  /** Runs one method; the requests it sent (sign-ins aside) are all its operation's. */
  const expect = async <T>(name: OperationName, run: () => Promise<T> | AsyncIterable<unknown>): Promise<T> => {
    const from = clients.exchanges.length;
    const result = run();
    let value: T;
    if (Symbol.asyncIterator in result) {
      for await (const item of result) void item;
      value = undefined as T;
    } else value = await result;
    const sent = clients.exchanges.slice(from).filter((e) => name === 'signIn' || e.key !== 'POST /owner/v1/session' || e.status !== 200);
    assert.ok(sent.length > 0, `${name} sent a request`);
    for (const e of sent) assert.equal(e.key, `${OPERATIONS[name].method} ${OPERATIONS[name].path}`, `${name} sent ${e.method} ${e.path}`);
    called.add(name);
    return value;
  };

  await expect('accounts.create', () => op.accounts.create({ id: 'acct_c', name: 'C' }));
  await expect('accounts.list', () => op.accounts.list({ limit: 1 }));
  await expect('accounts.all', () => op.accounts.all({ limit: 1 }));
  await expect('accounts.get', () => op.accounts.get('acct_c'));
  await expect('accounts.update', () => op.accounts.update('acct_c', { name: 'C2' }));
  const member = await expect('members.addOwner', () => op.members.addOwner('acct_c', { email: 'c@example.com', initialPassword: 'an initial passphrase' }));
  await expect('members.list', () => op.members.list('acct_c'));
  await expect('members.all', () => op.members.all('acct_c'));
  const invite = await expect('invites.create', () => op.invites.create('acct_c', { email: 'd@example.com' }));
  await expect('invites.list', () => op.invites.list('acct_c'));
  await expect('invites.all', () => op.invites.all('acct_c'));
  const accepted = await expect('invites.accept', () => op.invites.accept({ token: invite.token, password: 'the invitee passphrase' }));
  assert.equal(accepted.accountId, 'acct_c');
  const second = await op.invites.create('acct_c', { email: 'e@example.com' });
  await expect('invites.revoke', () => op.invites.revoke('acct_c', second.invite.id));
  await expect('members.remove', () => op.members.remove('acct_c', accepted.ownerId));

  const owner = clients.owner('c@example.com', 'an initial passphrase');
  await expect('signIn', () => owner.signIn());
  await expect('getSession', () => owner.getSession());
  await expect('changePassword', () => owner.changePassword({ currentPassword: 'an initial passphrase', newPassword: 'a passphrase of my own' }));
  const sessions = await expect('listSessions', () => owner.listSessions());
  assert.equal(sessions.items.filter((s) => s.current).length, 1);
  const other = clients.owner('c@example.com', 'a passphrase of my own');
  await other.signIn();
  const otherId = (await other.listSessions()).items.find((s) => s.current)!.id;
  const ended = await expect('endSession', () => owner.endSession(otherId));
  assert.equal(ended.current, false);
  assert.deepEqual(await expect('ssoOptions', () => op.ssoOptions()), { enabled: false });
  const key = await expect('keys.create', () => owner.keys.create('acct_c', { name: 'k' }));
  await expect('keys.list', () => owner.keys.list('acct_c'));
  await expect('keys.all', () => owner.keys.all('acct_c'));
  await expect('keys.get', () => owner.keys.get('acct_c', key.key.id));
  await expect('keys.update', () => owner.keys.update('acct_c', key.key.id, { enabled: false }));
  await expect('keys.roll', () => owner.keys.roll('acct_c', key.key.id, { overlapSeconds: 0 }));
  await expect('keys.reset', () => owner.keys.reset('acct_c', key.key.id));
  await expect('keys.delete', () => owner.keys.delete('acct_c', key.key.id));
  const token = await expect('settingsTokens.create', () => owner.settingsTokens.create('acct_c', { name: 't', scopes: ['read'] }));
  await expect('settingsTokens.list', () => owner.settingsTokens.list('acct_c'));
  await expect('settingsTokens.all', () => owner.settingsTokens.all('acct_c'));
  await expect('settingsTokens.get', () => owner.settingsTokens.get('acct_c', token.settingsToken.id));
  await expect('settingsTokens.revoke', () => owner.settingsTokens.revoke('acct_c', token.settingsToken.id));
  await expect('roles.create', () => owner.roles.create('acct_c', { id: 1, slug: 'one', name: 'One', description: 'First', public: true }));
  await expect('roles.list', () => owner.roles.list('acct_c', { name: 'on' }));
  await expect('roles.all', () => owner.roles.all('acct_c', { name: 'on' }));
  await expect('roles.get', () => owner.roles.get('acct_c', 1));
  await expect('roles.replace', () => owner.roles.replace('acct_c', 1, { id: 1, slug: 'one', name: 'Uno', public: false }));
  await expect('roles.delete', () => owner.roles.delete('acct_c', 1));
  const address = `0x${'ab'.repeat(20)}`;
  await expect('signRecords.create', () => owner.signRecords.create('acct_c', { address, signedNonce: 0, signedAt: '2026-01-01T00:00:00Z', signedExpiredAt: '2026-02-01T00:00:00Z' }));
  await expect('signRecords.get', () => owner.signRecords.get('acct_c', address));
  await expect('signRecords.served', () => owner.signRecords.served('acct_c', address));
  await expect('usage.get', () => owner.usage.get('acct_c', { hours: 2 }));
  const hook = await expect('webhooks.create', () => owner.webhooks.create('acct_c', { url: 'http://127.0.0.1:9/closed', events: ['key.created'] }));
  await expect('webhooks.list', () => owner.webhooks.list('acct_c'));
  await expect('webhooks.get', () => owner.webhooks.get('acct_c', hook.webhook.id));
  await expect('webhooks.update', () => owner.webhooks.update('acct_c', hook.webhook.id, { enabled: false }));
  assert.equal((await expect('webhooks.sendTest', () => owner.webhooks.sendTest('acct_c', hook.webhook.id))).ok, false);
  assert.equal((await expect('webhooks.deliveries', () => owner.webhooks.deliveries('acct_c', hook.webhook.id))).items.length, 1);
  await expect('webhooks.rollSecret', () => owner.webhooks.rollSecret('acct_c', hook.webhook.id));
  await expect('webhooks.delete', () => owner.webhooks.delete('acct_c', hook.webhook.id));
  await expect('signRecords.replace', () => owner.signRecords.replace('acct_c', address, { signedNonce: 1, signedAt: '2026-01-01T00:00:00Z', signedExpiredAt: '2026-03-01T00:00:00Z' }));
  await expect('signRecords.delete', () => owner.signRecords.delete('acct_c', address));
  await expect('accounts.reset', () => owner.accounts.reset('acct_c'));
  await expect('audit.list', () => owner.audit.list('acct_c', { limit: 3 }));
  await expect('audit.all', () => owner.audit.all('acct_c', { limit: 3 }));
  await expect('secondFactors.getRequirement', () => owner.secondFactors.getRequirement('acct_c'));
  await expect('secondFactors.setRequirement', () => op.secondFactors.setRequirement('acct_c', { required: false }));
  const { secret } = await expect('secondFactors.startTotp', () => owner.secondFactors.startTotp());
  const { recoveryCodes } = await expect('secondFactors.confirmTotp', () => owner.secondFactors.confirmTotp({ code: TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: gw.clock.now() }) }));
  const renewed = await expect('secondFactors.regenerateRecoveryCodes', () => owner.secondFactors.regenerateRecoveryCodes({ code: recoveryCodes[0]! }));
  await expect('secondFactors.disableTotp', () => owner.secondFactors.disableTotp({ code: renewed.recoveryCodes[0]! }));
  // A passkey is registered in a browser: here by a software one, on a session of its own.
  const browser = await signInOwnerSession(gw, 'c@example.com', 'a passphrase of my own');
  const ceremony = (await browser.send('POST', '/session/passkeys/options')).body.message;
  const passkey = (await browser.send('POST', '/session/passkeys', { ceremonyId: ceremony.ceremonyId, name: 'k', response: softPasskey().register(ceremony.options, gw.url) })).body.message;
  const factors = await expect('secondFactors.get', () => owner.secondFactors.get());
  assert.deepEqual(factors.passkeys.map((p) => p.id), [passkey.id]);
  await expect('secondFactors.deletePasskey', () => owner.secondFactors.deletePasskey(passkey.id));
  await expect('secondFactors.resetMember', () => op.secondFactors.resetMember('acct_c', member.ownerId));
  await expect('signOut', () => owner.signOut());
  // The mail flows: the tokens a mail would carry (this gateway sends none), kept as the gateway keeps them.
  await expect('mail.requestPasswordReset', () => op.mail.requestPasswordReset({ email: 'c@example.com' }));
  const store = gw.services.ownerStore;
  const expiresAt = new Date(gw.clock.now() + 600_000).toISOString();
  const [reset, verify] = [makeOneTimeToken(RESET_TOKEN_PREFIX, member.ownerId), makeOneTimeToken(VERIFY_TOKEN_PREFIX, member.ownerId)];
  await store.updateOwner(member.ownerId, (o) => ({ owner: { ...o, passwordReset: { digest: reset.digest, expiresAt }, emailVerification: { digest: verify.digest, expiresAt, email: o.email } }, result: undefined }));
  await expect('mail.verifyEmail', () => op.mail.verifyEmail({ token: verify.token }));
  await expect('mail.completePasswordReset', () => op.mail.completePasswordReset({ token: reset.token, password: 'a passphrase from the mail' }));
  await expect('accounts.delete', () => op.accounts.delete('acct_c'));

  assert.deepEqual([...called].sort(), Object.keys(OPERATIONS).sort(), 'every method was called');
  assert.equal(clients.exchanges.filter((e) => e.status >= 400).length, 0, 'no call was refused');
  clients.assertConforming();
});

/*
 * The types' fields. `fields<T>()(required, optional)` compiles only when the two lists are
 * exactly T's required and optional keys; the test then holds them to the document.
 */
type Missing<T, L> = [T] extends [never] ? unknown : { missing: T; in: L };

function fields<T>() {
  return <const R extends readonly RequiredKeys<T>[], const O extends readonly OptionalKeys<T>[]>(
    required: R & Missing<Exclude<RequiredKeys<T>, R[number]>, 'required'>,
    optional: O & Missing<Exclude<OptionalKeys<T>, O[number]>, 'optional'>,
  ) => ({ required: [...required] as string[], optional: [...optional] as string[] });
}

/** Where a schema is in the document: an operation, and `body` or an answer's status, then property names (`[]`: array items). */
interface Where {
  op: string;
  at: 'body' | number;
  path?: string[];
}

const SHAPES: { name: string; where: Where; shape: { required: string[]; optional: string[] } }[] = [
  { name: 'Session', where: { op: 'GET /owner/v1/session', at: 200 }, shape: fields<Session>()(['owner', 'accounts', 'csrfToken', 'idleExpiresAt', 'expiresAt'], []) },
  { name: 'Owner', where: { op: 'GET /owner/v1/session', at: 200, path: ['owner'] }, shape: fields<Owner>()(['id', 'email', 'mustChangePassword', 'createdAt'], ['emailVerifiedAt']) },
  { name: 'Account', where: { op: 'GET /owner/v1/accounts/{accountId}', at: 200 }, shape: fields<Account>()(['id', 'name', 'enabled'], ['createdAt']) },
  { name: 'Page<Account>', where: { op: 'GET /owner/v1/accounts', at: 200 }, shape: fields<Page<Account>>()(['items'], ['nextCursor']) },
  { name: 'SignedOut', where: { op: 'DELETE /owner/v1/session', at: 200 }, shape: fields<SignedOut>()(['signedOut'], []) },
  { name: 'AccountDeleted', where: { op: 'DELETE /owner/v1/accounts/{accountId}', at: 200 }, shape: fields<AccountDeleted>()(['id', 'deleted'], []) },
  { name: 'Member', where: { op: 'POST /owner/v1/accounts/{accountId}/owners', at: 201 }, shape: fields<Member>()(['ownerId', 'email', 'addedAt'], []) },
  { name: 'MemberRemoved', where: { op: 'DELETE /owner/v1/accounts/{accountId}/members/{ownerId}', at: 200 }, shape: fields<MemberRemoved>()(['ownerId', 'removed'], []) },
  { name: 'Invite', where: { op: 'DELETE /owner/v1/accounts/{accountId}/invites/{inviteId}', at: 200 }, shape: fields<Invite>()(['id', 'email', 'createdAt', 'expiresAt', 'status'], []) },
  { name: 'InviteWithToken', where: { op: 'POST /owner/v1/accounts/{accountId}/invites', at: 201 }, shape: fields<InviteWithToken>()(['invite', 'token', 'url'], []) },
  { name: 'InviteAccepted', where: { op: 'POST /owner/v1/invites/accept', at: 200 }, shape: fields<InviteAccepted>()(['ownerId', 'accountId'], []) },
  { name: 'Key', where: { op: 'GET /owner/v1/accounts/{accountId}/keys/{keyId}', at: 200 }, shape: fields<Key>()(['id', 'apiKey', 'name', 'description', 'enabled', 'scopes'], ['createdAt', 'previousValidUntil', 'lastUsedAt', 'certificateSha256', 'requireDpop', 'compromisedAt']) },
  { name: 'Key (listed)', where: { op: 'GET /owner/v1/accounts/{accountId}/keys', at: 200, path: ['items', '[]'] }, shape: fields<Key>()(['id', 'apiKey', 'name', 'description', 'enabled', 'scopes'], ['createdAt', 'previousValidUntil', 'lastUsedAt', 'certificateSha256', 'requireDpop', 'compromisedAt']) },
  { name: 'KeyWithSecret', where: { op: 'POST /owner/v1/accounts/{accountId}/keys', at: 201 }, shape: fields<KeyWithSecret>()(['key', 'apiSecret'], []) },
  { name: 'KeyWithSecret (roll)', where: { op: 'POST /owner/v1/accounts/{accountId}/keys/{keyId}/roll', at: 200 }, shape: fields<KeyWithSecret>()(['key', 'apiSecret'], []) },
  { name: 'KeyDeleted', where: { op: 'DELETE /owner/v1/accounts/{accountId}/keys/{keyId}', at: 200 }, shape: fields<KeyDeleted>()(['id', 'deleted'], []) },
  { name: 'Reset', where: { op: 'POST /owner/v1/accounts/{accountId}/reset', at: 200 }, shape: fields<Reset>()(['scope', 'accountId', 'resetAt'], ['keyId']) },
  { name: 'Reset (key)', where: { op: 'POST /owner/v1/accounts/{accountId}/keys/{keyId}/reset', at: 200 }, shape: fields<Reset>()(['scope', 'accountId', 'resetAt'], ['keyId']) },
  { name: 'SettingsToken', where: { op: 'GET /owner/v1/accounts/{accountId}/settings-tokens/{tokenId}', at: 200 }, shape: fields<SettingsToken>()(['id', 'name', 'start', 'scopes', 'createdAt', 'status'], ['expiresAt', 'lastUsedAt', 'revokedAt']) },
  { name: 'SettingsTokenWithToken', where: { op: 'POST /owner/v1/accounts/{accountId}/settings-tokens', at: 201 }, shape: fields<SettingsTokenWithToken>()(['settingsToken', 'token'], []) },
  { name: 'Role', where: { op: 'GET /owner/v1/accounts/{accountId}/roles/{roleId}', at: 200 }, shape: fields<Role>()(['id', 'slug', 'name', 'description', 'public'], []) },
  { name: 'RoleDeleted', where: { op: 'DELETE /owner/v1/accounts/{accountId}/roles/{roleId}', at: 200 }, shape: fields<RoleDeleted>()(['id', 'deleted'], []) },
  { name: 'SignRecord', where: { op: 'GET /owner/v1/accounts/{accountId}/sign-records/{address}', at: 200 }, shape: fields<SignRecord>()(['address', 'signedNonce', 'signedAt', 'signedExpiredAt'], []) },
  { name: 'ServedSignRecord', where: { op: 'GET /owner/v1/accounts/{accountId}/sign-records/{address}/served', at: 200 }, shape: fields<ServedSignRecord>()(['did', 'signedNonce', 'signedAt', 'signedExpiredAt'], []) },
  { name: 'Usage', where: { op: 'GET /owner/v1/accounts/{accountId}/usage', at: 200 }, shape: fields<Usage>()(['from', 'to', 'bucketSeconds', 'stepSeconds', 'enabled', 'items', 'series'], []) },
  { name: 'KeyUsage', where: { op: 'GET /owner/v1/accounts/{accountId}/usage', at: 200, path: ['items', '[]'] }, shape: fields<KeyUsage>()(['keyId', 'requests', 'rateLimited', 'statuses'], []) },
  { name: 'UsageStep', where: { op: 'GET /owner/v1/accounts/{accountId}/usage', at: 200, path: ['series', '[]'] }, shape: fields<UsageStep>()(['start', 'requests', 'rateLimited', 'statuses'], []) },
  { name: 'UsageStatuses', where: { op: 'GET /owner/v1/accounts/{accountId}/usage', at: 200, path: ['items', '[]', 'statuses'] }, shape: fields<UsageStatuses>()(['1xx', '2xx', '3xx', '4xx', '5xx'], []) },
  { name: 'SignRecordDeleted', where: { op: 'DELETE /owner/v1/accounts/{accountId}/sign-records/{address}', at: 200 }, shape: fields<SignRecordDeleted>()(['address', 'deleted'], []) },
  { name: 'AuditEvent', where: { op: 'GET /owner/v1/accounts/{accountId}/audit', at: 200, path: ['items', '[]'] }, shape: fields<AuditEvent>()(['id', 'at', 'action', 'actor', 'target'], ['ip', 'requestId', 'changes']) },
  { name: 'AuditEvent.actor', where: { op: 'GET /owner/v1/accounts/{accountId}/audit', at: 200, path: ['items', '[]', 'actor'] }, shape: fields<AuditEvent['actor']>()(['type'], ['id', 'email']) },
  { name: 'AuditEvent.target', where: { op: 'GET /owner/v1/accounts/{accountId}/audit', at: 200, path: ['items', '[]', 'target'] }, shape: fields<AuditEvent['target']>()(['type', 'id'], []) },
  { name: 'ChangePasswordInput', where: { op: 'POST /owner/v1/session/password', at: 'body' }, shape: fields<ChangePasswordInput>()(['currentPassword', 'newPassword'], []) },
  { name: 'CreateAccountInput', where: { op: 'POST /owner/v1/accounts', at: 'body' }, shape: fields<CreateAccountInput>()(['name'], ['id']) },
  { name: 'UpdateAccountInput', where: { op: 'PATCH /owner/v1/accounts/{accountId}', at: 'body' }, shape: fields<UpdateAccountInput>()([], ['name', 'enabled']) },
  { name: 'AddOwnerInput', where: { op: 'POST /owner/v1/accounts/{accountId}/owners', at: 'body' }, shape: fields<AddOwnerInput>()(['email', 'initialPassword'], []) },
  { name: 'CreateInviteInput', where: { op: 'POST /owner/v1/accounts/{accountId}/invites', at: 'body' }, shape: fields<CreateInviteInput>()(['email'], []) },
  { name: 'AcceptInviteInput', where: { op: 'POST /owner/v1/invites/accept', at: 'body' }, shape: fields<AcceptInviteInput>()(['token', 'password'], []) },
  { name: 'CreateKeyInput', where: { op: 'POST /owner/v1/accounts/{accountId}/keys', at: 'body' }, shape: fields<CreateKeyInput>()(['name'], ['description', 'scopes', 'certificateSha256', 'requireDpop']) },
  { name: 'UpdateKeyInput', where: { op: 'PATCH /owner/v1/accounts/{accountId}/keys/{keyId}', at: 'body' }, shape: fields<UpdateKeyInput>()([], ['name', 'description', 'enabled', 'scopes', 'certificateSha256', 'requireDpop']) },
  { name: 'RollKeyInput', where: { op: 'POST /owner/v1/accounts/{accountId}/keys/{keyId}/roll', at: 'body' }, shape: fields<RollKeyInput>()(['overlapSeconds'], []) },
  { name: 'CreateSettingsTokenInput', where: { op: 'POST /owner/v1/accounts/{accountId}/settings-tokens', at: 'body' }, shape: fields<CreateSettingsTokenInput>()(['name'], ['scopes', 'expiresInSeconds']) },
  // The document marks `description` optional with a default: what is sent may leave it out.
  { name: 'RoleInput', where: { op: 'POST /owner/v1/accounts/{accountId}/roles', at: 'body' }, shape: fields<RoleInput>()(['id', 'slug', 'name', 'public'], ['description']) },
  { name: 'RoleInput (replace)', where: { op: 'PUT /owner/v1/accounts/{accountId}/roles/{roleId}', at: 'body' }, shape: fields<RoleInput>()(['id', 'slug', 'name', 'public'], ['description']) },
  { name: 'SignRecordInput', where: { op: 'POST /owner/v1/accounts/{accountId}/sign-records', at: 'body' }, shape: fields<SignRecordInput>()(['address', 'signedNonce', 'signedAt', 'signedExpiredAt'], []) },
  { name: 'SignRecordUpdate', where: { op: 'PUT /owner/v1/accounts/{accountId}/sign-records/{address}', at: 'body' }, shape: fields<SignRecordUpdate>()(['signedNonce', 'signedAt', 'signedExpiredAt'], []) },
  { name: 'SecondFactors', where: { op: 'GET /owner/v1/session/second-factors', at: 200 }, shape: fields<SecondFactors>()(['totp', 'recoveryCodesLeft', 'passkeys', 'required'], []) },
  { name: 'SecondFactors.totp', where: { op: 'GET /owner/v1/session/second-factors', at: 200, path: ['totp'] }, shape: fields<SecondFactors['totp']>()(['enabled'], ['enabledAt']) },
  { name: 'Passkey', where: { op: 'GET /owner/v1/session/second-factors', at: 200, path: ['passkeys', '[]'] }, shape: fields<Passkey>()(['id', 'name', 'createdAt'], ['lastUsedAt']) },
  { name: 'TotpEnrollment', where: { op: 'POST /owner/v1/session/totp', at: 200 }, shape: fields<TotpEnrollment>()(['secret', 'uri', 'qrCode'], []) },
  { name: 'RecoveryCodes', where: { op: 'POST /owner/v1/session/totp/confirmation', at: 200 }, shape: fields<RecoveryCodes>()(['recoveryCodes'], []) },
  { name: 'RecoveryCodes (new)', where: { op: 'POST /owner/v1/session/recovery-codes', at: 200 }, shape: fields<RecoveryCodes>()(['recoveryCodes'], []) },
  { name: 'CodeInput', where: { op: 'POST /owner/v1/session/totp/confirmation', at: 'body' }, shape: fields<CodeInput>()(['code'], []) },
  { name: 'SecondFactorRequirement', where: { op: 'PUT /owner/v1/accounts/{accountId}/second-factor-requirement', at: 'body' }, shape: fields<SecondFactorRequirement>()(['required'], []) },
  { name: 'MemberFactorsReset', where: { op: 'DELETE /owner/v1/accounts/{accountId}/members/{ownerId}/second-factors', at: 200 }, shape: fields<MemberFactorsReset>()(['ownerId', 'reset'], []) },
  { name: 'PasskeyDeleted', where: { op: 'DELETE /owner/v1/session/passkeys/{passkeyId}', at: 200 }, shape: fields<PasskeyDeleted>()(['deleted'], []) },
];

const INVITE_STATUSES = ['pending', 'used', 'revoked', 'expired'] as const;
const TOKEN_STATUSES = ['active', 'revoked', 'expired'] as const;
const RESET_SCOPES = ['key', 'account'] as const;
const ACTOR_TYPES = ['owner', 'operator', 'system'] as const;
export type EnumsAreTheTypes = [
  Expect<Equal<InviteStatus, typeof INVITE_STATUSES[number]>>,
  Expect<Equal<SettingsTokenStatus, typeof TOKEN_STATUSES[number]>>,
  Expect<Equal<Reset['scope'], typeof RESET_SCOPES[number]>>,
  Expect<Equal<AuditEvent['actor']['type'], typeof ACTOR_TYPES[number]>>,
  Expect<Equal<keyof PageQuery, 'limit' | 'cursor'>>,
  Expect<Equal<keyof RoleQuery, 'limit' | 'cursor' | 'name'>>,
  Expect<Equal<keyof UsageQuery, 'hours' | 'days' | 'keyId'>>,
];

type Schema = { $ref?: string; properties?: Record<string, Schema>; required?: string[]; items?: Schema; enum?: string[]; type?: string };

function resolve(document: OpenApiDocument, schema: Schema): Schema {
  if (schema.$ref === undefined) return schema;
  const name = schema.$ref.replace('#/components/schemas/', '');
  return resolve(document, (document.components as { schemas: Record<string, Schema> }).schemas[name]!);
}

function schemaAt(document: OpenApiDocument, { op, at, path = [] }: Where): Schema {
  const [method, route] = op.split(' ') as [string, string];
  const operation = document.paths[route]?.[method.toLowerCase()] as { requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, { content?: Record<string, { schema: Schema }> }> } | undefined;
  assert.ok(operation !== undefined, `${op} is documented`);
  let schema = at === 'body'
    ? operation.requestBody!.content['application/json']!.schema
    : resolve(document, operation.responses[String(at)]!.content!['application/json']!.schema).properties!.message!;
  for (const step of path) {
    schema = resolve(document, schema);
    schema = step === '[]' ? schema.items! : schema.properties![step]!;
  }
  return resolve(document, schema);
}

test("the client's types name the document's fields, required and optional alike, and its enums", async (t) => {
  const gw = await startOwnerGateway(t);
  const { document } = (await checkedClients(gw)).conformance;
  for (const { name, where, shape } of SHAPES) {
    const schema = schemaAt(document, where);
    const required = schema.required ?? [];
    const names = Object.keys(schema.properties ?? {});
    assert.deepEqual([...shape.required].sort(), [...required].sort(), `${name}: the required fields`);
    assert.deepEqual([...shape.optional].sort(), names.filter((n) => !required.includes(n)).sort(), `${name}: the optional fields`);
  }
  const enumAt = (where: Where) => schemaAt(document, where).enum;
  assert.deepEqual(enumAt({ op: 'DELETE /owner/v1/accounts/{accountId}/invites/{inviteId}', at: 200, path: ['status'] }), [...INVITE_STATUSES]);
  assert.deepEqual(enumAt({ op: 'GET /owner/v1/accounts/{accountId}/settings-tokens/{tokenId}', at: 200, path: ['status'] }), [...TOKEN_STATUSES]);
  assert.deepEqual(enumAt({ op: 'POST /owner/v1/accounts/{accountId}/reset', at: 200, path: ['scope'] }), [...RESET_SCOPES]);
  assert.deepEqual(enumAt({ op: 'GET /owner/v1/accounts/{accountId}/audit', at: 200, path: ['items', '[]', 'actor', 'type'] }), [...ACTOR_TYPES]);
  const queryOf = (route: string) => (document.paths[route]!.get as { parameters?: { in: string; name: string }[] }).parameters!.filter((p) => p.in === 'query').map((p) => p.name).sort();
  for (const route of ['/owner/v1/accounts', '/owner/v1/accounts/{accountId}/keys', '/owner/v1/accounts/{accountId}/audit', '/owner/v1/accounts/{accountId}/members']) {
    assert.deepEqual(queryOf(route), ['cursor', 'limit'], `${route}: PageQuery`);
  }
  assert.deepEqual(queryOf('/owner/v1/accounts/{accountId}/roles'), ['cursor', 'limit', 'name'], 'RoleQuery');
  assert.deepEqual(queryOf('/owner/v1/accounts/{accountId}/usage'), ['days', 'hours', 'keyId'], 'UsageQuery');
});
