/**
 * The owner API's API keys against a real gateway (memory state): a created key signs in at
 * /api/signin, its secret is shown once and never again (listings, reads, audit, log), a roll
 * keeps the old secret for its overlap only, and disabling or deleting a key stops the access
 * tokens it already issued at once. Another account's key is a 404 for an owner.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../src/errors/errors.js';
import { hashSecret, secretDigest } from '../../src/domain/secrets.js';
import { call, DEMO, postJson, sha256Hex, show, signIn, type TestGateway } from '../helpers/gateway.js';
import { operator, OWNER_A, OWNER_B, ownerActor, startOwnerGateway } from '../helpers/owner-keys.js';

const ALICE = '/accounts/acct_alice';

async function signInWith(gw: TestGateway, apiKey: string, secret: string) {
  return postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: sha256Hex(secret) });
}

async function rolesStatus(gw: TestGateway, accessToken: string): Promise<number> {
  return (await call(`${gw.url}/api/roles`, { token: accessToken })).status;
}

async function createKey(gw: TestGateway, body: Record<string, unknown> = { name: 'ci' }) {
  const res = await operator(gw).post(`${ALICE}/keys`, body);
  assert.equal(res.status, 201, show(res));
  return res.body.message as { key: { id: string; apiKey: string }; apiSecret: string };
}

test('a created key signs in with its secret, which no later answer, audit event or log line shows', async (t) => {
  const gw = await startOwnerGateway(t);
  const api = operator(gw);
  const { key, apiSecret } = await createKey(gw, { name: 'deploy bot', description: 'CI', scopes: ['deploy'] });
  assert.match(key.id, /^key_[0-9A-Za-z]{16}$/);
  assert.match(key.apiKey, /^gwk_[0-9A-Za-z]{24}$/);
  assert.match(apiSecret, /^gwsk_[0-9A-Za-z]{43}$/);
  assert.deepEqual(key, { id: key.id, apiKey: key.apiKey, name: 'deploy bot', description: 'CI', enabled: true, scopes: ['deploy'], createdAt: new Date(gw.clock.now()).toISOString() });

  const signedIn = await signInWith(gw, key.apiKey, apiSecret);
  assert.equal(signedIn.status, 200, show(signedIn));
  assert.equal(await rolesStatus(gw, signedIn.body.message.accessToken), 200);
  assert.equal((await signInWith(gw, key.apiKey, `${apiSecret}x`)).status, 401, 'another secret does not sign in');

  const digest = secretDigest(hashSecret(apiSecret));
  const list = await api.get(`${ALICE}/keys`);
  const one = await api.get(`${ALICE}/keys/${key.id}`);
  assert.equal(list.status, 200, show(list));
  assert.equal(one.status, 200, show(one));
  assert.ok(list.body.message.items.some((k: { id: string }) => k.id === key.id));
  assert.deepEqual(one.body.message, { ...key, lastUsedAt: new Date(gw.clock.now()).toISOString() }, 'the same key, last used at its sign-in');
  for (const [what, text] of [['list', JSON.stringify(list.body)], ['get', JSON.stringify(one.body)], ['log', gw.logs.join('\n')]] as const) {
    assert.ok(!text.includes(apiSecret), `${what} holds no secret`);
    assert.ok(!text.includes(digest), `${what} holds no digest`);
    assert.ok(!text.includes('secretDigest'), `${what} names no digest field`);
  }
  // Every audit event is also logged (owner/audit.ts), so the log check above covers them.
  const auditLines = gw.logs.filter((line) => line.includes('"audit"'));
  assert.ok(auditLines.some((line) => line.includes('"key.create"') && line.includes(key.id)), 'the creation is audited');
});

test('roll: the old secret signs in during the overlap, not after; overlap 0 ends it at once', async (t) => {
  const gw = await startOwnerGateway(t);
  const api = operator(gw);
  const { key, apiSecret: first } = await createKey(gw);
  const rolled = await api.post(`${ALICE}/keys/${key.id}/roll`, { overlapSeconds: 60 });
  assert.equal(rolled.status, 200, show(rolled));
  const second: string = rolled.body.message.apiSecret;
  assert.notEqual(second, first);
  assert.equal(rolled.body.message.key.apiKey, key.apiKey, 'the apiKey stays');
  assert.equal(rolled.body.message.key.id, key.id, 'the key id stays');
  assert.equal(rolled.body.message.key.previousValidUntil, new Date(gw.clock.now() + 60_000).toISOString());

  assert.equal((await signInWith(gw, key.apiKey, first)).status, 200, 'the old secret during the overlap');
  assert.equal((await signInWith(gw, key.apiKey, second)).status, 200, 'the new secret');
  gw.clock.advance(59_999);
  assert.equal((await signInWith(gw, key.apiKey, first)).status, 200, 'the old secret at the overlap\'s last ms');
  gw.clock.advance(1);
  assert.equal((await signInWith(gw, key.apiKey, first)).status, 401, 'the old secret once the overlap is over');
  assert.equal((await signInWith(gw, key.apiKey, second)).status, 200, 'the new one still');
  assert.equal((await api.get(`${ALICE}/keys/${key.id}`)).body.message.previousValidUntil, new Date(gw.clock.now()).toISOString());

  const again = await api.post(`${ALICE}/keys/${key.id}/roll`, { overlapSeconds: 0 });
  assert.equal(again.status, 200, show(again));
  assert.equal(again.body.message.key.previousValidUntil, undefined, 'no overlap: nothing to show');
  assert.equal((await signInWith(gw, key.apiKey, second)).status, 401, 'overlap 0: the replaced secret stops at once');
  assert.equal((await signInWith(gw, key.apiKey, again.body.message.apiSecret)).status, 200);

  for (const body of [{ overlapSeconds: -1 }, { overlapSeconds: 2_592_001 }, { overlapSeconds: 1.5 }, {}, { overlapSeconds: 1, extra: true }]) {
    const res = await api.post(`${ALICE}/keys/${key.id}/roll`, body);
    assert.equal(res.status, 400, `${JSON.stringify(body)}: ${show(res)}`);
    assert.equal(res.body.message.field, 'extra' in body ? 'extra' : 'overlapSeconds');
  }
});

test('disable and delete stop the key\'s access tokens at once; enabled again it signs in, old tokens stay dead', async (t) => {
  const gw = await startOwnerGateway(t);
  const api = operator(gw);
  const { key, apiSecret } = await createKey(gw);
  const before = (await signInWith(gw, key.apiKey, apiSecret)).body.message.accessToken as string;
  const untouched = (await signIn(gw, DEMO.alice)).accessToken;
  gw.clock.advance(1);

  const disabled = await api.patch(`${ALICE}/keys/${key.id}`, { enabled: false });
  assert.equal(disabled.status, 200, show(disabled));
  assert.equal(disabled.body.message.enabled, false);
  assert.equal(await rolesStatus(gw, before), 401, 'a token issued before the disable is refused at once');
  assert.equal(await rolesStatus(gw, untouched), 200, 'another key\'s token is not');
  assert.equal((await signInWith(gw, key.apiKey, apiSecret)).status, 401, 'a disabled key does not sign in');

  gw.clock.advance(1);
  const enabled = await api.patch(`${ALICE}/keys/${key.id}`, { enabled: true, name: 'renamed' });
  assert.equal(enabled.status, 200, show(enabled));
  assert.deepEqual([enabled.body.message.enabled, enabled.body.message.name], [true, 'renamed']);
  const after = await signInWith(gw, key.apiKey, apiSecret);
  assert.equal(after.status, 200, 'enabled again, it signs in');
  assert.equal(await rolesStatus(gw, after.body.message.accessToken), 200);
  assert.equal(await rolesStatus(gw, before), 401, 'the token from before the disable stays dead');

  gw.clock.advance(1);
  const deleted = await api.delete(`${ALICE}/keys/${key.id}`);
  assert.equal(deleted.status, 200, show(deleted));
  assert.deepEqual(deleted.body.message, { id: key.id, deleted: true });
  assert.equal(await rolesStatus(gw, after.body.message.accessToken), 401, 'a deleted key\'s token is refused at once');
  assert.equal((await signInWith(gw, key.apiKey, apiSecret)).status, 401);
  assert.equal((await api.get(`${ALICE}/keys/${key.id}`)).status, 404);
  assert.equal(await rolesStatus(gw, untouched), 200);
});

test('resets: one key\'s tokens, or the whole account\'s', async (t) => {
  const gw = await startOwnerGateway(t);
  const api = operator(gw);
  const { key, apiSecret } = await createKey(gw);
  const mine = (await signInWith(gw, key.apiKey, apiSecret)).body.message.accessToken as string;
  const other = (await signIn(gw, DEMO.alice)).accessToken;
  const bob = (await signIn(gw, DEMO.bob)).accessToken;
  gw.clock.advance(1);

  const keyReset = await api.post(`${ALICE}/keys/${key.id}/reset`);
  assert.equal(keyReset.status, 200, show(keyReset));
  assert.deepEqual(keyReset.body.message, { scope: 'key', accountId: 'acct_alice', keyId: key.id, resetAt: new Date(gw.clock.now()).toISOString() });
  assert.deepEqual([await rolesStatus(gw, mine), await rolesStatus(gw, other)], [401, 200]);

  gw.clock.advance(1);
  const accountReset = await api.post(`${ALICE}/reset`);
  assert.equal(accountReset.status, 200, show(accountReset));
  assert.deepEqual(accountReset.body.message, { scope: 'account', accountId: 'acct_alice', resetAt: new Date(gw.clock.now()).toISOString() });
  assert.deepEqual([await rolesStatus(gw, other), await rolesStatus(gw, bob)], [401, 200]);
});

test('bad input is a 400 naming the field', async (t) => {
  const gw = await startOwnerGateway(t);
  const api = operator(gw);
  const cases: [unknown, string][] = [
    [{}, 'name'],
    [{ name: '' }, 'name'],
    [{ name: 'x'.repeat(101) }, 'name'],
    [{ name: 'ok', description: 'd'.repeat(4097) }, 'description'],
    [{ name: 'ok', scopes: ['has space'] }, 'scopes.0'],
    [{ name: 'ok', apiSecret: 'mine' }, 'apiSecret'],
    [{ name: 42 }, 'name'],
  ];
  for (const [body, field] of cases) {
    const res = await api.post(`${ALICE}/keys`, body);
    assert.equal(res.status, 400, `${JSON.stringify(body)}: ${show(res)}`);
    assert.equal(res.body.message.field, field, JSON.stringify(body));
  }
  const { key } = await createKey(gw);
  assert.equal((await api.patch(`${ALICE}/keys/${key.id}`, { enabled: 'no' })).body.message.field, 'enabled');
  assert.equal((await api.get(`${ALICE}/keys?limit=0`)).body.message.field, 'limit');
  assert.equal((await api.get(`${ALICE}/keys?cursor=%25%25`)).body.message.field, 'cursor');
});

test('listing pages through every key, in id order', async (t) => {
  const gw = await startOwnerGateway(t);
  const api = operator(gw);
  for (let i = 0; i < 5; i++) await createKey(gw, { name: `k${i}` });
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const res = await api.get(`${ALICE}/keys?limit=2${cursor === undefined ? '' : `&cursor=${cursor}`}`);
    assert.equal(res.status, 200, show(res));
    assert.ok(res.body.message.items.length <= 2);
    seen.push(...res.body.message.items.map((k: { id: string }) => k.id));
    cursor = res.body.message.nextCursor;
  } while (cursor !== undefined);
  assert.equal(seen.length, 7, 'the two demo keys and five new ones');
  assert.deepEqual(seen, [...seen].sort());
});

test('an owner reaches only their own account\'s keys: another\'s is the same 404 as a made-up one', async (t) => {
  const gw = await startOwnerGateway(t);
  const keys = gw.services.owner.keys;
  const alice = ownerActor(OWNER_A);
  const bob = ownerActor(OWNER_B);
  const bobKey = DEMO.bob.keyId;
  const isNotFound = (err: unknown) => err instanceof GatewayError && err.status === 404 && err.code === 'not_found';

  assert.equal((await keys.get(bob.caller, 'acct_bob', bobKey)).id, bobKey, 'bob reads his own key');
  assert.equal((await keys.list(alice.caller, 'acct_alice', { limit: 50 })).items.length, 2, 'alice lists her own');
  const attempts: [string, () => Promise<unknown>][] = [
    ['list bob\'s keys', () => keys.list(alice.caller, 'acct_bob', { limit: 50 })],
    ['read bob\'s key', () => keys.get(alice.caller, 'acct_bob', bobKey)],
    ['read bob\'s key through her own account', () => keys.get(alice.caller, 'acct_alice', bobKey)],
    ['create a key in bob\'s account', () => keys.create(alice, 'acct_bob', { name: 'x' })],
    ['disable bob\'s key', () => keys.update(alice, 'acct_bob', bobKey, { enabled: false })],
    ['disable bob\'s key through her own account', () => keys.update(alice, 'acct_alice', bobKey, { enabled: false })],
    ['roll bob\'s key', () => keys.roll(alice, 'acct_alice', bobKey, { overlapSeconds: 0 })],
    ['reset bob\'s key', () => keys.resetKey(alice, 'acct_alice', bobKey)],
    ['delete bob\'s key', () => keys.remove(alice, 'acct_bob', bobKey)],
    ['reset bob\'s account', () => keys.resetAccount(alice, 'acct_bob')],
    ['a made-up account', () => keys.list(alice.caller, 'acct_nobody', { limit: 50 })],
  ];
  for (const [what, attempt] of attempts) await assert.rejects(attempt(), isNotFound, what);
  const bobToken = (await signIn(gw, DEMO.bob)).accessToken;
  assert.equal(await rolesStatus(gw, bobToken), 200, 'bob\'s key was left alone');
  assert.equal((await keys.get(bob.caller, 'acct_bob', bobKey)).enabled, true);
});
