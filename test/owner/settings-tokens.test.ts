/**
 * API settings tokens against a real gateway (memory state): made by the owner API, shown
 * once, accepted wherever an access token is (/api/sign, /api/roles, a proxied route, where
 * the backend is told the token's id), counted by the same quotas, refused once expired,
 * revoked or reset (also by POST /api/reset), and invisible to another account's owner.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../src/errors/errors.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import { settingsTokenDigest } from '../../src/domain/settings-token.js';
import { startBackend } from '../helpers/backend.js';
import { call, DEMO, postJson, sha256Hex, show, signIn, type TestGateway } from '../helpers/gateway.js';
import { operator, OWNER_A, OWNER_B, ownerActor, startOwnerGateway } from '../helpers/owner-keys.js';

const ALICE = '/accounts/acct_alice';
const ALICE_RECORD = '0x52908400098527886E0F7030069857D2E4169EE7';

interface Created {
  settingsToken: { id: string; start: string; status: string; expiresAt?: string };
  token: string;
}

async function createToken(gw: TestGateway, body: Record<string, unknown> = { name: 'dashboard' }, account = ALICE): Promise<Created> {
  const res = await operator(gw).post(`${account}/settings-tokens`, body);
  assert.equal(res.status, 201, show(res));
  return res.body.message as Created;
}

async function rolesWith(gw: TestGateway, token: string) {
  return call(`${gw.url}/api/roles`, { token });
}

function assertInvalidToken(res: Awaited<ReturnType<typeof call>>, label: string): void {
  assert.equal(res.status, 401, `${label}: ${show(res)}`);
  assert.equal(res.body.message.code, 'invalid_token', label);
  assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/, label);
}

test('a settings token opens /api/sign, /api/roles and a proxied route, which is told the token id', async (t) => {
  const backend = await startBackend(t);
  const gw = await startOwnerGateway(t, { overrides: { routes: [{ prefix: '/svc', targets: [backend.url] }] } });
  const { settingsToken, token } = await createToken(gw, { name: 'dashboard', scopes: ['read'] });
  assert.match(token, /^gwst_[0-9A-Za-z]{49}$/);
  assert.match(settingsToken.id, /^stk_[0-9A-Za-z]{16}$/);
  assert.deepEqual(settingsToken, {
    id: settingsToken.id, name: 'dashboard', start: token.slice(0, 9), scopes: ['read'],
    createdAt: new Date(gw.clock.now()).toISOString(), status: 'active',
  });

  const roles = await rolesWith(gw, token);
  assert.equal(roles.status, 200, show(roles));
  const sign = await call(`${gw.url}/api/sign?address=${ALICE_RECORD}`, { token });
  assert.equal(sign.status, 200, show(sign));
  assert.equal(sign.body.message.signedNonce, 42, 'alice\'s record: the token acts for its account');
  const proxied = await call(`${gw.url}/svc/items`, { token });
  assert.equal(proxied.status, 200, show(proxied));
  const received = backend.received.at(-1)!;
  assert.deepEqual(received.headers['x-account-id'], ['acct_alice']);
  assert.deepEqual(received.headers['x-key-id'], [settingsToken.id]);
  assert.deepEqual(received.headers['x-token-id'], [settingsToken.id]);
  assert.ok(!JSON.stringify(received.headers).includes(token), 'the token itself does not reach the backend');

  // Shown once: never in a listing, a read or the log.
  const list = await operator(gw).get(`${ALICE}/settings-tokens`);
  const one = await operator(gw).get(`${ALICE}/settings-tokens/${settingsToken.id}`);
  assert.equal(one.status, 200, show(one));
  assert.equal(list.body.message.items.length, 1);
  for (const [what, text] of [['list', JSON.stringify(list.body)], ['get', JSON.stringify(one.body)], ['log', gw.logs.join('\n')]] as const) {
    assert.ok(!text.includes(token), `${what} holds no token`);
    assert.ok(!text.includes(settingsTokenDigest(token)), `${what} holds no digest`);
  }
  // Its last use is written after the answer (off the request's path): wait for it, briefly.
  let used = one.body.message.lastUsedAt;
  for (let i = 0; i < 40 && used === undefined; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    used = (await operator(gw).get(`${ALICE}/settings-tokens/${settingsToken.id}`)).body.message.lastUsedAt;
  }
  assert.ok(used !== undefined, 'its last use is recorded');
});

test('a bad checksum, an unknown, an expired and a revoked token are refused 401 invalid_token', async (t) => {
  const gw = await startOwnerGateway(t);
  const { settingsToken, token } = await createToken(gw, { name: 'short', expiresInSeconds: 60 });
  assert.equal(settingsToken.expiresAt, new Date(gw.clock.now() + 60_000).toISOString());
  const typo = `${token.slice(0, 20)}${token[20] === 'a' ? 'b' : 'a'}${token.slice(21)}`;
  assertInvalidToken(await rolesWith(gw, typo), 'a typo (bad checksum)');
  assertInvalidToken(await rolesWith(gw, 'gwst_nope'), 'not even the shape');
  assert.equal((await rolesWith(gw, token)).status, 200);
  gw.clock.advance(60_000);
  assertInvalidToken(await rolesWith(gw, token), 'expired');
  assert.equal((await operator(gw).get(`${ALICE}/settings-tokens/${settingsToken.id}`)).body.message.status, 'expired');

  const second = await createToken(gw);
  assert.equal((await rolesWith(gw, second.token)).status, 200, 'cached now');
  gw.clock.advance(1);
  const revoked = await operator(gw).delete(`${ALICE}/settings-tokens/${second.settingsToken.id}`);
  assert.equal(revoked.status, 200, show(revoked));
  assert.equal(revoked.body.message.status, 'revoked');
  assert.equal(revoked.body.message.revokedAt, new Date(gw.clock.now()).toISOString());
  const refused = await rolesWith(gw, second.token);
  assertInvalidToken(refused, 'revoked (refused at once, though cached)');
  // Revoked is what happened: no token reset was asked for (it said "revoked by a token reset").
  assert.equal(refused.body.message.description, 'The API settings token was revoked.');
  const again = await operator(gw).delete(`${ALICE}/settings-tokens/${second.settingsToken.id}`);
  assert.equal(again.status, 200, 'revoking twice changes nothing');
  assert.equal(again.body.message.revokedAt, revoked.body.message.revokedAt);
});

test('through the gateway: a bad checksum and a cached token cost no owner-store call', async (t) => {
  // The gateway's owner store is a MemoryOwnerStore: its lookups are counted where they are defined.
  const calls = { find: 0, read: 0 };
  const { findSettingsToken, readAccount } = MemoryOwnerStore.prototype;
  MemoryOwnerStore.prototype.findSettingsToken = function (this: MemoryOwnerStore, digest: string) { calls.find++; return findSettingsToken.call(this, digest); };
  MemoryOwnerStore.prototype.readAccount = function (this: MemoryOwnerStore, id: string) { calls.read++; return readAccount.call(this, id); };
  t.after(() => Object.assign(MemoryOwnerStore.prototype, { findSettingsToken, readAccount }));
  const gw = await startOwnerGateway(t);
  const { token } = await createToken(gw);
  const typo = `${token.slice(0, 30)}${token[30] === 'a' ? 'b' : 'a'}${token.slice(31)}`;
  const before = { ...calls };
  for (let i = 0; i < 5; i++) assertInvalidToken(await rolesWith(gw, typo), 'bad checksum');
  assert.deepEqual(calls, before, 'no store call for a token that fails its checksum');
  assert.equal((await rolesWith(gw, token)).status, 200);
  assert.equal(calls.find, before.find + 1, 'the first use reads the token once');
  const afterMiss = { ...calls };
  for (let i = 0; i < 10; i++) assert.equal((await rolesWith(gw, token)).status, 200);
  assert.deepEqual(calls, afterMiss, 'cache hits: no store call');
});

test('owner.settingsTokenMaxDays caps a token\'s lifetime, and gives one to a token asked for without', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { settingsTokenMaxDays: 2 } } });
  const cap = new Date(gw.clock.now() + 2 * 86_400_000).toISOString();
  assert.equal((await createToken(gw)).settingsToken.expiresAt, cap);
  assert.equal((await createToken(gw, { name: 'long', expiresInSeconds: 30 * 86_400 })).settingsToken.expiresAt, cap);
  assert.equal((await createToken(gw, { name: 'short', expiresInSeconds: 3600 })).settingsToken.expiresAt, new Date(gw.clock.now() + 3_600_000).toISOString());
  for (const [body, field] of [[{ name: 'x', expiresInSeconds: 0 }, 'expiresInSeconds'], [{ name: 'x', token: 'mine' }, 'token'], [{}, 'name']] as const) {
    const res = await operator(gw).post(`${ALICE}/settings-tokens`, body);
    assert.equal(res.status, 400, show(res));
    assert.equal(res.body.message.field, field);
  }
});

test('an account reset revokes the account\'s settings tokens for good: the owner API\'s and POST /api/reset\'s', async (t) => {
  const gw = await startOwnerGateway(t);
  const first = await createToken(gw);
  const bobs = await createToken(gw, { name: 'bob' }, '/accounts/acct_bob');
  gw.clock.advance(1);
  const reset = await operator(gw).post(`${ALICE}/reset`);
  assert.equal(reset.status, 200, show(reset));
  assertInvalidToken(await rolesWith(gw, first.token), 'after the owner API\'s account reset');
  assert.equal((await operator(gw).get(`${ALICE}/settings-tokens/${first.settingsToken.id}`)).body.message.status, 'revoked', 'persisted');
  assert.equal((await rolesWith(gw, bobs.token)).status, 200, 'another account\'s token is untouched');

  gw.clock.advance(1);
  const second = await createToken(gw);
  assert.equal((await rolesWith(gw, second.token)).status, 200, 'a token made after the reset works');
  gw.clock.advance(1);
  const viaApi = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret), scope: 'account' });
  assert.equal(viaApi.status, 200, show(viaApi));
  assertInvalidToken(await rolesWith(gw, second.token), 'after POST /api/reset with scope account');
  const stored = await operator(gw).get(`${ALICE}/settings-tokens/${second.settingsToken.id}`);
  assert.equal(stored.body.message.status, 'revoked', 'POST /api/reset revoked it for good too');

  gw.clock.advance(1);
  const third = await createToken(gw);
  gw.clock.advance(1);
  const keyOnly = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret), scope: 'key' });
  assert.equal(keyOnly.status, 200, show(keyOnly));
  assert.equal((await rolesWith(gw, third.token)).status, 200, 'a key reset leaves settings tokens alone');
});

test('settings tokens count against the same quotas as access tokens', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { limits: { mode: 'enforce', signIn: { perAddress: [{ limit: 10_000, seconds: 60 }], failuresPerKeyAndAddress: [{ limit: 10_000, seconds: 60 }] }, calls: { perAccount: [{ limit: 3, seconds: 60 }] } } } });
  const { token } = await createToken(gw);
  const { accessToken } = await signIn(gw, DEMO.alice);
  assert.equal((await rolesWith(gw, token)).status, 200);
  assert.equal((await rolesWith(gw, accessToken)).status, 200);
  const third = await rolesWith(gw, token);
  assert.equal(third.status, 200);
  assert.match(third.headers.get('ratelimit') ?? '', /r=0/, 'both kinds spent the one account quota');
  assert.equal((await rolesWith(gw, accessToken)).status, 429, 'the JWT finds the quota spent');
  assert.equal((await rolesWith(gw, token)).status, 429, 'and so does the settings token');
});

test('an owner reaches only their own account\'s settings tokens', async (t) => {
  const gw = await startOwnerGateway(t);
  const tokens = gw.services.owner.settingsTokens;
  const alice = ownerActor(OWNER_A);
  const bob = ownerActor(OWNER_B);
  const { settingsToken: bobs, token: bobToken } = await tokens.create(bob, 'acct_bob', { name: 'bob' });
  const isNotFound = (err: unknown) => err instanceof GatewayError && err.status === 404 && err.code === 'not_found';
  const attempts: [string, () => Promise<unknown>][] = [
    ['list bob\'s', () => tokens.list(alice.caller, 'acct_bob', { limit: 50 })],
    ['read bob\'s', () => tokens.get(alice.caller, 'acct_bob', bobs.id)],
    ['read bob\'s through her account', () => tokens.get(alice.caller, 'acct_alice', bobs.id)],
    ['create in bob\'s account', () => tokens.create(alice, 'acct_bob', { name: 'x' })],
    ['revoke bob\'s', () => tokens.revoke(alice, 'acct_bob', bobs.id)],
    ['revoke bob\'s through her account', () => tokens.revoke(alice, 'acct_alice', bobs.id)],
  ];
  for (const [what, attempt] of attempts) await assert.rejects(attempt(), isNotFound, what);
  assert.equal((await tokens.get(bob.caller, 'acct_bob', bobs.id)).status, 'active');
  assert.equal((await rolesWith(gw, bobToken)).status, 200, 'bob\'s token still works');
});
