/**
 * GatewayClient's tokens against real in-process gateways (memory state): renewal before expiry,
 * one refresh for many concurrent calls, the fallbacks of a dead refresh token, recovery after a
 * reset, the 401 replay that never loops, API settings tokens, the storage hook and the
 * cross-tab lock, and a secret that never leaves the process. Requests are counted on the
 * gateway's side, from its access log.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import { AuthenticationError, GatewayClient, type TokenPair, type TokenStorage } from '../../packages/client/src/index.js';
import { startBackend } from '../helpers/backend.js';
import { ManualClock } from '../helpers/clock.js';
import { DEMO, postJson, sha256Hex, show, signIn, startGateway } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner-keys.js';
import { ALICE_RECORD, accessLines, RealClock, recordingFetch, settle, statusLines, unsignedJwt } from './helpers.js';

const alice = { apiKey: DEMO.alice.apiKey, apiSecret: DEMO.alice.secret };

/** A storage hook in memory that counts its saves. */
function memoryStorage(initial?: TokenPair): TokenStorage & { pair: TokenPair | undefined; saves: (TokenPair | undefined)[] } {
  const storage = {
    pair: initial,
    saves: [] as (TokenPair | undefined)[],
    load: () => storage.pair,
    save: (pair: TokenPair | undefined) => { storage.pair = pair; storage.saves.push(pair); },
  };
  return storage;
}

/**
 * A gateway whose clock is set back by `ms`: its tokens' exp, read against the local clock,
 * lies only `900 s - ms` ahead, so a client that did not receive the pair itself (storage)
 * finds it due at once, while the gateway still accepts it.
 */
function setBack(ms: number): ManualClock {
  return new ManualClock(Date.now() - ms);
}

test('renewal before expiry: with 4 s access tokens the client refreshes in time and no call ever sees a 401', async (t) => {
  const gw = await startGateway(t, { clock: new RealClock(), overrides: { tokens: { accessTokenTtlSeconds: 4, clockSkewSeconds: 0 } } });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  const until = Date.now() + 7000;
  let calls = 0;
  while (Date.now() < until) {
    const page = await client.roles({ limit: 1 });
    assert.equal(page.items.length, 1);
    calls++;
    await sleep(200);
  }
  await settle();
  assert.equal(statusLines(gw, 401).length, 0, 'no 401 at all');
  assert.equal(accessLines(gw, '/api/signin').length, 1, 'one sign-in');
  const refreshes = accessLines(gw, '/api/refresh', 200).length;
  // Renewed 2 s before expiry: a token lasts about 2 s here, so 7 s take 2 to 4 refreshes.
  assert.ok(refreshes >= 2 && refreshes <= 4, `${refreshes} refreshes`);
  assert.equal(accessLines(gw, '/api/roles', 200).length, calls);
});

test('100 concurrent sign() calls while the token is due: exactly one /api/refresh, all 100 succeed', async (t) => {
  const gw = await startGateway(t, { clock: setBack(899_000) });
  const storage = memoryStorage(await signIn(gw));
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, storage, crossTabLock: false });
  const records = await Promise.all(Array.from({ length: 100 }, () => client.sign(ALICE_RECORD)));
  assert.ok(records.every((r) => r.did === ALICE_RECORD && r.signedNonce === 42));
  await settle();
  assert.equal(accessLines(gw, '/api/refresh').length, 1, 'one refresh');
  assert.equal(accessLines(gw, '/api/signin').length, 1, 'the sign-in of the test itself only');
  assert.equal(accessLines(gw, '/api/sign', 200).length, 100);
  assert.equal(storage.saves.length, 1, 'the new pair saved');
});

test('expiry is counted from receipt: a gateway whose clock is 899 s behind still gets one sign-in and no refresh for five calls', async (t) => {
  // Its tokens' exp lies 1 s ahead by the local clock; their lifetime (exp − iat) is 900 s.
  const gw = await startGateway(t, { clock: setBack(899_000) });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  for (let i = 0; i < 5; i++) assert.equal((await client.sign(ALICE_RECORD)).signedNonce, 42);
  await settle();
  assert.equal(accessLines(gw, '/api/signin').length, 1);
  assert.equal(accessLines(gw, '/api/refresh').length, 0, 'the local clock against exp would have renewed at every call');
});

test('a refresh answered invalid_grant: key credentials sign in once; refresh-only credentials end the session', async (t) => {
  const gw = await startGateway(t, { clock: setBack(899_000) });
  // A used refresh token, past the 10 s grace window: refused invalid_grant.
  const first = await signIn(gw);
  const rotated = await postJson(`${gw.url}/api/refresh`, { refreshToken: first.refreshToken });
  assert.equal(rotated.status, 200, show(rotated));
  gw.clock.advance(11_000);

  const storage = memoryStorage(first);
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, storage, crossTabLock: false });
  assert.equal((await client.sign(ALICE_RECORD)).signedNonce, 42);
  await settle();
  assert.equal(accessLines(gw, '/api/refresh', 401).length, 1, 'the dead refresh token tried once');
  assert.equal(accessLines(gw, '/api/signin').length, 2, 'the test\'s own sign-in and the client\'s one');
  assert.notEqual(storage.pair?.refreshToken, first.refreshToken, 'the new pair saved');

  const expired: Error[] = [];
  const sessionStorage = memoryStorage(first);
  const session = new GatewayClient({ baseUrl: gw.url, credentials: { refreshToken: first.refreshToken }, storage: sessionStorage, crossTabLock: false, onSessionExpired: (err) => expired.push(err) });
  const err = await session.sign(ALICE_RECORD).then(() => assert.fail('no session'), (e: unknown) => e);
  assert.ok(err instanceof AuthenticationError, String(err));
  assert.equal(err.code, 'invalid_grant');
  assert.equal(err.status, 401);
  assert.deepEqual(expired, [err], 'onSessionExpired called once with the error');
  assert.equal(sessionStorage.pair, undefined, 'storage cleared');
  assert.deepEqual(sessionStorage.saves, [undefined]);
  await settle();
  assert.equal(accessLines(gw, '/api/signin').length, 2, 'no sign-in without a key');
});

test('recovery after a reset in the middle of use: client.reset(), POST /api/reset by hand, and the owner API', async (t) => {
  const gw = await startOwnerGateway(t);
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  assert.equal((await client.roles()).items.length > 0, true);

  const reset = await client.reset();
  assert.equal(reset.scope, 'key');
  assert.equal(reset.accountId, DEMO.alice.accountId);
  gw.clock.advance(1000);
  await client.roles();
  await settle();
  assert.equal(statusLines(gw, 401).length, 0, 'after its own reset the client signs in without trying the dead token');
  assert.equal(accessLines(gw, '/api/signin').length, 2);

  const byHand = await postJson(`${gw.url}/api/reset`, { apiKey: alice.apiKey, apiSecret: sha256Hex(alice.apiSecret), scope: 'account' });
  assert.equal(byHand.status, 200, show(byHand));
  gw.clock.advance(1000);
  await client.roles();
  await settle();
  assert.equal(accessLines(gw, '/api/roles', 401).length, 1, 'the dead token refused once');
  assert.equal(accessLines(gw, '/api/refresh', 401).length, 1, 'its refresh token refused once');
  assert.equal(accessLines(gw, '/api/signin').length, 3, 'then one sign-in');

  const owner = await operator(gw).post('/accounts/acct_alice/reset', {});
  assert.ok(owner.status === 200 || owner.status === 201, show(owner));
  gw.clock.advance(1000);
  await client.sign(ALICE_RECORD);
  await settle();
  assert.equal(accessLines(gw, '/api/sign', 401).length, 1);
  assert.equal(accessLines(gw, '/api/signin').length, 4);
});

test('a gateway that always answers 401 invalid_token: the call is sent exactly twice, then thrown', async (t) => {
  const counts = { roles: 0, signin: 0 };
  const server = await startBackend(t, (req, res) => {
    if (req.url === '/api/signin' || req.url === '/api/refresh') {
      counts.signin++;
      const now = Math.floor(Date.now() / 1000);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ success: true, message: { accessToken: unsignedJwt({ iat: now, exp: now + 900 }), refreshToken: `r${counts.signin}` } }));
      return;
    }
    counts.roles++;
    res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer error="invalid_token"' });
    res.end(JSON.stringify({ success: false, message: { code: 'invalid_token', description: 'no' } }));
  });
  const client = new GatewayClient({ baseUrl: server.url, credentials: alice });
  const err = await client.roles().then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof AuthenticationError);
  assert.equal(err.code, 'invalid_token');
  assert.equal(counts.roles, 2, 'one call and one replay');
  const fetched = await client.fetch('/svc/x');
  assert.equal(fetched.status, 401, 'client.fetch returns the second 401');
  assert.equal(counts.roles, 4, 'client.fetch: one call and one replay');
});

test('a 401 for a token already renewed does not drop the new one: two calls refused with the old token, one refresh', async (t) => {
  const now = Math.floor(Date.now() / 1000);
  const tokens = [unsignedJwt({ iat: now, exp: now + 900, n: 1 }), unsignedJwt({ iat: now, exp: now + 900, n: 2 })];
  const counts = { signin: 0, refresh: 0 };
  // The second call's 401 is held back until the first call's replay arrives with the new token.
  const heldBack: (() => void)[] = [];
  let refusedOld = 0;
  const server = await startBackend(t, (req, res) => {
    const answer = (status: number, message: object, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify({ success: status === 200, message }));
    };
    if (req.url === '/api/signin' || req.url === '/api/refresh') {
      const n = req.url === '/api/signin' ? counts.signin++ : ++counts.refresh;
      answer(200, { accessToken: tokens[Math.min(n, 1)], refreshToken: `r${n}` });
      return;
    }
    const refuse = () => answer(401, { code: 'invalid_token', description: 'old' }, { 'www-authenticate': 'Bearer error="invalid_token"' });
    if (req.headers.authorization === `Bearer ${tokens[0]}`) {
      if (refusedOld++ === 0) refuse();
      else heldBack.push(refuse);
      return;
    }
    for (const release of heldBack.splice(0)) release();
    answer(200, { pages: '1', items: [], total: 0 });
  });
  const client = new GatewayClient({ baseUrl: server.url, credentials: alice });
  await client.signIn();
  const pages = await Promise.all([client.roles(), client.roles()]);
  assert.deepEqual(pages.map((p) => p.total), [0, 0]);
  assert.deepEqual(counts, { signin: 1, refresh: 1 });
});

test('a revoked API settings token: AuthenticationError invalid_token, sent once, never renewed', async (t) => {
  const gw = await startOwnerGateway(t);
  const made = await operator(gw).post('/accounts/acct_alice/settings-tokens', { name: 'client test' });
  assert.equal(made.status, 201, show(made));
  const { settingsToken, token } = made.body.message as { settingsToken: { id: string }; token: string };
  const client = new GatewayClient({ baseUrl: gw.url, credentials: { settingsToken: token } });
  assert.equal((await client.sign(ALICE_RECORD)).signedNonce, 42, 'the token works');
  const revoked = await operator(gw).delete(`/accounts/acct_alice/settings-tokens/${settingsToken.id}`);
  assert.equal(revoked.status, 200, show(revoked));
  const err = await client.sign(ALICE_RECORD).then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof AuthenticationError, String(err));
  assert.equal(err.code, 'invalid_token');
  assert.equal(err.status, 401);
  assert.match(err.requestId ?? '', /\S/, 'the request id is carried');
  await settle();
  assert.equal(accessLines(gw, '/api/sign', 401).length, 1, 'not retried');
  assert.equal(accessLines(gw, '/api/signin').length + accessLines(gw, '/api/refresh').length, 0);
});

test('storage hook: a stored pair is used without sign-in, every new pair is saved, forget() clears it', async (t) => {
  const gw = await startGateway(t);
  const storage = memoryStorage(await signIn(gw));
  const first = storage.pair!;
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, storage });
  await client.roles();
  await settle();
  assert.equal(accessLines(gw, '/api/signin').length, 1, 'only the test\'s own sign-in');
  assert.equal(await client.accessToken(), first.accessToken);
  assert.deepEqual(storage.saves, []);

  // The stored access token is refused (its key reset): the client renews and saves the pair.
  await postJson(`${gw.url}/api/reset`, { apiKey: alice.apiKey, apiSecret: sha256Hex(alice.apiSecret) });
  gw.clock.advance(1000);
  await client.roles();
  assert.equal(storage.saves.length, 1);
  assert.notEqual(storage.pair?.accessToken, first.accessToken);
  assert.equal(await client.accessToken(), storage.pair?.accessToken);
  await client.forget();
  assert.equal(storage.pair, undefined);
});

test('{refreshToken} with a storage holding a dead pair from an earlier visit: the handed-over token is tried before the session ends', async (t) => {
  const gw = await startGateway(t);
  const dead = await signIn(gw);
  // The stored pair dies (its key reset); the application's backend then mints a fresh one.
  await postJson(`${gw.url}/api/reset`, { apiKey: alice.apiKey, apiSecret: sha256Hex(alice.apiSecret) });
  gw.clock.advance(1000);
  const fresh = await signIn(gw);
  const storage = memoryStorage(dead);
  let expired = 0;
  const client = new GatewayClient({ baseUrl: gw.url, credentials: { refreshToken: fresh.refreshToken }, storage, onSessionExpired: () => { expired++; } });
  const page = await client.roles();
  assert.ok(page.items.length > 0);
  await settle();
  assert.deepEqual(accessLines(gw, '/api/refresh').map((l) => l.status), [401, 200], 'the stored token refused, then the handed-over one');
  assert.equal(expired, 0);
  assert.notEqual(storage.pair?.refreshToken, dead.refreshToken, 'the new pair is saved');

  // Once both are spent and dead, the session ends: one more refresh, no loop.
  await postJson(`${gw.url}/api/reset`, { apiKey: alice.apiKey, apiSecret: sha256Hex(alice.apiSecret) });
  gw.clock.advance(1000);
  await assert.rejects(client.roles(), (err: unknown) => err instanceof AuthenticationError && err.code === 'invalid_grant');
  assert.equal(expired, 1);
  await settle();
  assert.deepEqual(accessLines(gw, '/api/refresh').map((l) => l.status), [401, 200, 401]);
});

test('cross-tab: two clients sharing one storage, both due at once, refresh once (Web Locks, one Node process)', async (t) => {
  assert.equal(typeof navigator.locks?.request, 'function', 'Node 24 has Web Locks');
  const gw = await startGateway(t, { clock: setBack(899_000) });
  const storage = memoryStorage(await signIn(gw));
  const tabs = [1, 2].map(() => new GatewayClient({ baseUrl: gw.url, credentials: alice, storage, lockName: `test-${gw.url}` }));
  const records = await Promise.all(tabs.map((tab) => tab.sign(ALICE_RECORD)));
  assert.deepEqual(records.map((r) => r.signedNonce), [42, 42]);
  await settle();
  assert.equal(accessLines(gw, '/api/refresh').length, 1, 'one refresh for both');
  assert.equal(accessLines(gw, '/api/signin').length, 1, 'no sign-in by either client');
  // Neither a refresh nor a sign-in of its own, yet its call passed: the second adopted the first's pair.
  assert.equal(storage.saves.length, 1);
});

test('cross-tab: a lock another tab never lets go of is given up after 10 s for a renewal in this process', async (t) => {
  const gw = await startGateway(t, { clock: setBack(899_000) });
  const storage = memoryStorage(await signIn(gw));
  const lockName = `stuck-${gw.url}`;
  // A frozen tab holding the lock: released only when the test ends.
  let release!: () => void;
  const held = new Promise<void>((resolve) => { release = resolve; });
  const granted = new Promise<void>((resolve) => { void navigator.locks.request(lockName, () => { resolve(); return held; }); });
  t.after(() => release());
  await granted;
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, storage, lockName });
  assert.equal((await client.sign(ALICE_RECORD)).signedNonce, 42);
  await settle();
  assert.equal(accessLines(gw, '/api/refresh', 200).length, 1, 'renewed without the lock');
  assert.equal(storage.saves.length, 1);
});

test('the plain secret never leaves the process: sign-in and reset send its SHA-256 hex', async (t: TestContext) => {
  const gw = await startGateway(t);
  const { fetch, sent } = recordingFetch();
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, fetch });
  await client.signIn();
  await client.reset();
  gw.clock.advance(1000);
  await client.roles();
  assert.deepEqual(sent.map((s) => `${s.method} ${new URL(s.url).pathname}`), ['POST /api/signin', 'POST /api/reset', 'POST /api/signin', 'GET /api/roles']);
  for (const s of sent) {
    assert.ok(!s.body.includes(alice.apiSecret) && !s.url.includes(alice.apiSecret), `${s.method} ${s.url}`);
    for (const [, value] of s.headers) assert.ok(!value.includes(alice.apiSecret));
  }
  assert.equal(JSON.parse(sent[0]!.body).apiSecret, sha256Hex(alice.apiSecret));
  assert.equal(JSON.parse(sent[1]!.body).apiSecret, sha256Hex(alice.apiSecret));
});
