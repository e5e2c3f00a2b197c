/**
 * Owner sessions on a real gateway: the cookie and its attributes, idle and absolute timeouts,
 * sign-out, password changes, the CSRF and origin checks, the admin token, the initial-password
 * gate, one answer for every failed sign-in, and the sign-in lockout.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { show } from '../helpers/gateway.js';
import { ManualClock } from '../helpers/clock.js';
import { accountWithOwner, anonymous, operator, sessionCookie, sessionFrom, signIn, startOwnerGateway } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';
const OTHER_PASSWORD = 'a different passphrase, long enough';

test('sign-in sets an HttpOnly, SameSite=Strict, Path=/ cookie that ends with the session, and answers the session', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { sessionMaxSeconds: 7200 } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_one', email: 'One@Example.com', password: PASSWORD });
  const res = await anonymous(gw).send('POST', '/session', { email: 'one@example.COM', password: PASSWORD });
  assert.equal(res.status, 200, show(res));
  const cookie = sessionCookie(res)!;
  const attributes = cookie.split(';').map((a) => a.trim().toLowerCase());
  assert.match(attributes[0]!, /^gw_session=[0-9a-z]{43}$/i, 'plain HTTP: the plain name, a 43-character id');
  assert.ok(attributes.includes('httponly'), cookie);
  assert.ok(attributes.includes('samesite=strict'), cookie);
  assert.ok(attributes.includes('path=/'), cookie);
  assert.ok(!attributes.includes('secure'), 'no Secure over plain HTTP without an https public origin');
  assert.ok(!attributes.some((a) => a.startsWith('domain=')), cookie);
  // koa's cookies writes the lifetime as Expires (now + sessionMaxSeconds).
  const expires = Date.parse(attributes.find((a) => a.startsWith('expires='))!.slice('expires='.length));
  assert.ok(Math.abs(expires - (Date.now() + 7200_000)) < 5000, `the cookie lives as long as the session: ${cookie}`);

  assert.equal(res.headers.get('cache-control'), 'no-store', 'an answer with a session (and its CSRF token) is never cached');
  const session = res.body.message;
  assert.equal(session.owner.email, 'one@example.com', 'emails are kept lowercase');
  assert.equal(session.owner.mustChangePassword, false);
  assert.deepEqual(session.accounts.map((a: { id: string }) => a.id), ['acct_one']);
  assert.match(session.csrfToken, /^[0-9A-Za-z]{43}$/);
  assert.equal(Date.parse(session.expiresAt) - gw.clock.now(), 7200_000);
  assert.ok(!JSON.stringify(res.body).includes(cookie.split(';')[0]!.split('=')[1]!), 'the session id is in the cookie only');

  const again = sessionFrom(gw, res);
  const got = await again.get('/session');
  assert.equal(got.status, 200, show(got));
  assert.equal(got.body.message.owner.id, session.owner.id);
  assert.equal(got.body.message.csrfToken, session.csrfToken);
  assert.notEqual(owner.cookie, again.cookie, 'each sign-in is its own session');
});

test('with an https public origin the cookie is Secure and named __Host-, even when TLS ends before the gateway', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { publicOrigin: 'https://gw.example.test' } } });
  await accountWithOwner(gw, { accountId: 'acct_tls', email: 'tls@example.com', password: PASSWORD });
  const res = await anonymous(gw).send('POST', '/session', { email: 'tls@example.com', password: PASSWORD }, { origin: 'https://gw.example.test' });
  assert.equal(res.status, 200, show(res));
  const cookie = sessionCookie(res)!;
  const attributes = cookie.split(';').map((a) => a.trim().toLowerCase());
  assert.match(cookie, /^__Host-gw_session=/);
  assert.ok(attributes.includes('secure') && attributes.includes('path=/') && attributes.includes('httponly') && attributes.includes('samesite=strict'), cookie);
  const session = sessionFrom(gw, res);
  assert.equal((await session.get('/session')).status, 200, 'the __Host- cookie is read back');
  const out = await session.send('DELETE', '/session', undefined, { origin: 'https://gw.example.test' });
  assert.equal(out.status, 200, show(out));
  assert.match(sessionCookie(out)!, /^__Host-gw_session=;.*secure/i, 'cleared with the same name and Secure (else a browser ignores it)');
});

test('a session unused for the idle time ends; use keeps it alive until its absolute end', async (t) => {
  const clock = new ManualClock(Date.now());
  const gw = await startOwnerGateway(t, { clock, overrides: { owner: { sessionIdleSeconds: 60, sessionMaxSeconds: 300 } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_idle', email: 'idle@example.com', password: PASSWORD });
  const idle = await signIn(gw, 'idle@example.com', PASSWORD);

  clock.advance(45_000);
  assert.equal((await owner.get('/session')).status, 200, 'used after 45 s');
  clock.advance(45_000);
  const touched = await owner.get('/session');
  assert.equal(touched.status, 200, `used again 45 s later (90 s after sign-in): alive, ${show(touched)}`);
  assert.ok(Date.parse(touched.body.message.idleExpiresAt) > clock.now() + 30_000, 'the idle deadline moved on');
  const ended = await idle.get('/session');
  assert.equal(ended.status, 401, `unused for 90 s: ended, ${show(ended)}`);
  assert.equal(ended.body.message.code, 'session_required');

  for (let at = 90; at < 290; at += 40) {
    clock.advance(40_000);
    assert.equal((await owner.get('/session')).status, 200, `used every 40 s: alive at ${at + 40} s`);
  }
  clock.advance(20_000);
  const expired = await owner.get('/session');
  assert.equal(expired.status, 401, `past the 300 s absolute end, however used: ${show(expired)}`);
});

test('sign-out ends the session and clears the cookie', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_out', email: 'out@example.com', password: PASSWORD });
  const other = await signIn(gw, 'out@example.com', PASSWORD);
  const res = await owner.send('DELETE', '/session');
  assert.equal(res.status, 200, show(res));
  assert.deepEqual(res.body.message, { signedOut: true });
  const cleared = sessionCookie(res)!;
  assert.match(cleared, /^gw_session=;/);
  assert.match(cleared, /expires=Thu, 01 Jan 1970/i);
  assert.match(cleared, /httponly/i);
  const after = await owner.get('/session');
  assert.equal(after.status, 401, show(after));
  assert.equal((await other.get('/session')).status, 200, 'the owner\'s other session is not ended by a sign-out');
});

test('a wrong current password is refused (401) and changes nothing', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_pw', email: 'pw@example.com', password: PASSWORD });
  const res = await owner.send('POST', '/session/password', { currentPassword: 'not the password at all', newPassword: OTHER_PASSWORD });
  assert.equal(res.status, 401, show(res));
  assert.equal(res.body.message.code, 'invalid_credentials');
  assert.equal((await owner.get('/session')).status, 200, 'the session lives on');
  await signIn(gw, 'pw@example.com', PASSWORD);
  const refused = await anonymous(gw).send('POST', '/session', { email: 'pw@example.com', password: OTHER_PASSWORD });
  assert.equal(refused.status, 401, 'the new password was not set');
  const short = await owner.send('POST', '/session/password', { currentPassword: PASSWORD, newPassword: 'fourteen chars' });
  assert.equal(short.status, 400, show(short));
  assert.equal(short.body.message.field, 'newPassword');
});

test('a password change ends every other session of the owner and starts a new one', async (t) => {
  const gw = await startOwnerGateway(t);
  const a = await accountWithOwner(gw, { accountId: 'acct_change', email: 'change@example.com', password: PASSWORD });
  const b = await signIn(gw, 'change@example.com', PASSWORD);
  const bystander = await accountWithOwner(gw, { accountId: 'acct_by', email: 'by@example.com', password: PASSWORD });
  const res = await a.send('POST', '/session/password', { currentPassword: PASSWORD, newPassword: OTHER_PASSWORD });
  assert.equal(res.status, 200, show(res));
  const c = sessionFrom(gw, res);
  assert.notEqual(c.cookie, a.cookie);
  assert.notEqual(c.csrfToken, a.csrfToken);
  assert.equal((await a.get('/session')).status, 401, 'the session that changed it is replaced');
  assert.equal((await b.get('/session')).status, 401, 'another session of the owner ended');
  assert.equal((await c.get('/session')).status, 200, 'the new session works');
  assert.equal((await bystander.get('/session')).status, 200, 'another owner\'s session is untouched');
  assert.equal((await anonymous(gw).send('POST', '/session', { email: 'change@example.com', password: PASSWORD })).status, 401, 'the old password is gone');
  await signIn(gw, 'change@example.com', OTHER_PASSWORD);
});

test('a change without the session\'s CSRF token, or with a wrong one, is 403 csrf_failed and writes nothing', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_csrf', email: 'csrf@example.com', password: PASSWORD });
  const auditBefore = (await owner.get('/accounts/acct_csrf/audit')).body.message.items.length;
  for (const headers of [{ 'x-csrf-token': '' }, { 'x-csrf-token': 'x'.repeat(43) }, { 'x-csrf-token': `${owner.csrfToken}x` }]) {
    const res = await owner.send('PATCH', '/accounts/acct_csrf', { name: 'Renamed' }, headers);
    assert.equal(res.status, 403, `${JSON.stringify(headers)}: ${show(res)}`);
    assert.equal(res.body.message.code, 'csrf_failed');
    const invite = await owner.send('POST', '/accounts/acct_csrf/invites', { email: 'someone@example.com' }, headers);
    assert.equal(invite.status, 403, show(invite));
    const out = await owner.send('DELETE', '/session', undefined, headers);
    assert.equal(out.status, 403, 'sign-out needs the token too (no forced logout from another site)');
  }
  const account = await owner.get('/accounts/acct_csrf');
  assert.equal(account.body.message.name, 'Account acct_csrf', 'the name did not change');
  assert.equal((await owner.get('/accounts/acct_csrf/invites')).body.message.items.length, 0, 'no invite was made');
  assert.equal((await owner.get('/accounts/acct_csrf/audit')).body.message.items.length, auditBefore, 'nothing was recorded');
  assert.equal((await owner.get('/session')).status, 200, 'still signed in');
  const right = await owner.send('PATCH', '/accounts/acct_csrf', { name: 'Renamed' });
  assert.equal(right.status, 200, `with the token it works: ${show(right)}`);
});

test('a change from a foreign origin or a cross-site fetch is 403, sign-in included; the own origin passes', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { publicOrigin: 'http://gw.example.test' } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_origin', email: 'origin@example.com', password: PASSWORD });
  const foreign: Record<string, string>[] = [{ origin: 'http://evil.example' }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'https://gw.example.test' }];
  for (const headers of foreign) {
    const res = await owner.send('PATCH', '/accounts/acct_origin', { name: 'Evil' }, headers);
    assert.equal(res.status, 403, `${JSON.stringify(headers)}: ${show(res)}`);
    assert.equal(res.body.message.code, 'csrf_failed');
    const login = await anonymous(gw).send('POST', '/session', { email: 'origin@example.com', password: PASSWORD }, headers);
    assert.equal(login.status, 403, `login CSRF: ${JSON.stringify(headers)} ${show(login)}`);
    assert.equal(sessionCookie(login), undefined, 'no cookie is set');
  }
  assert.equal((await owner.get('/accounts/acct_origin')).body.message.name, 'Account acct_origin');
  const own = await owner.send('PATCH', '/accounts/acct_origin', { name: 'Fine' }, { origin: 'http://gw.example.test', 'sec-fetch-site': 'same-origin' });
  assert.equal(own.status, 200, show(own));
});

test('a wrong or malformed admin token is 401; none at all is 401 session_required', async (t) => {
  const gw = await startOwnerGateway(t);
  for (const token of [`gwadm_${'B'.repeat(43)}`, 'not-an-admin-token', '']) {
    const res = await operator(gw, token).get('/accounts');
    assert.equal(res.status, 401, `${JSON.stringify(token)}: ${show(res)}`);
    assert.equal(res.body.message.code, 'invalid_credentials');
  }
  const none = await anonymous(gw).get('/accounts');
  assert.equal(none.status, 401);
  assert.equal(none.body.message.code, 'session_required');
  assert.equal((await operator(gw).get('/accounts')).status, 200, 'the configured token works');
});

test('an initial password must be changed first: everything else is 403 password_change_required', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  assert.equal((await op.send('POST', '/accounts', { id: 'acct_gate', name: 'Gate' })).status, 201);
  const initial = 'the operator chose this one';
  const added = await op.send('POST', '/accounts/acct_gate/owners', { email: 'gate@example.com', initialPassword: initial });
  assert.equal(added.status, 201, show(added));
  const owner = await signIn(gw, 'gate@example.com', initial);
  assert.equal(owner.signIn.body.message.owner.mustChangePassword, true);
  for (const [method, path, body] of [['GET', '/accounts'], ['GET', '/accounts/acct_gate'], ['POST', '/accounts/acct_gate/invites', { email: 'x@example.com' }]] as const) {
    const res = method === 'GET' ? await owner.get(path) : await owner.send(method, path, body);
    assert.equal(res.status, 403, `${method} ${path}: ${show(res)}`);
    assert.equal(res.body.message.code, 'password_change_required');
  }
  assert.equal((await owner.get('/session')).status, 200, 'the session itself can be read');
  const changed = await owner.send('POST', '/session/password', { currentPassword: initial, newPassword: PASSWORD });
  assert.equal(changed.status, 200, show(changed));
  assert.equal(changed.body.message.owner.mustChangePassword, false);
  const after = sessionFrom(gw, changed);
  assert.equal((await after.get('/accounts')).status, 200, 'after the change everything works');
});

test('an unknown email and a wrong password get byte-identical answers', async (t) => {
  const gw = await startOwnerGateway(t);
  await accountWithOwner(gw, { accountId: 'acct_same', email: 'same@example.com', password: PASSWORD });
  const raw = async (email: string): Promise<{ status: number; text: string; headers: string[] }> => {
    const res = await fetch(`${gw.url}/owner/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'wrong wrong wrong wrong' }) });
    const skip = new Set(['date', 'x-request-id']);
    return { status: res.status, text: await res.text(), headers: [...res.headers].filter(([k]) => !skip.has(k)).map(([k, v]) => `${k}: ${v}`) };
  };
  const wrong = await raw('same@example.com');
  const unknown = await raw('nobody@example.com');
  assert.equal(wrong.status, 401);
  assert.deepEqual(unknown, wrong, 'status, headers and body alike');
  assert.match(wrong.text, /invalid_credentials/);
});

test('repeated failed sign-ins lock the email out (429) for clients without its device cookie, the right password included', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { limits: { mode: 'enforce', ownerSignIn: { failuresPerEmail: [{ limit: 3, seconds: 60 }] } } } });
  await accountWithOwner(gw, { accountId: 'acct_lock', email: 'lock@example.com', password: PASSWORD });
  const attempt = (password: string, email = 'lock@example.com') => anonymous(gw).send('POST', '/session', { email, password });
  for (let i = 0; i < 3; i += 1) assert.equal((await attempt('wrong wrong wrong wrong')).status, 401, `failure ${i + 1}`);
  const locked = await attempt('wrong wrong wrong wrong');
  assert.equal(locked.status, 429, show(locked));
  assert.ok(locked.headers.get('retry-after') !== null, 'Retry-After says when to come back');
  const right = await attempt(PASSWORD);
  assert.equal(right.status, 429, `locked out whatever the password: ${show(right)}`);
  assert.equal(sessionCookie(right), undefined);
  // Case does not get round the lockout: the email is counted lowercase.
  assert.equal((await attempt(PASSWORD, 'LOCK@example.com')).status, 429);
  gw.clock.advance(61_000);
  assert.equal((await attempt(PASSWORD)).status, 200, 'after the window the right password signs in');
});
