/**
 * Passkeys over the owner API on a real gateway (issue 30), answered by a software passkey
 * (test/helpers/webauthn.ts; the browser's own are in test/dashboard/second-factors.test.ts):
 * several registered and listed, a ceremony answered once and not after its five minutes, a
 * counter that goes back refused, a passkey as the second factor only for its own owner,
 * passwordless sign-in, removal, and ceremony starts throttled per address.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { show, type TestGateway } from '../helpers/gateway.js';
import { accountWithOwner, anonymous, type OwnerSession } from '../helpers/owner.js';
import { startOwnerGateway } from '../helpers/owner.js';
import { softPasskey, type SoftPasskey } from '../helpers/webauthn.js';

const PASSWORD = 'correct horse battery staple';

async function register(gw: TestGateway, owner: OwnerSession, passkey: SoftPasskey, name: string): Promise<string> {
  const started = await owner.send('POST', '/session/passkeys/options');
  assert.equal(started.status, 200, show(started));
  const { ceremonyId, options } = started.body.message;
  const done = await owner.send('POST', '/session/passkeys', { ceremonyId, name, response: passkey.register(options, gw.url) });
  assert.equal(done.status, 201, show(done));
  return done.body.message.id as string;
}

async function ceremony(gw: TestGateway, address = '203.0.113.1'): Promise<{ ceremonyId: string; options: Record<string, unknown> }> {
  const started = await anonymous(gw).send('POST', '/session/passkey/options', undefined, { 'x-forwarded-for': address });
  assert.equal(started.status, 200, show(started));
  return started.body.message;
}

test('passkeys: several registered, passwordless and second-factor sign-in, one-time ceremonies, counters, removal', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { proxy: { trustedProxies: ['127.0.0.1'] }, limits: { mode: 'enforce' } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_pk', email: 'pk@example.com', password: PASSWORD });
  const other = await accountWithOwner(gw, { accountId: 'acct_pk2', email: 'other@example.com', password: PASSWORD });
  const laptop = softPasskey();
  const phone = softPasskey();
  const stranger = softPasskey();
  const laptopId = await register(gw, owner, laptop, 'laptop');
  await register(gw, owner, phone, 'phone');
  await register(gw, other, stranger, 'theirs');
  const listed = (await owner.get('/session/second-factors')).body.message;
  assert.deepEqual(listed.passkeys.map((p: { name: string }) => p.name), ['laptop', 'phone']);
  assert.ok(!JSON.stringify(listed).includes('publicKey'), 'no key material is answered');

  await t.test('a registration ceremony is answered once', async () => {
    const started = (await owner.send('POST', '/session/passkeys/options')).body.message;
    const again = softPasskey();
    const response = again.register(started.options, gw.url);
    assert.equal((await owner.send('POST', '/session/passkeys', { ceremonyId: started.ceremonyId, name: 'x', response })).status, 201);
    const replay = await owner.send('POST', '/session/passkeys', { ceremonyId: started.ceremonyId, name: 'y', response });
    assert.equal(replay.status, 400, show(replay));
    assert.equal(replay.body.message.field, 'ceremonyId');
    const extra = (await owner.get('/session/second-factors')).body.message.passkeys.find((p: { name: string }) => p.name === 'x');
    assert.equal((await owner.send('DELETE', `/session/passkeys/${extra.id}`)).status, 200);
  });

  await t.test('passwordless: a passkey alone signs in; its ceremony is used once, and not after five minutes', async () => {
    const { ceremonyId, options } = await ceremony(gw);
    const response = laptop.authenticate(options, gw.url);
    const signedIn = await anonymous(gw).send('POST', '/session/passkey', { ceremonyId, response });
    assert.equal(signedIn.status, 200, show(signedIn));
    assert.equal(signedIn.body.message.owner.email, 'pk@example.com');
    assert.ok(signedIn.headers.getSetCookie().some((c) => c.startsWith('gw_session=')));
    const replay = await anonymous(gw).send('POST', '/session/passkey', { ceremonyId, response });
    assert.equal(replay.status, 401, show(replay));
    assert.equal(replay.body.message.code, 'invalid_credentials');

    const late = await ceremony(gw);
    gw.clock.advance(5 * 60_000 + 1);
    const expired = await anonymous(gw).send('POST', '/session/passkey', { ceremonyId: late.ceremonyId, response: laptop.authenticate(late.options, gw.url) });
    assert.equal(expired.status, 401, show(expired));
  });

  await t.test('a counter that goes back (a cloned authenticator) is refused', async () => {
    const { ceremonyId, options } = await ceremony(gw);
    const cloned = await anonymous(gw).send('POST', '/session/passkey', { ceremonyId, response: laptop.authenticate(options, gw.url, 1) });
    assert.equal(cloned.status, 401, show(cloned));
  });

  await t.test('after the password: mfa_required, then a passkey of this owner, never another owner\'s', async () => {
    const bare = await anonymous(gw).send('POST', '/session', { email: 'pk@example.com', password: PASSWORD }, { 'x-forwarded-for': '203.0.113.2' });
    assert.equal(bare.body.message.code, 'mfa_required', show(bare));
    const theirs = await ceremony(gw, '203.0.113.2');
    const foreign = await anonymous(gw).send('POST', '/session', { email: 'pk@example.com', password: PASSWORD, passkey: { ceremonyId: theirs.ceremonyId, response: stranger.authenticate(theirs.options, gw.url) } }, { 'x-forwarded-for': '203.0.113.2' });
    assert.equal(foreign.status, 401, show(foreign));
    assert.equal(foreign.body.message.code, 'mfa_required');
    const mine = await ceremony(gw, '203.0.113.2');
    const ok = await anonymous(gw).send('POST', '/session', { email: 'pk@example.com', password: PASSWORD, passkey: { ceremonyId: mine.ceremonyId, response: phone.authenticate(mine.options, gw.url) } }, { 'x-forwarded-for': '203.0.113.2' });
    assert.equal(ok.status, 200, show(ok));
  });

  await t.test('removed, a passkey signs in no more; the audit names both changes', async () => {
    assert.equal((await owner.send('DELETE', `/session/passkeys/${laptopId}`)).status, 200);
    assert.equal((await owner.send('DELETE', `/session/passkeys/${laptopId}`)).status, 404);
    const { ceremonyId, options } = await ceremony(gw);
    const gone = await anonymous(gw).send('POST', '/session/passkey', { ceremonyId, response: laptop.authenticate(options, gw.url) });
    assert.equal(gone.status, 401, show(gone));
    const actions = (await owner.get('/accounts/acct_pk/audit')).body.message.items.map((e: { action: string }) => e.action);
    assert.ok(actions.includes('owner.passkey_add') && actions.includes('owner.passkey_remove'), actions.join(', '));
  });
});

test('passkey ceremonies are throttled per address', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { proxy: { trustedProxies: ['127.0.0.1'] }, limits: { mode: 'enforce', ownerSignIn: { perAddress: [{ limit: 3, seconds: 60 }] } } } });
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await anonymous(gw).send('POST', '/session/passkey/options', undefined, { 'x-forwarded-for': '198.51.100.9' })).status);
  assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
  assert.equal((await anonymous(gw).send('POST', '/session/passkey/options', undefined, { 'x-forwarded-for': '198.51.100.10' })).status, 200, 'another address is not held back');
});

test('a Host header that names no host gets a 400 from the passkey ceremonies, never a 500', async (t) => {
  const gw = await startOwnerGateway(t);
  const { port } = new URL(gw.url);
  const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/owner/v1/session/passkey/options', headers: { host: 'x:99999' } }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
  assert.equal(answer.status, 400, answer.body);
  assert.equal(JSON.parse(answer.body).message.code, 'invalid_request');
});
