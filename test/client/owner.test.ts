/**
 * OwnerClient (`@auth-gateway/client/owner`) against real in-process gateways: an operator's
 * script and an owner's, each doing the whole round on an account, with every secret the
 * client is handed proven on the public API; sessions held, replaced after they end, never
 * signed in again in a loop; CSRF satisfied; errors typed. Every answer the clients receive is
 * held to the gateway's /openapi.json (helpers/owner-client.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AbortError, AuthenticationError, ConfigurationError, NotFoundError, OwnerClient, PermissionError,
} from '../../packages/client/src/owner/index.js';
import type { AuditEvent, OwnerClient as OwnerClientType } from '../../packages/client/src/owner/index.js';
import { call, postJson, sha256Hex, show, type TestGateway } from '../helpers/gateway.js';
import { checkedClients, type CheckedClients } from '../helpers/owner-client.js';
import { ADMIN_TOKEN, startOwnerGateway } from '../helpers/owner.js';

const ADDRESS = '0xDE709F2102306220921060314715629080E2FB77';

/** The secret signs in at /api/signin (sent as its SHA-256, as every client does). */
async function signsIn(gw: TestGateway, apiKey: string, secret: string): Promise<number> {
  const res = await postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: sha256Hex(secret) });
  return res.status;
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/**
 * The round both scripts make on an account they may manage: a key that signs in, a settings
 * token that reads /api/roles, a role seen there, a sign record, a roll with overlap, a reset,
 * a deletion, and the audit log read through the iterator, page by page.
 */
async function manageAccount(gw: TestGateway, client: OwnerClientType, accountId: string): Promise<void> {
  const made = await client.keys.create(accountId, { name: 'ci', description: 'The CI runner', scopes: ['read'] });
  assert.match(made.apiSecret, /^gwsk_[0-9A-Za-z]{43}$/);
  assert.match(made.key.apiKey, /^gwk_/);
  assert.equal(await signsIn(gw, made.key.apiKey, made.apiSecret), 200, 'the secret shown once signs in');
  // The sign-in is the key's last use (a memory gateway records it before answering).
  assert.deepEqual(await client.keys.get(accountId, made.key.id), { ...made.key, lastUsedAt: new Date(gw.clock.now()).toISOString() });
  const renamed = await client.keys.update(accountId, made.key.id, { name: 'ci-renamed' });
  assert.equal(renamed.name, 'ci-renamed');
  assert.ok((await client.keys.list(accountId)).items.some((k) => k.id === made.key.id));

  const settings = await client.settingsTokens.create(accountId, { name: 'dashboard', expiresInSeconds: 3600 });
  assert.match(settings.token, /^gwst_[0-9A-Za-z]{49}$/);
  assert.equal(settings.settingsToken.status, 'active');
  assert.equal(settings.token.slice(0, 9), settings.settingsToken.start);
  const before = await call(`${gw.url}/api/roles`, { token: settings.token });
  assert.equal(before.status, 200, show(before));

  const role = await client.roles.create(accountId, { id: 7, slug: 'night-auditor', name: 'Night auditor', public: false });
  assert.deepEqual(role, { id: 7, slug: 'night-auditor', name: 'Night auditor', description: '', public: false });
  const listed = await call(`${gw.url}/api/roles?name=night`, { token: settings.token });
  assert.equal(listed.status, 200, show(listed));
  assert.deepEqual(listed.body.message.items, [{ id: 7, slug: 'night-auditor', name: 'Night auditor', description: '', public: 0 }], 'the role is served by /api/roles');
  const moved = await client.roles.replace(accountId, 7, { id: 3, slug: 'night-auditor', name: 'Night auditor', description: 'Reads the night reports.', public: true });
  assert.equal(moved.id, 3);
  assert.deepEqual(await client.roles.get(accountId, 3), moved);
  assert.deepEqual((await client.roles.list(accountId, { name: 'AUDIT' })).items, [moved]);
  assert.deepEqual(await collect(client.roles.all(accountId, { limit: 1 })), [moved]);

  const record = await client.signRecords.create(accountId, { address: ADDRESS, signedNonce: 8, signedAt: '2026-06-01T10:00:00+02:00', signedExpiredAt: '2026-07-01T10:00:00Z' });
  assert.deepEqual(record, { address: ADDRESS.toLowerCase(), signedNonce: 8, signedAt: '2026-06-01T08:00:00.000Z', signedExpiredAt: '2026-07-01T10:00:00.000Z' });
  const replaced = await client.signRecords.replace(accountId, ADDRESS, { signedNonce: 9, signedAt: '2026-06-01T08:00:00Z', signedExpiredAt: '2026-08-01T00:00:00Z' });
  assert.equal(replaced.signedNonce, 9);
  assert.deepEqual(await client.signRecords.get(accountId, ADDRESS.toLowerCase()), replaced);
  const sign = await call(`${gw.url}/api/sign?address=${ADDRESS}`, { token: settings.token });
  assert.equal(sign.status, 200, show(sign));
  assert.equal(sign.body.message.signedNonce, 9);
  assert.deepEqual(await client.signRecords.delete(accountId, ADDRESS), { address: ADDRESS.toLowerCase(), deleted: true });
  await assert.rejects(client.signRecords.get(accountId, ADDRESS), NotFoundError);

  // A roll with an overlap: both secrets sign in until it ends.
  const rolled = await client.keys.roll(accountId, made.key.id, { overlapSeconds: 600 });
  assert.notEqual(rolled.apiSecret, made.apiSecret);
  assert.equal(rolled.key.apiKey, made.key.apiKey);
  assert.ok(rolled.key.previousValidUntil !== undefined, 'the key shows until when the old secret works');
  assert.equal(await signsIn(gw, made.key.apiKey, rolled.apiSecret), 200, 'the new secret signs in');
  assert.equal(await signsIn(gw, made.key.apiKey, made.apiSecret), 200, 'the old secret signs in during the overlap');

  const keyReset = await client.keys.reset(accountId, made.key.id);
  assert.deepEqual({ scope: keyReset.scope, accountId: keyReset.accountId, keyId: keyReset.keyId }, { scope: 'key', accountId, keyId: made.key.id });
  assert.deepEqual(await client.keys.delete(accountId, made.key.id), { id: made.key.id, deleted: true });
  assert.equal(await signsIn(gw, made.key.apiKey, rolled.apiSecret), 401, 'a deleted key no longer signs in');
  await assert.rejects(client.keys.get(accountId, made.key.id), NotFoundError);

  const revoked = await client.settingsTokens.revoke(accountId, settings.settingsToken.id);
  assert.equal(revoked.status, 'revoked');
  assert.equal((await client.settingsTokens.get(accountId, settings.settingsToken.id)).status, 'revoked');
  assert.equal((await call(`${gw.url}/api/roles`, { token: settings.token })).status, 401, 'a revoked settings token is refused');
  assert.ok((await collect(client.settingsTokens.all(accountId))).some((s) => s.id === settings.settingsToken.id));
  assert.deepEqual(await client.roles.delete(accountId, 3), { id: 3, deleted: true });
  assert.equal((await client.accounts.reset(accountId)).scope, 'account');

  // The iterator walks every page (2 events at a time) and meets what one big page holds.
  const events = await collect(client.audit.all(accountId, { limit: 2 }));
  const page = await client.audit.list(accountId, { limit: 100 });
  assert.equal(page.nextCursor, undefined);
  assert.deepEqual(events, page.items);
  const actions = events.map((e: AuditEvent) => e.action);
  for (const action of ['key.create', 'key.update', 'key.roll', 'key.delete', 'settings_token.create', 'role.create', 'sign_record.create']) {
    assert.ok(actions.includes(action), `the audit log holds ${action}: ${actions.join(', ')}`);
  }
  assert.ok(events.length > 2, 'more than one page was read');
}

test('an operator script: account, owner, key, settings token, role, roll, delete and the audit log', async (t) => {
  const gw = await startOwnerGateway(t);
  const clients = await checkedClients(gw);
  const op = clients.operator();

  const account = await op.accounts.create({ id: 'acct_ops', name: 'Ops Ltd' });
  assert.deepEqual({ id: account.id, name: account.name, enabled: account.enabled }, { id: 'acct_ops', name: 'Ops Ltd', enabled: true });
  assert.deepEqual(await op.accounts.get('acct_ops'), account);
  const member = await op.members.addOwner('acct_ops', { email: 'Founder@Example.com', initialPassword: 'a long initial passphrase' });
  assert.equal(member.email, 'founder@example.com');
  assert.deepEqual((await op.members.list('acct_ops')).items.map((m) => m.ownerId), [member.ownerId]);
  const invite = await op.invites.create('acct_ops', { email: 'colleague@example.com' });
  assert.match(invite.token, /^gwinv_/);
  assert.equal((await op.invites.revoke('acct_ops', invite.invite.id)).status, 'revoked');
  assert.deepEqual((await collect(op.invites.all('acct_ops'))).map((i) => i.status), ['revoked']);

  await manageAccount(gw, op, 'acct_ops');

  const accounts = await collect(op.accounts.all({ limit: 1 }));
  assert.ok(accounts.some((a) => a.id === 'acct_ops') && accounts.length > 1, 'the iterator lists every account');
  assert.equal((await op.accounts.update('acct_ops', { enabled: false })).enabled, false);
  assert.deepEqual(await op.accounts.delete('acct_ops'), { id: 'acct_ops', deleted: true });
  await assert.rejects(op.accounts.get('acct_ops'), NotFoundError);
  assert.deepEqual(await op.signOut(), { signedOut: true }, 'an admin token has no session to end');

  for (const e of clients.exchanges) {
    assert.equal(e.headers.authorization, `Bearer ${ADMIN_TOKEN}`, `${e.method} ${e.path} carries the admin token`);
    assert.equal(e.headers.cookie, undefined);
  }
  assert.ok(!clients.exchanges.some((e) => e.path === '/owner/v1/session'), 'an operator never signs in');
  clients.assertConforming();
});

test('an owner with email and password: initial password, the same round, and a new sign-in once the session ends', async (t) => {
  const gw = await startOwnerGateway(t);
  const clients = await checkedClients(gw);
  const op = clients.operator();
  await op.accounts.create({ id: 'acct_own', name: 'Own Ltd' });
  await op.members.addOwner('acct_own', { email: 'owner@example.com', initialPassword: 'an initial passphrase' });

  const owner = clients.owner('owner@example.com', 'an initial passphrase');
  assert.equal(clients.signIns().length, 0, 'nothing is sent before the first call');
  const first = await owner.getSession();
  assert.equal(first.owner.mustChangePassword, true);
  assert.deepEqual(first.accounts.map((a) => a.id), ['acct_own']);
  await assert.rejects(owner.keys.list('acct_own'), (err: unknown) => err instanceof PermissionError && err.code === 'password_change_required');
  const changed = await owner.changePassword({ currentPassword: 'an initial passphrase', newPassword: 'correct horse battery staple' });
  assert.equal(changed.owner.mustChangePassword, false);
  assert.equal(clients.signIns().length, 1);

  await manageAccount(gw, owner, 'acct_own');
  assert.equal((await owner.accounts.update('acct_own', { name: 'Own Ltd (renamed)' })).name, 'Own Ltd (renamed)');
  assert.deepEqual((await owner.accounts.list()).items.map((a) => a.id), ['acct_own']);
  await assert.rejects(owner.accounts.delete('acct_own'), (err: unknown) => err instanceof PermissionError && err.code === 'forbidden');
  assert.equal(clients.signIns().length, 1, 'one session served every call, the password change included');

  // The session idles out (30 minutes unused): the next call signs in again, with the new password.
  gw.clock.advance(31 * 60 * 1000);
  const key = await owner.keys.create('acct_own', { name: 'after the idle time' });
  assert.equal(await signsIn(gw, key.key.apiKey, key.apiSecret), 200);
  const signIns = clients.signIns();
  assert.equal(signIns.length, 2, 'one new sign-in');
  assert.equal(signIns[1]!.status, 200);
  const creations = clients.exchanges.filter((e) => e.method === 'POST' && e.path === '/owner/v1/accounts/acct_own/keys');
  assert.deepEqual(creations.slice(-2).map((e) => e.status), [401, 201], 'the refused creation was sent again once, after the sign-in');

  // CSRF: every change made with the session carried its token and no Origin; none was refused.
  const changes = clients.exchanges.filter((e) => e.headers.cookie !== undefined && e.method !== 'GET');
  assert.ok(changes.length >= 15, `${changes.length} changes`);
  for (const e of changes) {
    assert.match(e.headers['x-csrf-token'] ?? '', /.+/, `${e.method} ${e.path} carries the CSRF token`);
    assert.equal(e.headers.origin, undefined);
  }
  assert.deepEqual(clients.exchanges.filter((e) => e.status === 403).map((e) => e.code), ['password_change_required', 'forbidden'], 'the refusals asked for, and no csrf_failed');

  assert.deepEqual(await owner.signOut(), { signedOut: true });
  const out = clients.exchanges.at(-1)!;
  assert.deepEqual([out.method, out.path, out.status], ['DELETE', '/owner/v1/session', 200]);
  assert.deepEqual(await owner.signOut(), { signedOut: true }, 'a second sign-out has nothing to end');
  assert.equal(clients.exchanges.at(-1), out, 'and sends nothing');
  assert.equal((await owner.accounts.get('acct_own')).id, 'acct_own', 'a call after signing out signs in again');
  assert.equal(clients.signIns().length, 3);
  clients.assertConforming();
});

test("another account's ids answer NotFoundError, to an owner as to a made-up id", async (t) => {
  const gw = await startOwnerGateway(t);
  const clients = await checkedClients(gw);
  const op = clients.operator();
  for (const id of ['acct_a', 'acct_b']) {
    await op.accounts.create({ id, name: id });
    await op.members.addOwner(id, { email: `${id}@example.com`, initialPassword: 'an initial passphrase' });
  }
  const theirKey = await op.keys.create('acct_b', { name: 'b' });
  const theirToken = await op.settingsTokens.create('acct_b', { name: 'b' });
  const a = clients.owner('acct_a@example.com', 'an initial passphrase');
  await a.changePassword({ currentPassword: 'an initial passphrase', newPassword: 'a passphrase of my own' });

  for (const attempt of [
    () => a.accounts.get('acct_b'),
    () => a.keys.list('acct_b'),
    () => a.keys.get('acct_a', theirKey.key.id),
    () => a.keys.delete('acct_a', theirKey.key.id),
    () => a.settingsTokens.revoke('acct_a', theirToken.settingsToken.id),
    () => a.audit.list('acct_b'),
    () => a.keys.get('acct_a', 'key_made_up'),
  ]) {
    await assert.rejects(attempt(), (err: unknown) => err instanceof NotFoundError && err.code === 'not_found' && err.status === 404 && typeof err.requestId === 'string');
  }
  assert.equal((await op.keys.get('acct_b', theirKey.key.id)).enabled, true, "the other account's key is untouched");
  assert.equal((await op.settingsTokens.get('acct_b', theirToken.settingsToken.id)).status, 'active');
  clients.assertConforming();
});

test('a session the gateway keeps refusing is signed in again once, not in a loop; a wrong password is thrown at once', async (t) => {
  const gw = await startOwnerGateway(t);
  const setup = await checkedClients(gw);
  await setup.operator().accounts.create({ id: 'acct_loop', name: 'Loop' });
  await setup.operator().members.addOwner('acct_loop', { email: 'loop@example.com', initialPassword: 'an initial passphrase' });

  // A cookie that never reaches the gateway (a proxy dropping it): every call is session_required.
  const dropping = await checkedClients(gw, { tamper: (headers) => headers.delete('cookie') });
  const owner = dropping.owner('loop@example.com', 'an initial passphrase');
  await assert.rejects(owner.accounts.list(), (err: unknown) => err instanceof AuthenticationError && err.code === 'session_required');
  assert.equal(dropping.signIns().length, 2, 'the first sign-in and one more');
  assert.equal(dropping.exchanges.filter((e) => e.path === '/owner/v1/accounts').length, 2, 'the call was sent twice');

  const wrong = setup.owner('loop@example.com', 'not the passphrase at all');
  await assert.rejects(wrong.accounts.list(), (err: unknown) => err instanceof AuthenticationError && err.code === 'invalid_credentials');
  assert.equal(setup.signIns().length, 1, 'a wrong password is not retried');
  assert.ok(!setup.exchanges.some((e) => e.path === '/owner/v1/accounts' && e.method === 'GET'), 'and the call is not sent');
  setup.assertConforming();
  dropping.assertConforming();
});

test('calls waiting for an ended session share one sign-in', async (t) => {
  const gw = await startOwnerGateway(t);
  const clients = await checkedClients(gw);
  const op = clients.operator();
  await op.accounts.create({ id: 'acct_many', name: 'Many' });
  await op.members.addOwner('acct_many', { email: 'many@example.com', initialPassword: 'an initial passphrase' });
  const owner = clients.owner('many@example.com', 'an initial passphrase');
  await owner.changePassword({ currentPassword: 'an initial passphrase', newPassword: 'a passphrase of my own' });

  // Twenty calls before any session: one sign-in.
  await Promise.all(Array.from({ length: 10 }, () => owner.accounts.get('acct_many')));
  assert.equal(clients.signIns().length, 1);
  gw.clock.advance(31 * 60 * 1000);
  const made = await Promise.all(Array.from({ length: 10 }, (_, i) => owner.roles.create('acct_many', { id: i, slug: `r${i}`, name: `Role ${i}`, public: true })));
  assert.deepEqual(made.map((r) => r.id), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(clients.signIns().length, 2, 'ten refused calls, one new sign-in');
  assert.equal((await owner.roles.list('acct_many', { limit: 100 })).items.length, 10, 'each creation happened once');
  clients.assertConforming();
});

test('over TLS (a https publicOrigin) the __Host- cookie is kept and sent back, and no Origin is sent', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { publicOrigin: 'https://gw.example.com' } } });
  const clients = await checkedClients(gw);
  const op = clients.operator();
  await op.accounts.create({ id: 'acct_tls', name: 'TLS' });
  await op.members.addOwner('acct_tls', { email: 'tls@example.com', initialPassword: 'an initial passphrase' });
  const owner = clients.owner('tls@example.com', 'an initial passphrase');
  await owner.changePassword({ currentPassword: 'an initial passphrase', newPassword: 'a passphrase of my own' });
  const key = await owner.keys.create('acct_tls', { name: 'tls' });
  assert.equal(await signsIn(gw, key.key.apiKey, key.apiSecret), 200);
  const sent = clients.exchanges.filter((e) => e.headers.cookie !== undefined);
  assert.ok(sent.length >= 2);
  for (const e of sent) assert.match(e.headers.cookie!, /^__Host-gw_session=[^;]+$/);
  clients.assertConforming();
});

test('options: credentials checked in the constructor, session methods for owners only, per-call abort', async (t) => {
  const gw = await startOwnerGateway(t);
  const clients = await checkedClients(gw);
  const make = (options: object) => () => new OwnerClient({ baseUrl: gw.url, ...options } as never);
  assert.throws(make({}), ConfigurationError);
  assert.throws(make({ adminToken: ADMIN_TOKEN, email: 'a@example.com', password: 'x'.repeat(20) }), ConfigurationError);
  assert.throws(make({ adminToken: `gwst_${'a'.repeat(49)}` }), (err: unknown) => err instanceof ConfigurationError && /gwadm_/.test(err.description));
  assert.throws(make({ email: 'a@example.com' }), ConfigurationError);
  assert.throws(() => new OwnerClient({ baseUrl: 'not a url', adminToken: ADMIN_TOKEN }), ConfigurationError);

  const op = clients.operator();
  await assert.rejects(op.signIn(), ConfigurationError);
  await assert.rejects(op.getSession(), ConfigurationError);
  await assert.rejects(op.changePassword({ currentPassword: 'x', newPassword: 'y' }), ConfigurationError);
  const aborted = new AbortController();
  aborted.abort();
  await assert.rejects(op.keys.list('acct_alice', {}, { signal: aborted.signal }), AbortError);
  assert.equal(clients.exchanges.length, 0, 'nothing was sent');

  const owner = clients.owner('nobody@example.com', 'a long enough passphrase');
  await assert.rejects(owner.accounts.list({}, { signal: aborted.signal }), AbortError);
  assert.equal(clients.exchanges.length, 0, 'an aborted call does not sign in');
  assert.deepEqual((await op.keys.list('acct_alice', { limit: 1 }, { timeoutMs: 5000, retry: false })).items.length, 1);
  clients.assertConforming();
});
