/**
 * Accounts, members, owners, invites and the audit log on a real gateway: what operators and
 * owners may each do, one 404 for another account's objects, invites used once, and an audit
 * trail that records every change and never a secret.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, DEMO, postJson, sha256Hex, show, type JsonResponse } from '../helpers/gateway.js';
import { accountWithOwner, ADMIN_TOKEN, anonymous, operator, signIn, startOwnerGateway, type Client } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';

/** Every item of a listing, page by page (`limit` each); asserts each page but the last has a cursor. */
async function listAll(client: Client, path: string, limit: number): Promise<{ items: any[]; pages: number }> {
  const items: any[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const res = await client.get(`${path}?limit=${limit}${cursor !== undefined ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200, show(res));
    assert.ok(res.body.message.items.length <= limit);
    items.push(...res.body.message.items);
    cursor = res.body.message.nextCursor;
    pages += 1;
    assert.ok(pages < 100, 'the listing ends');
  } while (cursor !== undefined);
  return { items, pages };
}

function assertNotFound(res: JsonResponse, what: string): void {
  assert.equal(res.status, 404, `${what}: ${show(res)}`);
  assert.equal(res.body.message.code, 'not_found', what);
}

test('operators create, list and delete accounts; an owner gets 403 for operator actions and sees only their own accounts', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  const owner = await accountWithOwner(gw, { accountId: 'acct_mine', email: 'mine@example.com', password: PASSWORD });

  const made = await op.send('POST', '/accounts', { id: 'acct_new', name: 'New' });
  assert.equal(made.status, 201, show(made));
  assert.deepEqual(made.body.message, { id: 'acct_new', name: 'New', enabled: true, createdAt: new Date(gw.clock.now()).toISOString() });
  const again = await op.send('POST', '/accounts', { id: 'acct_new', name: 'Again' });
  assert.equal(again.status, 409, show(again));
  assert.equal(again.body.message.field, 'id');
  const generated = await op.send('POST', '/accounts', { name: 'Id chosen by the gateway' });
  assert.equal(generated.status, 201, show(generated));
  assert.match(generated.body.message.id, /^acct_[0-9A-Za-z]{16}$/);

  for (const [body, field] of [[{ name: '' }, 'name'], [{ name: 'x'.repeat(101) }, 'name'], [{ name: 'ok', color: 'red' }, 'color'], [{ id: 'has space', name: 'ok' }, 'id'], [{ name: 7 }, 'name']] as const) {
    const res = await op.send('POST', '/accounts', body);
    assert.equal(res.status, 400, `${JSON.stringify(body)}: ${show(res)}`);
    assert.equal(res.body.message.field, field);
  }
  const badLimit = await op.get('/accounts?limit=0');
  assert.equal(badLimit.status, 400);
  assert.equal(badLimit.body.message.field, 'limit');

  const all = await listAll(op, '/accounts', 2);
  const ids = all.items.map((a) => a.id);
  assert.deepEqual(ids, [...ids].sort(), 'in id order');
  assert.equal(new Set(ids).size, ids.length, 'no account twice across pages');
  for (const id of ['acct_alice', 'acct_bob', 'acct_mine', 'acct_new', generated.body.message.id]) assert.ok(ids.includes(id), `${id} is listed`);
  assert.equal(all.pages, Math.ceil(ids.length / 2));
  const alice = all.items.find((a) => a.id === 'acct_alice');
  assert.equal(alice.createdAt, undefined, 'a hand-written account has no createdAt (omitted, not null)');
  assert.equal(typeof alice.name, 'string');

  const mine = await owner.get('/accounts');
  assert.deepEqual(mine.body.message.items.map((a: { id: string }) => a.id), ['acct_mine'], 'an owner lists their own accounts only');

  for (const [method, path, body] of [
    ['POST', '/accounts', { name: 'Mine too' }],
    ['PATCH', '/accounts/acct_mine', { enabled: false }],
    ['DELETE', '/accounts/acct_mine', undefined],
    ['POST', '/accounts/acct_mine/owners', { email: 'friend@example.com', initialPassword: 'a long initial password' }],
  ] as const) {
    const res = await owner.send(method, path, body);
    assert.equal(res.status, 403, `${method} ${path}: ${show(res)}`);
    assert.equal(res.body.message.code, 'forbidden');
  }
  assert.equal((await owner.get('/accounts/acct_mine')).body.message.enabled, true, 'nothing changed');

  // Another account, a made-up one: one 404, and nothing changes.
  const notMine = [
    await owner.get('/accounts/acct_alice'),
    await owner.send('PATCH', '/accounts/acct_alice', { name: 'Taken over' }),
    await owner.get('/accounts/acct_made_up'),
    await owner.send('PATCH', '/accounts/acct_made_up', { name: 'Taken over' }),
  ];
  for (const res of notMine) {
    assertNotFound(res, 'another or a made-up account');
    assert.deepEqual(res.body, notMine[0]!.body, 'the same answer for both');
  }
  assert.notEqual((await op.get('/accounts/acct_alice')).body.message.name, 'Taken over');
  assertNotFound(await op.get('/accounts/acct_made_up'), 'an operator asking for a made-up account');

  const renamed = await owner.send('PATCH', '/accounts/acct_mine', { name: 'Renamed by its owner' });
  assert.equal(renamed.status, 200, show(renamed));
  assert.equal(renamed.body.message.name, 'Renamed by its owner');
});

test('disabling an account stops its keys and the tokens already issued at once; enabling lets keys sign in again', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  const signin = () => postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
  const before = await signin();
  assert.equal(before.status, 200, show(before));
  const token = before.body.message.accessToken as string;
  assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200, 'the token works before');

  const disabled = await op.send('PATCH', '/accounts/acct_alice', { enabled: false });
  assert.equal(disabled.status, 200, show(disabled));
  assert.equal(disabled.body.message.enabled, false);
  assert.equal((await signin()).status, 401, 'no key of a disabled account signs in');
  assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 401, 'a token issued before is refused at once');
  const bob = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.bob.apiKey, apiSecret: sha256Hex(DEMO.bob.secret) });
  assert.equal(bob.status, 200, 'another account is untouched');

  const audit = await op.get('/accounts/acct_alice/audit');
  const event = audit.body.message.items[0];
  assert.equal(event.action, 'account.update');
  assert.deepEqual(event.changes, { enabled: [true, false] });
  assert.deepEqual(event.actor, { type: 'operator' });

  gw.clock.advance(1000);
  assert.equal((await op.send('PATCH', '/accounts/acct_alice', { enabled: true })).status, 200);
  assert.equal((await signin()).status, 200, 'enabled again: its keys sign in');
});

test('a deleted account is a tombstone: 404 everywhere, its id never reused, its keys refused, homeless owners signed out', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  const added = await op.send('POST', '/accounts/acct_bob/owners', { email: 'bob.owner@example.com', initialPassword: 'initial password of bob' });
  assert.equal(added.status, 201, show(added));
  const bobOwner = await signIn(gw, 'bob.owner@example.com', 'initial password of bob');
  const invite = await op.send('POST', '/accounts/acct_bob/invites', { email: 'late@example.com' });
  assert.equal(invite.status, 201);

  const res = await op.send('DELETE', '/accounts/acct_bob');
  assert.equal(res.status, 200, show(res));
  assert.deepEqual(res.body.message, { id: 'acct_bob', deleted: true });
  assertNotFound(await op.get('/accounts/acct_bob'), 'GET a deleted account');
  assertNotFound(await op.send('PATCH', '/accounts/acct_bob', { name: 'Back' }), 'PATCH a deleted account');
  assertNotFound(await op.send('DELETE', '/accounts/acct_bob'), 'DELETE it again');
  assertNotFound(await op.get('/accounts/acct_bob/members'), 'its members');
  assert.ok(!(await listAll(op, '/accounts', 100)).items.some((a) => a.id === 'acct_bob'), 'not listed');
  const reuse = await op.send('POST', '/accounts', { id: 'acct_bob', name: 'Bob again' });
  assert.equal(reuse.status, 409, 'a deleted account\'s id is never given again');
  const signin = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.bob.apiKey, apiSecret: sha256Hex(DEMO.bob.secret) });
  assert.equal(signin.status, 401, 'its keys are gone');
  assert.equal((await bobOwner.get('/session')).status, 401, 'an owner left without accounts is signed out');
  const accept = await anonymous(gw).send('POST', '/invites/accept', { token: invite.body.message.token, password: 'a password for bob' });
  assertNotFound(accept, 'an invite to a deleted account');
});

test('members: operators add new owners (who must change the password), never an existing owner by email; the last owner stays; another account\'s members are 404', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  const first = await accountWithOwner(gw, { accountId: 'acct_team', email: 'first@example.com', password: PASSWORD });
  const stranger = await accountWithOwner(gw, { accountId: 'acct_other', email: 'stranger@example.com', password: PASSWORD });

  const addNew = await op.send('POST', '/accounts/acct_team/owners', { email: 'Second@Example.com', initialPassword: 'an initial password' });
  assert.equal(addNew.status, 201, show(addNew));
  assert.equal(addNew.body.message.email, 'second@example.com');
  const second = await signIn(gw, 'second@example.com', 'an initial password');
  assert.equal(second.signIn.body.message.owner.mustChangePassword, true);

  // An existing owner's email proves nothing (emails are not verified: whoever made that owner
  // chose it), so adding by email would hand the account to whoever holds that owner. They join
  // by an invite, whose acceptance needs their password.
  const addExisting = await op.send('POST', '/accounts/acct_team/owners', { email: 'stranger@example.com', initialPassword: 'ignored for an existing owner' });
  assert.equal(addExisting.status, 409, show(addExisting));
  assert.equal(addExisting.body.message.field, 'email');
  const strangerAgain = await signIn(gw, 'stranger@example.com', PASSWORD);
  assert.deepEqual(strangerAgain.signIn.body.message.accounts.map((a: { id: string }) => a.id), ['acct_other'], 'not added');
  assert.equal((await anonymous(gw).send('POST', '/session', { email: 'stranger@example.com', password: 'ignored for an existing owner' })).status, 401);
  const invite = await op.send('POST', '/accounts/acct_team/invites', { email: 'stranger@example.com' });
  assert.equal(invite.status, 201, show(invite));
  const joined = await anonymous(gw).send('POST', '/invites/accept', { token: invite.body.message.token, password: PASSWORD });
  assert.equal(joined.status, 200, show(joined));

  const twice = await op.send('POST', '/accounts/acct_team/owners', { email: 'first@example.com', initialPassword: 'another initial one' });
  assert.equal(twice.status, 409, show(twice));
  assert.equal(twice.body.message.field, 'email');

  const members = await listAll(first, '/accounts/acct_team/members', 2);
  assert.equal(members.items.length, 3);
  assert.deepEqual(members.items.map((m) => m.email).sort(), ['first@example.com', 'second@example.com', 'stranger@example.com']);
  const ownerIds = Object.fromEntries(members.items.map((m) => [m.email, m.ownerId]));

  // Another account's members, and made-up ones: one 404.
  const outsider = await accountWithOwner(gw, { accountId: 'acct_out', email: 'outsider@example.com', password: PASSWORD });
  assertNotFound(await outsider.get('/accounts/acct_team/members'), 'listing another account\'s members');
  assertNotFound(await outsider.send('DELETE', `/accounts/acct_team/members/${ownerIds['first@example.com']}`), 'removing another account\'s member');
  assertNotFound(await outsider.get('/accounts/acct_nope/members'), 'a made-up account');
  assertNotFound(await outsider.send('DELETE', `/accounts/acct_out/members/${ownerIds['first@example.com']}`), 'an owner who is not a member of this account');
  assert.equal((await first.get('/accounts/acct_team/members')).body.message.items.length, 3, 'nothing was removed');

  const removed = await first.send('DELETE', `/accounts/acct_team/members/${ownerIds['stranger@example.com']}`);
  assert.equal(removed.status, 200, show(removed));
  assert.deepEqual(removed.body.message, { ownerId: ownerIds['stranger@example.com'], removed: true });
  assert.equal((await stranger.get('/session')).status, 200, 'an owner who still has an account stays signed in');
  assertNotFound(await stranger.get('/accounts/acct_team'), 'a removed owner no longer reaches the account');

  assert.equal((await op.send('DELETE', `/accounts/acct_team/members/${ownerIds['second@example.com']}`)).status, 200);
  assert.equal((await second.get('/session')).status, 401, 'an owner left without accounts is signed out');
  const last = await first.send('DELETE', `/accounts/acct_team/members/${ownerIds['first@example.com']}`);
  assert.equal(last.status, 409, `the last owner: ${show(last)}`);
  const lastByOperator = await op.send('DELETE', `/accounts/acct_team/members/${ownerIds['first@example.com']}`);
  assert.equal(lastByOperator.status, 409, 'not even an operator removes the last owner');
  assert.equal((await first.get('/accounts/acct_team/members')).body.message.items.length, 1);
});

test('invites: a one-time link; accepting creates the owner, or needs the existing owner\'s password; used, revoked, expired and unknown tokens are one 404', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { inviteTtlHours: 24, publicOrigin: 'https://console.example.test' } } });
  const host = await accountWithOwner(gw, { accountId: 'acct_host', email: 'host@example.com', password: PASSWORD });
  const other = await accountWithOwner(gw, { accountId: 'acct_guest', email: 'guest@example.com', password: PASSWORD });
  const invite = async (email: string) => {
    const res = await host.send('POST', '/accounts/acct_host/invites', { email });
    assert.equal(res.status, 201, show(res));
    return res.body.message as { invite: { id: string; status: string; email: string; expiresAt: string }; token: string; url: string };
  };
  const accept = (token: string, password: string) => anonymous(gw).send('POST', '/invites/accept', { token, password });

  const created = await host.send('POST', '/accounts/acct_host/invites', { email: 'cached@example.com' });
  assert.equal(created.headers.get('cache-control'), 'no-store', 'an answer with an invite token is never cached');
  const fresh = await invite('New.Person@Example.com');
  assert.match(fresh.token, /^gwinv_[0-9A-Za-z]{43}$/);
  assert.equal(fresh.url, `https://console.example.test/owner/invite#${fresh.token}`);
  assert.equal(fresh.invite.status, 'pending');
  assert.equal(fresh.invite.email, 'new.person@example.com');
  assert.equal(Date.parse(fresh.invite.expiresAt) - gw.clock.now(), 24 * 3_600_000);
  const listed = await host.get('/accounts/acct_host/invites');
  assert.equal(listed.body.message.items[0].id, fresh.invite.id);
  assert.ok(!JSON.stringify(listed.body).includes(fresh.token), 'the token is shown once, in the creating answer only');

  const short = await accept(fresh.token, 'too short');
  assert.equal(short.status, 400);
  assert.equal(short.body.message.field, 'password');
  const accepted = await accept(fresh.token, 'my own chosen password');
  assert.equal(accepted.status, 200, show(accepted));
  assert.equal(accepted.body.message.accountId, 'acct_host');
  const newcomer = await signIn(gw, 'new.person@example.com', 'my own chosen password');
  assert.equal(newcomer.signIn.body.message.owner.id, accepted.body.message.ownerId);
  assert.equal(newcomer.signIn.body.message.owner.mustChangePassword, false, 'a chosen password need not be changed');
  assert.equal((await newcomer.get('/accounts/acct_host')).status, 200, 'the newcomer reaches the account');

  const used = await accept(fresh.token, 'my own chosen password');
  assertNotFound(used, 'a used invite');
  const revokedInvite = await invite('revoked@example.com');
  const revoked = await host.send('DELETE', `/accounts/acct_host/invites/${revokedInvite.invite.id}`);
  assert.equal(revoked.status, 200, show(revoked));
  assert.equal(revoked.body.message.status, 'revoked');
  const afterRevoke = await accept(revokedInvite.token, 'a password for revoked');
  const unknown = await accept(`gwinv_${'x'.repeat(43)}`, 'a password for nobody');
  const garbage = await accept('not even an invite token', 'a password for nobody');

  // An existing owner accepts with their own password only.
  const forGuest = await invite('guest@example.com');
  const wrongPassword = await accept(forGuest.token, 'not the guest password');
  assert.equal(wrongPassword.status, 401, show(wrongPassword));
  assert.equal((await host.get('/accounts/acct_host/invites')).body.message.items.find((i: { id: string }) => i.id === forGuest.invite.id).status, 'pending', 'a wrong password leaves the invite usable');
  const guestAccepted = await accept(forGuest.token, PASSWORD);
  assert.equal(guestAccepted.status, 200, show(guestAccepted));
  assert.equal((await other.get('/accounts/acct_host')).status, 200, 'the existing owner now reaches the account');
  const member = await host.send('POST', '/accounts/acct_host/invites', { email: 'guest@example.com' });
  assert.equal(member.status, 409, 'no invite for a member');

  const expiring = await invite('late@example.com');
  gw.clock.advance(24 * 3_600_000);
  const expired = await accept(expiring.token, 'a password for late');
  const op = operator(gw);
  assert.equal((await op.get('/accounts/acct_host/invites')).body.message.items.find((i: { id: string }) => i.id === expiring.invite.id).status, 'expired');
  const revokeExpired = await op.send('DELETE', `/accounts/acct_host/invites/${expiring.invite.id}`);
  assert.equal(revokeExpired.status, 409, 'an expired invite cannot be revoked');

  for (const [what, res] of [['used', used], ['revoked', afterRevoke], ['unknown', unknown], ['not a token', garbage], ['expired', expired]] as const) {
    assertNotFound(res, `${what} invite`);
    assert.deepEqual(res.body, used.body, `${what}: the same answer as a used invite`);
  }

  // Another account's invites: 404 under either account's path (the sessions idled out meanwhile).
  const host2 = await signIn(gw, 'host@example.com', PASSWORD);
  const hostInvites = await listAll(host2, '/accounts/acct_host/invites', 2);
  assert.equal(hostInvites.items.length, 5);
  assert.deepEqual(hostInvites.items.map((i) => i.email), ['late@example.com', 'guest@example.com', 'revoked@example.com', 'new.person@example.com', 'cached@example.com'], 'newest first');
  const pendingOne = (await host2.send('POST', '/accounts/acct_host/invites', { email: 'pending@example.com' })).body.message;
  const guestOnly = await accountWithOwner(gw, { accountId: 'acct_alone', email: 'alone@example.com', password: PASSWORD });
  assertNotFound(await guestOnly.get('/accounts/acct_host/invites'), 'listing another account\'s invites');
  assertNotFound(await guestOnly.send('POST', '/accounts/acct_host/invites', { email: 'x@example.com' }), 'inviting into another account');
  assertNotFound(await guestOnly.send('DELETE', `/accounts/acct_host/invites/${pendingOne.invite.id}`), 'revoking another account\'s invite');
  assertNotFound(await guestOnly.send('DELETE', `/accounts/acct_alone/invites/${pendingOne.invite.id}`), 'another account\'s invite under one\'s own account');
  assertNotFound(await host2.send('DELETE', '/accounts/acct_host/invites/inv_madeup'), 'a made-up invite');
  const still = (await host2.get('/accounts/acct_host/invites')).body.message.items.find((i: { id: string }) => i.id === pendingOne.invite.id);
  assert.equal(still.status, 'pending', 'nothing was revoked');
});

test('audit: every change is listed newest first and pages without gaps or repeats; another account\'s audit is 404; no secret is ever recorded or logged', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  const secrets: string[] = [ADMIN_TOKEN, PASSWORD];
  const owner = await accountWithOwner(gw, { accountId: 'acct_audit', email: 'audit@example.com', password: PASSWORD });
  secrets.push(`initial-${PASSWORD}`, owner.cookie.split('=')[1]!, owner.csrfToken);
  for (let i = 0; i < 5; i += 1) assert.equal((await owner.send('PATCH', '/accounts/acct_audit', { name: `Name ${i}` })).status, 200);
  const inv = await owner.send('POST', '/accounts/acct_audit/invites', { email: 'invited@example.com' });
  secrets.push(inv.body.message.token);
  const invitedPassword = 'the invited person chose this';
  secrets.push(invitedPassword);
  assert.equal((await anonymous(gw).send('POST', '/invites/accept', { token: inv.body.message.token, password: invitedPassword })).status, 200);
  const invited = await signIn(gw, 'invited@example.com', invitedPassword);
  secrets.push(invited.cookie.split('=')[1]!, invited.csrfToken);
  const changed = await invited.send('POST', '/session/password', { currentPassword: invitedPassword, newPassword: 'and then changed it to this' });
  assert.equal(changed.status, 200);
  secrets.push('and then changed it to this', changed.body.message.csrfToken);
  const initial = 'operator initial password here';
  secrets.push(initial);
  assert.equal((await op.send('POST', '/accounts/acct_audit/owners', { email: 'third@example.com', initialPassword: initial })).status, 201);
  assert.equal((await anonymous(gw).send('POST', '/session', { email: 'audit@example.com', password: 'a wrong guess at it' })).status, 401);
  secrets.push('a wrong guess at it');

  const { items, pages } = await listAll(owner, '/accounts/acct_audit/audit', 3);
  assert.equal(items.length, 13, `every event, across ${pages} pages: ${JSON.stringify(items.map((e) => e.action))}`);
  const ids = items.map((e) => e.id);
  assert.equal(new Set(ids).size, ids.length, 'no event twice');
  const actions = items.map((e) => e.action);
  assert.deepEqual(actions, [
    'member.add',
    'owner.password_change',
    'member.add', 'invite.accept',
    'invite.create',
    'account.update', 'account.update', 'account.update', 'account.update', 'account.update',
    'owner.password_change',
    'member.add',
    'account.create',
  ], 'every change, newest first (the events of one change in the order made)');
  const renames = items.filter((e) => e.action === 'account.update').map((e) => e.changes.name[1]);
  assert.deepEqual(renames, ['Name 4', 'Name 3', 'Name 2', 'Name 1', 'Name 0']);
  const update = items.find((e) => e.action === 'account.update');
  assert.deepEqual(update.actor, { type: 'owner', id: owner.signIn.body.message.owner.id, email: 'audit@example.com' }, 'an owner is named by id and email');
  assert.deepEqual(items.find((e) => e.action === 'account.create').actor, { type: 'operator' });
  assert.deepEqual(update.target, { type: 'account', id: 'acct_audit' });
  assert.equal(update.ip, '127.0.0.1');
  assert.equal(typeof update.requestId, 'string');

  const stranger = await accountWithOwner(gw, { accountId: 'acct_stranger', email: 'stranger@example.com', password: PASSWORD });
  assertNotFound(await stranger.get('/accounts/acct_audit/audit'), 'another account\'s audit');
  assertNotFound(await stranger.get('/accounts/acct_nope/audit'), 'a made-up account\'s audit');
  assert.equal((await op.get('/accounts/acct_audit/audit')).status, 200, 'an operator reads any account\'s audit');

  const recorded = JSON.stringify(items);
  const logged = gw.logs.join('\n');
  for (const secret of secrets) {
    assert.ok(!recorded.includes(secret), `the audit trail holds no secret (${secret.slice(0, 8)}…)`);
    assert.ok(!logged.includes(secret), `the log holds no secret (${secret.slice(0, 8)}…)`);
  }
  assert.ok(!/\$argon2|sha256:/.test(recorded + logged), 'nor a hash or digest');
  assert.ok(logged.includes('"action":"invite.accept"'), 'audit events are logged too');
});


test('bad input is a 400 naming the field: emails that are not, short passwords, unknown fields', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  const owner = await accountWithOwner(gw, { accountId: 'acct_input', email: 'input@example.com', password: PASSWORD });
  const cases: [Client, string, string, unknown, string][] = [
    [op, 'POST', '/accounts/acct_input/owners', { email: 'not-an-email', initialPassword: 'long enough initial password' }, 'email'],
    [op, 'POST', '/accounts/acct_input/owners', { email: 'ok@example.com', initialPassword: 'short one' }, 'initialPassword'],
    [op, 'POST', '/accounts/acct_input/owners', { email: `${'a'.repeat(250)}@example.com`, initialPassword: 'long enough initial password' }, 'email'],
    [op, 'POST', '/accounts/acct_input/owners', { email: 'ok@example.com', initialPassword: 'x'.repeat(257) }, 'initialPassword'],
    [owner, 'POST', '/accounts/acct_input/invites', { email: 'nope' }, 'email'],
    [owner, 'POST', '/accounts/acct_input/invites', { email: 'ok@example.com', role: 'admin' }, 'role'],
    [owner, 'PATCH', '/accounts/acct_input', { name: 'x', enabled: 'yes' }, 'enabled'],
    [anonymous(gw), 'POST', '/session', { email: 'nope', password: PASSWORD }, 'email'],
    [anonymous(gw), 'POST', '/session', { email: 'input@example.com', password: PASSWORD, remember: true }, 'remember'],
    [anonymous(gw), 'POST', '/invites/accept', { token: 'gwinv_x', password: 5 }, 'password'],
    [owner, 'GET', '/accounts/acct_input/audit?limit=101', undefined, 'limit'],
    [owner, 'GET', '/accounts/acct_input/members?limit=2&sort=asc', undefined, 'sort'],
    [owner, 'GET', '/accounts/acct_input/invites?cursor=inv_unknown', undefined, 'cursor'],
  ];
  for (const [who, method, path, body, field] of cases) {
    const res = method === 'GET' ? await who.get(path) : await who.send(method, path, body);
    assert.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${show(res)}`);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message.field, field, `${method} ${path}: ${show(res)}`);
  }
  assert.equal((await owner.get('/accounts/acct_input/members')).body.message.items.length, 1, 'no owner was added');
  const operatorSession = await op.get('/session');
  assertNotFound(operatorSession, 'an operator has no session');
});

test('an invite accepted by several at once is used once', async (t) => {
  const gw = await startOwnerGateway(t);
  const host = await accountWithOwner(gw, { accountId: 'acct_race', email: 'race@example.com', password: PASSWORD });
  const made = await host.send('POST', '/accounts/acct_race/invites', { email: 'racer@example.com' });
  const token = made.body.message.token as string;
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => anonymous(gw).send('POST', '/invites/accept', { token, password: `racer password number ${i}` })));
  const statuses = answers.map((a) => a.status);
  assert.equal(statuses.filter((s) => s === 200).length, 1, `one acceptance: ${statuses.join(', ')}`);
  assert.ok(statuses.every((s) => s === 200 || s === 404 || s === 409), statuses.join(', '));
  const members = (await host.get('/accounts/acct_race/members')).body.message.items;
  assert.deepEqual(members.map((m: { email: string }) => m.email).sort(), ['race@example.com', 'racer@example.com']);
  const winner = answers.findIndex((a) => a.status === 200);
  await signIn(gw, 'racer@example.com', `racer password number ${winner}`);
});
