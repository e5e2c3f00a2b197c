/**
 * GET /owner/v1/accounts/{accountId}/usage on real gateways (memory store; Redis in
 * test/redis/usage.test.ts): every call a route quota sees with an identity counts, for API
 * keys and API settings tokens alike, on own routes and proxied ones; a 429 counts as a
 * rate-limited call and not as a request; public routes, sign-ins and the owner API do not
 * count. The counts show once flushed (the test flushes through services, or waits for the
 * timer once), per 5-minute bucket on the gateway's manual clock. Access is the owner API's:
 * one 404 for another owner's account and a made-up one. What the recorder holds between flushes
 * grows with the keys calling, not with the calls.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, DEMO, show, signIn, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { accountWithOwner, anonymous, operator, signIn as ownerSignIn, startOwnerGateway, type Client } from '../helpers/owner.js';

const ACCOUNT = DEMO.alice.accountId;
const ADDRESS = `0x${'12'.repeat(20)}`;
/** Per key and route: 3 calls a minute (the account's own quota out of the way). */
const LIMITS = { mode: 'enforce', calls: { perAccount: [], perKey: [{ limit: 3, seconds: 60 }] } };

interface KeyUsage { keyId: string; requests: number; rateLimited: number }

async function usage(client: Client, accountId: string, query = ''): Promise<{ from: string; to: string; bucketSeconds: number; enabled: boolean; items: KeyUsage[] }> {
  const res = await client.get(`/accounts/${accountId}/usage${query}`);
  assert.equal(res.status, 200, show(res));
  return res.body.message;
}

async function sign(gw: TestGateway, token: string): Promise<JsonResponse> {
  return call(`${gw.url}/api/sign?address=${ADDRESS}`, { token });
}

/** A settings token of the account, made by the operator: its bearer value and id. */
async function settingsToken(gw: TestGateway, accountId: string): Promise<{ token: string; id: string }> {
  const res = await operator(gw).send('POST', `/accounts/${accountId}/settings-tokens`, { name: 'usage test' });
  assert.equal(res.status, 201, show(res));
  return { token: res.body.message.token, id: res.body.message.settingsToken.id };
}

/** An owner of an account that already exists: added by the operator, the initial password changed. */
async function ownerOf(gw: TestGateway, accountId: string, email: string): Promise<Client> {
  const initial = 'an initial passphrase';
  const added = await operator(gw).send('POST', `/accounts/${accountId}/owners`, { email, initialPassword: initial });
  assert.equal(added.status, 201, show(added));
  const first = await ownerSignIn(gw, email, initial);
  const changed = await first.send('POST', '/session/password', { currentPassword: initial, newPassword: 'a passphrase of my own' });
  assert.equal(changed.status, 200, show(changed));
  return ownerSignIn(gw, email, 'a passphrase of my own');
}

test('per-key usage: requests and 429s of keys and settings tokens, on own and proxied routes, as the account\'s owners see them', async (t) => {
  const backend = await startBackend(t);
  const gw = await startOwnerGateway(t, {
    overrides: {
      limits: LIMITS,
      routes: [{ name: 'svc', prefix: '/svc', targets: [backend.url] }, { name: 'pub', prefix: '/pub', targets: [backend.url], auth: 'public' }],
    },
  });
  let alice = await ownerOf(gw, ACCOUNT, 'alice-owner@example.com');
  const { accessToken } = await signIn(gw, DEMO.alice);
  const stk = await settingsToken(gw, ACCOUNT);

  // Key A: 5 calls of /api/sign (3 admitted, 2 refused), 2 of /api/roles, 1 proxied.
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await sign(gw, accessToken)).status);
  assert.deepEqual(statuses.map((s) => s === 429), [false, false, false, true, true], `a 429 past the key's quota: ${statuses}`);
  for (let i = 0; i < 2; i++) assert.equal((await call(`${gw.url}/api/roles`, { token: accessToken })).status, 200);
  assert.equal((await call(`${gw.url}/svc/thing`, { token: accessToken })).status, 200);
  // The settings token: 4 calls of /api/sign, its own quota (3 admitted, 1 refused).
  const stkStatuses: number[] = [];
  for (let i = 0; i < 4; i++) stkStatuses.push((await sign(gw, stk.token)).status);
  assert.deepEqual(stkStatuses.map((s) => s === 429), [false, false, false, true]);
  // Not counted: a public route, a refused bearer, a sign-in, the owner API itself.
  assert.equal((await call(`${gw.url}/pub/thing`)).status, 200);
  assert.equal((await call(`${gw.url}/svc/thing`, { token: 'not-a-token' })).status, 401);
  await signIn(gw, DEMO.alice);
  // Bob's key counts for his account only.
  const bob = await signIn(gw, DEMO.bob);
  assert.equal((await call(`${gw.url}/api/roles`, { token: bob.accessToken })).status, 200);

  await t.test('nothing shows before the counts are flushed', async () => {
    assert.deepEqual((await usage(alice, ACCOUNT)).items, []);
  });

  await gw.services.usage!.flush();

  await t.test('after a flush: one row per key and settings token, by id, requests and 429s apart', async () => {
    const answer = await usage(alice, ACCOUNT);
    assert.deepEqual(answer.items, [
      { keyId: DEMO.alice.keyId, requests: 3 + 2 + 1, rateLimited: 2 },
      { keyId: stk.id, requests: 3, rateLimited: 1 },
    ].sort((a, b) => (a.keyId < b.keyId ? -1 : 1)));
    assert.equal(answer.enabled, true);
    assert.equal(answer.bucketSeconds, 300);
    const now = gw.clock.now();
    assert.equal(answer.to, new Date(now).toISOString());
    const from = Date.parse(answer.from);
    assert.equal(from % 300_000, 0, 'the window starts at a bucket\'s start');
    assert.ok(from <= now - 24 * 3_600_000 && from > now - 24 * 3_600_000 - 300_000, `from ${answer.from}: 24 hours back, to the bucket start`);
    assert.deepEqual((await usage(operator(gw), `acct_bob`)).items, [{ keyId: DEMO.bob.keyId, requests: 1, rateLimited: 0 }]);
  });

  await t.test('another owner, and an owner on a made-up account: the same 404', async () => {
    const other = await accountWithOwner(gw, { accountId: 'acct_usage_other', email: 'other@example.com', password: 'another passphrase' });
    const foreign = await other.get(`/accounts/${ACCOUNT}/usage`);
    const madeUp = await other.get('/accounts/acct_made_up/usage');
    assert.equal(foreign.status, 404, show(foreign));
    assert.deepEqual(foreign.body, madeUp.body);
    assert.equal(foreign.body.message.code, 'not_found');
    assert.deepEqual((await usage(other, 'acct_usage_other')).items, []);
    assert.equal((await anonymous(gw).get(`/accounts/${ACCOUNT}/usage`)).status, 401);
    // A deleted account is a 404 to the operator too.
    assert.equal((await operator(gw).send('DELETE', '/accounts/acct_usage_other')).status, 200);
    assert.equal((await operator(gw).get('/accounts/acct_usage_other/usage')).status, 404);
  });

  await t.test('hours: 1 to 24 in plain digits, else 400 naming the field', async () => {
    for (const hours of ['0', '25', '100', '-1', '1.5', '1e1', '0x10', 'abc', '']) {
      const res = await alice.get(`/accounts/${ACCOUNT}/usage?hours=${encodeURIComponent(hours)}`);
      assert.equal(res.status, 400, `hours=${hours}: ${show(res)}`);
      assert.equal(res.body.message.code, 'invalid_request');
      assert.equal(res.body.message.field, 'hours', `hours=${hours}`);
    }
    const twice = await alice.get(`/accounts/${ACCOUNT}/usage?hours=1&hours=2`);
    assert.equal(twice.status, 400, show(twice));
    for (const hours of ['1', '24', '09']) assert.equal((await alice.get(`/accounts/${ACCOUNT}/usage?hours=${hours}`)).status, 200, `hours=${hours}`);
  });

  await t.test('the operator sees the same; the window moves with the clock, by whole buckets', async () => {
    assert.deepEqual(await usage(operator(gw), ACCOUNT, '?hours=24').then((u) => u.items), (await usage(alice, ACCOUNT)).items);
    gw.clock.advance(2 * 3_600_000);
    // Two hours on: the access token and the owner's session have ended; new ones.
    const later = await signIn(gw, DEMO.alice);
    alice = await ownerSignIn(gw, 'alice-owner@example.com', 'a passphrase of my own');
    assert.equal((await sign(gw, later.accessToken)).status, 404, 'a new minute: the quota is back (and no record for the address)');
    await gw.services.usage!.flush();
    assert.deepEqual((await usage(alice, ACCOUNT, '?hours=1')).items, [{ keyId: DEMO.alice.keyId, requests: 1, rateLimited: 0 }], 'the last hour: only the new call');
    const day = (await usage(alice, ACCOUNT, '?hours=3')).items;
    assert.deepEqual(day.find((u) => u.keyId === DEMO.alice.keyId), { keyId: DEMO.alice.keyId, requests: 7, rateLimited: 2 });
    const hour = await usage(alice, ACCOUNT, '?hours=1');
    assert.equal(Date.parse(hour.to) - Date.parse(hour.from) >= 3_600_000, true, 'a window covers at least its hours');
    assert.equal(Date.parse(hour.to) - Date.parse(hour.from) < 3_600_000 + 300_000, true, 'and less than a bucket more');
  });
});

test('limits.mode "off": calls are still counted (counting is no rate limit)', async (t) => {
  const gw = await startOwnerGateway(t);
  assert.equal(gw.services.config.limits.mode, 'off');
  const { accessToken } = await signIn(gw, DEMO.alice);
  for (let i = 0; i < 4; i++) assert.equal((await sign(gw, accessToken)).status, 404, 'no sign record for this address: still a call');
  await gw.services.usage!.flush();
  assert.deepEqual((await usage(operator(gw), ACCOUNT)).items, [{ keyId: DEMO.alice.keyId, requests: 4, rateLimited: 0 }]);
});

test('usage.enabled false: nothing is counted, and the operation answers an empty window with enabled false', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { usage: { enabled: false } } });
  assert.equal(gw.services.usage, undefined);
  const { accessToken } = await signIn(gw, DEMO.alice);
  assert.equal((await sign(gw, accessToken)).status, 404);
  const answer = await usage(operator(gw), ACCOUNT);
  assert.equal(answer.enabled, false);
  assert.deepEqual(answer.items, []);
  assert.equal(answer.bucketSeconds, 300);
  assert.equal((await operator(gw).get('/accounts/acct_made_up/usage')).status, 404, 'access is checked all the same');
});

test('the recorder flushes by itself every usage.flushIntervalMs', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { usage: { flushIntervalMs: 100 } } });
  const { accessToken } = await signIn(gw, DEMO.alice);
  assert.equal((await call(`${gw.url}/api/roles`, { token: accessToken })).status, 200);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const items = (await usage(operator(gw), ACCOUNT)).items;
    if (items.length > 0) {
      assert.deepEqual(items, [{ keyId: DEMO.alice.keyId, requests: 1, rateLimited: 0 }]);
      break;
    }
    assert.ok(Date.now() < deadline, 'the timer flushed within 10 s');
    await sleep(50);
  }
  assert.equal(gw.services.usage!.size, 0, 'nothing held once flushed');
});

test('a flood of calls: the recorder holds one entry per key calling, not per call', async (t) => {
  const gw = await startOwnerGateway(t);
  const made = await operator(gw).send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'second' });
  assert.equal(made.status, 201, show(made));
  const second = await signIn(gw, { apiKey: made.body.message.key.apiKey, secret: made.body.message.apiSecret });
  const first = await signIn(gw, DEMO.alice);
  const recorder = gw.services.usage!;
  let largest = 0;
  for (let round = 0; round < 20; round++) {
    await Promise.all(Array.from({ length: 20 }, (_, i) => call(`${gw.url}/api/roles`, { token: (i % 2 === 0 ? first : second).accessToken })));
    largest = Math.max(largest, recorder.size);
  }
  assert.equal(largest, 2, 'two keys: two entries, after 400 calls');
  await recorder.flush();
  assert.equal(recorder.size, 0);
  const items = (await usage(operator(gw), ACCOUNT)).items;
  assert.equal(items.reduce((n, u) => n + u.requests, 0), 400, 'every call counted');
  assert.equal(items.length, 2);
});
