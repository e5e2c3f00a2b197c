/**
 * An owner's own sessions over the owner API: listOwnSessions (created, last seen, address,
 * user agent, the current one marked; never the id or its digest), endOwnSession (audited
 * owner.session_end; another owner's or an unknown session is not found), the per-owner cap
 * (owner.maxSessionsPerOwner: the oldest ends, audited owner.session_evict, another owner's
 * sessions untouched), and a password change leaving only the new session. One gateway.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { show } from '../helpers/gateway.js';
import { accountWithOwner, anonymous, operator, sessionFrom, type OwnerSession } from '../helpers/owner.js';
import { startOwnerGateway } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';

async function signInAs(gw: Parameters<typeof sessionFrom>[0], email: string, userAgent: string): Promise<OwnerSession> {
  const res = await anonymous(gw).send('POST', '/session', { email, password: PASSWORD }, { 'user-agent': userAgent });
  assert.equal(res.status, 200, show(res));
  return sessionFrom(gw, res);
}

async function actions(gw: Parameters<typeof sessionFrom>[0], accountId: string, action: string): Promise<{ target: { id: string }; actor: { id?: string } }[]> {
  const res = await operator(gw).get(`/accounts/${accountId}/audit?limit=100`);
  assert.equal(res.status, 200, show(res));
  return res.body.message.items.filter((e: { action: string }) => e.action === action);
}

test('owners list and end their own sessions; a sign-in past the cap ends the oldest, no one else\'s', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { maxSessionsPerOwner: 3 } } });
  // The password change accountWithOwner makes leaves each with one session.
  const alice = await accountWithOwner(gw, { accountId: 'acct_sess_a', email: 'alice.sessions@example.com', password: PASSWORD });
  const bob = await accountWithOwner(gw, { accountId: 'acct_sess_b', email: 'bob.sessions@example.com', password: PASSWORD });
  const bobPhone = await signInAs(gw, 'bob.sessions@example.com', 'Bob\'s phone');

  await t.test('listOwnSessions: newest first, the current one marked, what each was made with, no secret', async () => {
    gw.clock.advance(1000);
    const laptop = await signInAs(gw, 'alice.sessions@example.com', `Laptop ${'x'.repeat(400)}`);
    const res = await laptop.get('/sessions');
    assert.equal(res.status, 200, show(res));
    const items = res.body.message.items;
    assert.equal(items.length, 2);
    assert.deepEqual(items.map((s: { current: boolean }) => s.current), [true, false]);
    const [mine, other] = items;
    assert.match(mine.id, /^ses_[0-9a-f]{24}$/);
    assert.equal(mine.ip, '127.0.0.1');
    assert.equal(mine.userAgent, `Laptop ${'x'.repeat(249)}`, 'the user agent is kept to 256 characters');
    assert.equal(Date.parse(mine.createdAt), gw.clock.now());
    assert.equal(mine.lastSeenAt, mine.createdAt);
    assert.ok(Date.parse(other.createdAt) < Date.parse(mine.createdAt));
    const text = JSON.stringify(res.body);
    for (const session of [laptop, alice]) {
      assert.ok(!text.includes(session.cookie.split('=')[1]!), 'no session id in the answer');
      assert.ok(!text.includes(session.csrfToken), 'no CSRF token of a session in the answer');
    }
    // Bob sees his own two only.
    const bobs = (await bobPhone.get('/sessions')).body.message.items;
    assert.equal(bobs.length, 2);
    assert.ok(!bobs.some((s: { id: string }) => items.some((a: { id: string }) => a.id === s.id)));
  });

  await t.test('endOwnSession ends that session only (audited owner.session_end); another owner\'s is not found', async () => {
    const listed = (await alice.get('/sessions')).body.message.items;
    const laptopId = listed.find((s: { current: boolean }) => !s.current).id;
    const foreign = (await bobPhone.get('/sessions')).body.message.items[0].id;
    const refused = await alice.send('DELETE', `/sessions/${foreign}`);
    assert.equal(refused.status, 404, show(refused));
    assert.equal((await bobPhone.get('/session')).status, 200, 'bob\'s session lives');
    const unknown = await alice.send('DELETE', `/sessions/ses_${'0'.repeat(24)}`);
    assert.equal(unknown.status, 404, show(unknown));
    const malformed = await alice.send('DELETE', '/sessions/not%20a%20session');
    assert.equal(malformed.status, 400, show(malformed));

    const ended = await alice.send('DELETE', `/sessions/${laptopId}`);
    assert.equal(ended.status, 200, show(ended));
    assert.equal(ended.body.message.id, laptopId);
    assert.deepEqual((await alice.get('/sessions')).body.message.items.map((s: { id: string }) => s.id), listed.filter((s: { id: string }) => s.id !== laptopId).map((s: { id: string }) => s.id));
    const events = await actions(gw, 'acct_sess_a', 'owner.session_end');
    assert.deepEqual(events.map((e) => e.target.id), [laptopId]);
    assert.ok(!JSON.stringify(events).includes(alice.cookie.split('=')[1]!));
    // Again: it has ended.
    assert.equal((await alice.send('DELETE', `/sessions/${laptopId}`)).status, 404);
    // Without the CSRF token: refused like every change.
    assert.equal((await alice.send('DELETE', `/sessions/${laptopId}`, undefined, { 'x-csrf-token': 'wrong' })).status, 403);
  });

  await t.test('a sign-in past owner.maxSessionsPerOwner ends the owner\'s oldest (owner.session_evict), no other owner\'s', async () => {
    const before = (await alice.get('/sessions')).body.message.items.map((s: { id: string }) => s.id);
    assert.equal(before.length, 1);
    const made: OwnerSession[] = [];
    for (const n of [1, 2, 3, 4]) {
      gw.clock.advance(1000);
      made.push(await signInAs(gw, 'alice.sessions@example.com', `Browser ${n}`));
    }
    // Cap 3: the first session (alice's own, the oldest) and Browser 1 have ended.
    assert.equal((await alice.get('/session')).status, 401, 'the oldest session ended');
    assert.equal((await made[0]!.get('/session')).status, 401, 'then the next oldest');
    const listed = (await made[3]!.get('/sessions')).body.message.items;
    assert.deepEqual(listed.map((s: { userAgent: string }) => s.userAgent), ['Browser 4', 'Browser 3', 'Browser 2']);
    const evicted = await actions(gw, 'acct_sess_a', 'owner.session_evict');
    assert.equal(evicted.length, 2);
    assert.ok(evicted.some((e) => e.target.id === before[0]), 'the event names the ended session');
    // Bob's sessions live.
    assert.equal((await bob.get('/session')).status, 200);
    assert.equal((await bobPhone.get('/sessions')).body.message.items.length, 2);
    assert.deepEqual(await actions(gw, 'acct_sess_b', 'owner.session_evict'), []);
  });

  await t.test('a password change leaves only its new session; operators have no session list', async () => {
    const res = await bob.send('POST', '/session/password', { currentPassword: PASSWORD, newPassword: `${PASSWORD}!` });
    assert.equal(res.status, 200, show(res));
    const fresh = sessionFrom(gw, res);
    const items = (await fresh.get('/sessions')).body.message.items;
    assert.equal(items.length, 1);
    assert.equal(items[0].current, true);
    assert.equal((await bobPhone.get('/session')).status, 401);
    assert.equal((await operator(gw).get('/sessions')).status, 404);
    assert.equal((await anonymous(gw).get('/sessions')).status, 401);
  });
});
