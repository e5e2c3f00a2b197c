/**
 * Rate limits over real HTTP, against in-process gateways with `limits.mode: 'enforce'` (the
 * helper turns them off unless told) and small quotas. The memory counters run on the
 * gateway's ManualClock, so a window ends when the test advances `gw.clock`, never by waiting.
 *
 *   sign-in and token reset   failures per key+address (a growing lockout), per address, per key
 *   refresh                   per family, per address
 *   quotas                    per account / key / address on own and proxied routes, rules
 *   dry-run and off           nothing refused; what would have been is logged and counted
 *
 * Client addresses are simulated with X-Forwarded-For from 127.0.0.1 listed as a trusted proxy.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { startBackend, type Handler } from '../helpers/backend.js';
import { call, DEMO, metricsText, postJson, sha256Hex, signIn, startGateway, storedDigest, type JsonResponse, type TestGateway, type TokenPair } from '../helpers/gateway.js';
import { DEMO_FILE } from '../helpers/directory.js';
import { tempDir } from '../helpers/process.js';

type Who = { apiKey: string; secret: string };

const WRONG = sha256Hex('not the secret');
const TRUSTED = { proxy: { trustedProxies: ['127.0.0.1'] } };
/** Sign-in limits so large they never get in the way of the one a test is about. */
const ROOMY_SIGNIN = {
  perAddress: [{ limit: 10_000, seconds: 60 }],
  failuresPerKeyAndAddress: [{ limit: 10_000, seconds: 60 }],
  failuresPerAddress: [{ limit: 10_000, seconds: 60 }],
  failuresPerKey: [{ limit: 10_000, seconds: 60 }],
};

/** Every gateway and every credential or token the file used: none may reach a log. */
const gateways: TestGateway[] = [];
const secrets = new Set<string>([WRONG]);
for (const who of [DEMO.alice, DEMO.bob]) {
  secrets.add(who.secret);
  secrets.add(sha256Hex(who.secret));
}

async function enforced(t: TestContext, limits: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  const gw = await startGateway(t, { overrides: { ...extra, limits: { mode: 'enforce', signIn: ROOMY_SIGNIN, ...limits } } });
  gateways.push(gw);
  return gw;
}

function from(address: string | undefined): Record<string, string> {
  return address === undefined ? {} : { 'x-forwarded-for': address };
}

function signInAs(gw: TestGateway, apiKey: string, apiSecret: string, address?: string): Promise<JsonResponse> {
  return postJson(`${gw.url}/api/signin`, { apiKey, apiSecret }, { headers: from(address) });
}
const right = (gw: TestGateway, who: Who, address?: string) => signInAs(gw, who.apiKey, sha256Hex(who.secret), address);
const wrong = (gw: TestGateway, who: { apiKey: string }, address?: string) => signInAs(gw, who.apiKey, WRONG, address);

async function pairOf(gw: TestGateway, who: Who = DEMO.alice): Promise<TokenPair> {
  const pair = await signIn(gw, who);
  secrets.add(pair.accessToken);
  secrets.add(pair.refreshToken);
  return pair;
}

function refreshCall(gw: TestGateway, refreshToken: string, address?: string): Promise<JsonResponse> {
  return postJson(`${gw.url}/api/refresh`, { refreshToken }, { headers: from(address) });
}
const roles = (gw: TestGateway, token: string) => call(`${gw.url}/api/roles`, { token });
/** Each demo account's first sign record. */
const SIGN_ADDRESS: Record<string, string> = { acct_alice: '0x52908400098527886E0F7030069857D2E4169EE7', acct_bob: '0xde709f2102306220921060314715629080e2fb77' };
const sign = (gw: TestGateway, token: string, accountId = 'acct_alice') => call(`${gw.url}/api/sign?address=${SIGN_ADDRESS[accountId]}`, { token });

function show(res: JsonResponse): string {
  return `${res.status} ${JSON.stringify(res.body)} RateLimit: ${res.headers.get('ratelimit')}`;
}

function assertStatus(res: JsonResponse, status: number, what: string): void {
  assert.equal(res.status, status, `${what}: ${show(res)}`);
}

function assertInvalidCredentials(res: JsonResponse, what: string): void {
  assertStatus(res, 401, what);
  assert.equal(res.body.message.code, 'invalid_credentials', what);
}

/** The 429 envelope with Retry-After (seconds, when given) and the RateLimit fields. */
function assertRateLimited(res: JsonResponse, what: string, retryAfter?: number): void {
  assertStatus(res, 429, what);
  assert.equal(res.body.success, false, what);
  assert.equal(res.body.message.code, 'rate_limited', what);
  assert.equal(typeof res.body.message.description, 'string', what);
  const header = res.headers.get('retry-after');
  assert.match(header ?? '', /^[1-9]\d*$/, `${what}: Retry-After`);
  if (retryAfter !== undefined) {
    assert.equal(header, String(retryAfter), `${what}: Retry-After`);
    assert.match(res.body.message.description, new RegExp(`in ${retryAfter} s`), what);
  }
  assert.ok(res.headers.get('ratelimit-policy'), `${what}: RateLimit-Policy`);
  assert.ok(res.headers.get('ratelimit'), `${what}: RateLimit`);
}

function assertNoLimitHeaders(res: JsonResponse, what: string): void {
  assert.equal(res.headers.get('ratelimit'), null, `${what}: RateLimit`);
  assert.equal(res.headers.get('ratelimit-policy'), null, `${what}: RateLimit-Policy`);
  assert.equal(res.headers.get('retry-after'), null, `${what}: Retry-After`);
}

/** The items of a structured-field list header, by name (`"name";a=1;b=2` → {a:'1', b:'2'}). */
function items(header: string | null): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>();
  for (const item of (header ?? '').split(', ').filter((s) => s !== '')) {
    const [name, ...params] = item.split(';');
    assert.match(name!, /^"[^"]+"$/, `an item is a quoted name: ${item}`);
    out.set(name!.slice(1, -1), Object.fromEntries(params.map((p) => p.split('=') as [string, string])));
  }
  return out;
}

function remaining(res: JsonResponse, name: string): number {
  const item = items(res.headers.get('ratelimit')).get(name);
  assert.ok(item !== undefined, `RateLimit names ${name}: ${res.headers.get('ratelimit')}`);
  return Number(item.r);
}

/** The demo data with a second key for acct_alice. */
function dataWithSecondAliceKey(t: TestContext): { file: string; second: Who } {
  const dir = tempDir(t, 'gateway-limits-');
  const second = { apiKey: 'ak_test_alice_two', secret: `sk_${randomBytes(16).toString('hex')}` };
  secrets.add(second.secret);
  secrets.add(sha256Hex(second.secret));
  const data = JSON.parse(readFileSync(DEMO_FILE, 'utf8'));
  data.accounts.find((a: { id: string }) => a.id === 'acct_alice').apiKeys.push({ id: 'key_alice_2', apiKey: second.apiKey, secretDigest: storedDigest(second.secret) });
  const file = join(dir, 'data.json');
  writeFileSync(file, JSON.stringify(data));
  return { file, second };
}

// ---------------------------------------------------------------------------------------------
// Sign-in and token reset

test('sign-in: wrong secrets from one address are 401 up to the key+address limit, then 429', async (t) => {
  const gw = await enforced(t, {
    signIn: {
      perAddress: [{ limit: 100, seconds: 60 }],
      failuresPerKeyAndAddress: [{ limit: 5, seconds: 60 }],
      failuresPerAddress: [{ limit: 50, seconds: 600 }],
      failuresPerKey: [{ limit: 100, seconds: 3600 }],
    },
  });
  for (let i = 1; i <= 5; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice), `wrong secret #${i}`);

  const refused = await wrong(gw, DEMO.alice);
  assertRateLimited(refused, 'wrong secret #6', 60);
  assert.deepEqual(Object.keys(refused.body.message).filter((k) => k !== 'requestId').sort(), ['code', 'description']);
  assert.equal(refused.headers.get('www-authenticate'), null, 'a 429 is no authentication challenge');
  const policy = refused.headers.get('ratelimit-policy')!;
  assert.ok(policy.split(', ').includes('"signin-failures-key-address-60s";q=5;w=60'), policy);
  assert.deepEqual([...items(policy).keys()], [
    'signin-address-60s', 'signin-failures-key-address-60s', 'signin-failures-address-600s', 'signin-failures-key-3600s',
  ]);
  assert.deepEqual(items(policy).get('signin-failures-address-600s'), { q: '50', w: '600' });
  assert.deepEqual(items(refused.headers.get('ratelimit')).get('signin-failures-key-address-60s'), { r: '0', t: '60' });

  // A lockout is a lockout: the right secret is refused too, without being checked.
  assertRateLimited(await right(gw, DEMO.alice), 'the right secret while locked out', 60);

  gw.clock.advance(30_000);
  assertRateLimited(await right(gw, DEMO.alice), 'the right secret half-way through', 30);
  gw.clock.advance(30_000);
  const after = await right(gw, DEMO.alice);
  assertStatus(after, 200, 'the right secret once the window ended');
  assert.equal(after.body.success, true);
  secrets.add(after.body.message.accessToken);
  secrets.add(after.body.message.refreshToken);
  // A success gives its failure counts back: fields read before that would be stale, so none.
  assert.equal(after.headers.get('ratelimit'), null, show(after));
  assert.equal(after.headers.get('ratelimit-policy'), null, show(after));
});

test('sign-in: the lockout grows with the longer windows of the key+address limit', async (t) => {
  const gw = await enforced(t, { signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 3, seconds: 10 }, { limit: 5, seconds: 100 }] } });
  for (let i = 1; i <= 3; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice), `wrong #${i}`);
  assertRateLimited(await wrong(gw, DEMO.alice), 'wrong #4: the short window is full', 10);

  gw.clock.advance(10_000);
  // The short window ended: two more, until the longer window's 5.
  for (let i = 4; i <= 5; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice), `wrong #${i} after the short window`);
  const longer = await wrong(gw, DEMO.alice);
  assertRateLimited(longer, 'wrong #6: the longer window is full', 90);
  assert.deepEqual(items(longer.headers.get('ratelimit')).get('signin-failures-key-address-100s'), { r: '0', t: '90' });
  assert.deepEqual(items(longer.headers.get('ratelimit-policy')).get('signin-failures-key-address-100s'), { q: '5', w: '100' });

  gw.clock.advance(10_000);
  assertRateLimited(await right(gw, DEMO.alice), 'the right secret, the short window over but not the longer', 80);
  gw.clock.advance(80_000);
  assertStatus(await right(gw, DEMO.alice), 200, 'the right secret once the longer window ended');
});

test('sign-in: a success clears the key+address run of failures', async (t) => {
  const gw = await enforced(t, { signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 3, seconds: 60 }] } });
  for (let i = 1; i <= 2; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice), `wrong #${i}`);
  assertStatus(await right(gw, DEMO.alice), 200, 'the right secret');
  // The full allowance again, not the one failure left of the run before.
  for (let i = 1; i <= 3; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice), `wrong #${i} after the success`);
  assertRateLimited(await wrong(gw, DEMO.alice), 'wrong #4 after the success', 60);
});

test('sign-in: other addresses do not lock this one out until the per-key limit, then everyone is', async (t) => {
  const gw = await enforced(t, {
    signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 5, seconds: 60 }], failuresPerKey: [{ limit: 8, seconds: 600 }] },
  }, TRUSTED);
  const [attacker, owner, third] = ['203.0.113.1', '198.51.100.2', '192.0.2.3'];
  for (let i = 1; i <= 5; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice, attacker), `attacker #${i}`);
  assertRateLimited(await wrong(gw, DEMO.alice, attacker), 'attacker #6', 60);
  assertRateLimited(await right(gw, DEMO.alice, attacker), 'the right secret from the attacker\'s address', 60);

  // The owner, elsewhere, is not locked out by the attacker's address.
  assertStatus(await right(gw, DEMO.alice, owner), 200, 'the owner from another address');
  // Failures from anywhere add up per key: 5 + 3 = 8, the per-key limit.
  for (let i = 1; i <= 3; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice, owner), `owner's typo #${i}`);
  // Documented: past the per-key limit the key is refused for everyone until its window ends.
  assertRateLimited(await wrong(gw, DEMO.alice, owner), 'one failure past the per-key limit', 600);
  for (const address of [owner, third]) {
    const res = await right(gw, DEMO.alice, address);
    assertRateLimited(res, `the right secret from ${address} past the per-key limit`, 600);
    assert.deepEqual(items(res.headers.get('ratelimit')).get('signin-failures-key-600s'), { r: '0', t: '600' });
  }
  // Another key is not concerned, even from the attacker's address.
  assertStatus(await right(gw, DEMO.bob, attacker), 200, 'bob from the attacker\'s address');
  gw.clock.advance(600_000);
  assertStatus(await right(gw, DEMO.alice, third), 200, 'alice once the per-key window ended');
});

test('sign-in: another key from the same address is limited only by the per-address limit', async (t) => {
  const gw = await enforced(t, {
    signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 5, seconds: 60 }], failuresPerAddress: [{ limit: 7, seconds: 60 }] },
  }, TRUSTED);
  const [here, elsewhere] = ['203.0.113.10', '203.0.113.11'];
  for (let i = 1; i <= 5; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice, here), `alice wrong #${i}`);
  assertRateLimited(await wrong(gw, DEMO.alice, here), 'alice wrong #6');
  // Bob from the same address: his own run is empty; the address has room for 2 more failures.
  assertStatus(await right(gw, DEMO.bob, here), 200, 'bob, right, from the same address');
  assertInvalidCredentials(await wrong(gw, DEMO.bob, here), 'bob wrong #1');
  assertInvalidCredentials(await wrong(gw, DEMO.bob, here), 'bob wrong #2');
  const full = await wrong(gw, DEMO.bob, here);
  assertRateLimited(full, 'bob wrong #3: the address is out of failures', 60);
  assert.deepEqual(items(full.headers.get('ratelimit')).get('signin-failures-address-60s'), { r: '0', t: '60' });
  assert.notDeepEqual(items(full.headers.get('ratelimit')).get('signin-failures-key-address-60s')?.r, '0', 'bob\'s own run is not full');
  assertRateLimited(await right(gw, DEMO.bob, here), 'bob, right, from the address out of failures');
  assertStatus(await right(gw, DEMO.bob, elsewhere), 200, 'bob, right, from another address');
  assertStatus(await right(gw, DEMO.alice, elsewhere), 200, 'alice, right, from another address');
});

test('sign-in: unknown API keys count as failures too', async (t) => {
  const gw = await enforced(t, { signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 3, seconds: 60 }], failuresPerAddress: [{ limit: 5, seconds: 60 }] } });
  for (let i = 1; i <= 3; i++) assertInvalidCredentials(await wrong(gw, { apiKey: 'ak_nobody_at_all' }), `unknown key #${i}`);
  assertRateLimited(await wrong(gw, { apiKey: 'ak_nobody_at_all' }), 'unknown key #4', 60);
  // And per address: two more unknown keys fill the address's 5.
  assertInvalidCredentials(await wrong(gw, { apiKey: 'ak_nobody_else_1' }), 'another unknown key');
  assertInvalidCredentials(await wrong(gw, { apiKey: 'ak_nobody_else_2' }), 'a third unknown key');
  assertRateLimited(await wrong(gw, { apiKey: 'ak_nobody_else_3' }), 'the address is out of failures', 60);
});

test('sign-in: POST /api/reset is limited with the same counters as sign-in', async (t) => {
  const gw = await enforced(t, { signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 3, seconds: 60 }] } });
  const reset = (apiSecret: string) => postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret });
  for (let i = 1; i <= 3; i++) assertInvalidCredentials(await reset(WRONG), `reset with a wrong secret #${i}`);
  assertRateLimited(await reset(WRONG), 'reset #4', 60);
  // Failures on /api/reset lock /api/signin of that key from that address.
  assertRateLimited(await right(gw, DEMO.alice), 'sign-in after the failed resets', 60);
  assertRateLimited(await reset(sha256Hex(DEMO.alice.secret)), 'a reset with the right secret while locked out', 60);
  gw.clock.advance(60_000);
  // And sign-in failures lock /api/reset.
  for (let i = 1; i <= 3; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice), `sign-in wrong #${i}`);
  assertRateLimited(await reset(sha256Hex(DEMO.alice.secret)), 'a right reset after failed sign-ins', 60);
});

test('sign-in: 50 concurrent wrong secrets with a limit of 5: exactly 5 are 401, 45 are 429', async (t) => {
  const gw = await enforced(t, { signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 5, seconds: 60 }] } });
  const answers = await Promise.all(Array.from({ length: 50 }, () => wrong(gw, DEMO.alice)));
  const statuses = answers.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 401).length, 5, JSON.stringify(statuses));
  assert.equal(statuses.filter((s) => s === 429).length, 45, JSON.stringify(statuses));
  for (const res of answers.filter((r) => r.status === 429)) assertRateLimited(res, 'a concurrent refusal', 60);
});

// ---------------------------------------------------------------------------------------------
// Refresh

test('refresh: per family', async (t) => {
  const gw = await enforced(t, { refresh: { perFamily: [{ limit: 3, seconds: 60 }], perAddress: [{ limit: 1000, seconds: 60 }] } }, TRUSTED);

  await t.test('rotating with the newest token: 429 after the limit', async () => {
    let pair = await pairOf(gw);
    for (let i = 1; i <= 3; i++) {
      const res = await refreshCall(gw, pair.refreshToken);
      assertStatus(res, 200, `refresh #${i}`);
      pair = res.body.message;
      secrets.add(pair.accessToken);
      secrets.add(pair.refreshToken);
      assert.equal(remaining(res, 'refresh-family-60s'), 3 - i, `refresh #${i}`);
    }
    const refused = await refreshCall(gw, pair.refreshToken);
    assertRateLimited(refused, 'refresh #4', 60);
    assert.deepEqual(items(refused.headers.get('ratelimit-policy')).get('refresh-family-60s'), { q: '3', w: '60' });
    // Another family of the same key has its own count.
    const other = await pairOf(gw);
    assertStatus(await refreshCall(gw, other.refreshToken), 200, 'another family');
    // The refused token was not spent: it rotates once the window ends.
    gw.clock.advance(60_000);
    assertStatus(await refreshCall(gw, pair.refreshToken), 200, 'the refused token after the window');
  });

  await t.test('duplicates inside the grace window spend nothing: ten tabs refreshing at once leave the family its budget', async () => {
    const family = await enforced(t, { refresh: { perFamily: [{ limit: 10, seconds: 60 }], perAddress: [{ limit: 1000, seconds: 60 }] } }, TRUSTED);
    const first = await pairOf(family);
    const tabs = await Promise.all(Array.from({ length: 10 }, () => refreshCall(family, first.refreshToken)));
    tabs.forEach((res, i) => assertStatus(res, 200, `tab #${i + 1}`));
    let pair: TokenPair = tabs[0]!.body.message;
    secrets.add(pair.accessToken);
    secrets.add(pair.refreshToken);
    for (const [i, res] of tabs.entries()) assert.deepEqual(res.body.message, pair, `tab #${i + 1} got the one pair minted`);
    // One rotation spent: nine more fit in the window, the tenth does not.
    for (let i = 1; i <= 9; i++) {
      const res = await refreshCall(family, pair.refreshToken);
      assertStatus(res, 200, `refresh #${i} after the burst`);
      pair = res.body.message;
      secrets.add(pair.accessToken);
      secrets.add(pair.refreshToken);
    }
    assertRateLimited(await refreshCall(family, pair.refreshToken), 'the eleventh rotation in the window', 60);
  });

  await t.test('different addresses share the family limit', async () => {
    let pair = await pairOf(gw);
    for (const [i, address] of ['203.0.113.1', '203.0.113.2', '203.0.113.3'].entries()) {
      const res = await refreshCall(gw, pair.refreshToken, address);
      assertStatus(res, 200, `refresh #${i + 1} from ${address}`);
      pair = res.body.message;
      secrets.add(pair.accessToken);
      secrets.add(pair.refreshToken);
    }
    assertRateLimited(await refreshCall(gw, pair.refreshToken, '203.0.113.4'), 'from a fourth address', 60);
  });

  await t.test('wrong-secret refreshes count against the family', async () => {
    const pair = await pairOf(gw);
    const forged = `${pair.refreshToken.split('.')[0]}.${randomBytes(32).toString('base64url')}`;
    for (let i = 1; i <= 3; i++) {
      const res = await refreshCall(gw, forged);
      assertStatus(res, 401, `wrong secret #${i}`);
      assert.equal(res.body.message.code, 'invalid_grant');
    }
    assertRateLimited(await refreshCall(gw, forged), 'wrong secret #4', 60);
    assertRateLimited(await refreshCall(gw, pair.refreshToken), 'the real token of the guessed-at family', 60);
  });
});

test('refresh: per address', async (t) => {
  const gw = await enforced(t, { refresh: { perFamily: [{ limit: 1000, seconds: 60 }], perAddress: [{ limit: 4, seconds: 60 }] } }, TRUSTED);
  const families = [await pairOf(gw), await pairOf(gw)];
  // Four refreshes from one address, over two families (each refreshed twice with its newest token).
  for (let i = 0; i < 4; i++) {
    const k = i % 2;
    const res = await refreshCall(gw, families[k]!.refreshToken, '203.0.113.50');
    assertStatus(res, 200, `refresh #${i + 1}`);
    families[k] = res.body.message;
    secrets.add(res.body.message.accessToken);
    secrets.add(res.body.message.refreshToken);
    assert.equal(remaining(res, 'refresh-address-60s'), 3 - i);
  }
  assertRateLimited(await refreshCall(gw, families[0]!.refreshToken, '203.0.113.50'), 'refresh #5 from the address', 60);
  // An unparseable token still counts per address: garbage is no free pass.
  assertRateLimited(await refreshCall(gw, 'garbage', '203.0.113.50'), 'a malformed token from the address', 60);
  assertStatus(await refreshCall(gw, families[0]!.refreshToken, '203.0.113.51'), 200, 'the same token from another address');
});

// ---------------------------------------------------------------------------------------------
// Quotas of the own routes

test('quotas: burst and sustained windows per account on /api/roles', async (t) => {
  const gw = await enforced(t, { calls: { perAccount: [{ limit: 3, seconds: 1 }, { limit: 5, seconds: 60 }] } });
  const { accessToken } = await pairOf(gw);
  for (let i = 1; i <= 3; i++) {
    const res = await roles(gw, accessToken);
    assertStatus(res, 200, `call #${i}`);
    assert.equal(res.headers.get('ratelimit-policy'), '"roles-account-1s";q=3;w=1, "roles-account-60s";q=5;w=60');
    assert.equal(res.headers.get('ratelimit'), `"roles-account-1s";r=${3 - i};t=1, "roles-account-60s";r=${5 - i};t=60`);
    assert.equal(res.headers.get('retry-after'), null);
  }
  const burst = await roles(gw, accessToken);
  assertRateLimited(burst, 'call #4: the burst window is full', 1);
  // A refusal by the burst window spends nothing of the sustained one.
  assert.deepEqual(items(burst.headers.get('ratelimit')).get('roles-account-60s'), { r: '2', t: '60' });

  gw.clock.advance(1000);
  for (let i = 4; i <= 5; i++) assertStatus(await roles(gw, accessToken), 200, `call #${i} after the burst window`);
  const sustained = await roles(gw, accessToken);
  assertRateLimited(sustained, 'call #6: the sustained window is full', 59);
  gw.clock.advance(1000);
  assertRateLimited(await roles(gw, accessToken), 'a new burst window, still no sustained room', 58);
  gw.clock.advance(58_000);
  assertStatus(await roles(gw, accessToken), 200, 'once the sustained window ended');
});

test('quotas: per-route counting, accounts, keys, rules and cost', async (t) => {
  const { file, second } = dataWithSecondAliceKey(t);
  const perAccount = [{ limit: 3, seconds: 60 }];

  await t.test('/api/sign has its own quota; roles calls do not spend it', async () => {
    const gw = await enforced(t, { calls: { perAccount } }, { data: { file } });
    const { accessToken } = await pairOf(gw);
    for (let i = 1; i <= 3; i++) assertStatus(await roles(gw, accessToken), 200, `roles #${i}`);
    assertRateLimited(await roles(gw, accessToken), 'roles #4', 60);
    for (let i = 1; i <= 3; i++) {
      const res = await sign(gw, accessToken);
      assertStatus(res, 200, `sign #${i}`);
      assert.equal(res.headers.get('ratelimit'), `"sign-account-60s";r=${3 - i};t=60`);
    }
    const refused = await sign(gw, accessToken);
    assertRateLimited(refused, 'sign #4', 60);
    assert.equal(refused.headers.get('ratelimit-policy'), '"sign-account-60s";q=3;w=60');
  });

  await t.test('two keys of one account share the per-account quota; another account has its own', async () => {
    const gw = await enforced(t, { calls: { perAccount } }, { data: { file } });
    const one = await pairOf(gw, DEMO.alice);
    const two = await pairOf(gw, second);
    const bob = await pairOf(gw, DEMO.bob);
    assertStatus(await roles(gw, one.accessToken), 200, 'key 1');
    assertStatus(await roles(gw, two.accessToken), 200, 'key 2');
    assertStatus(await roles(gw, one.accessToken), 200, 'key 1 again');
    assertRateLimited(await roles(gw, two.accessToken), 'key 2: the account is out of quota', 60);
    assertRateLimited(await roles(gw, one.accessToken), 'key 1: the account is out of quota', 60);
    assertStatus(await roles(gw, bob.accessToken), 200, 'another account');
  });

  await t.test('perKey separates the keys of an account', async () => {
    const gw = await enforced(t, { calls: { perAccount: [{ limit: 100, seconds: 60 }], perKey: [{ limit: 2, seconds: 60 }] } }, { data: { file } });
    const one = await pairOf(gw, DEMO.alice);
    const two = await pairOf(gw, second);
    for (let i = 1; i <= 2; i++) {
      const res = await roles(gw, one.accessToken);
      assertStatus(res, 200, `key 1 #${i}`);
      assert.equal(remaining(res, 'roles-key-60s'), 2 - i);
      assert.equal(remaining(res, 'roles-account-60s'), 100 - i);
    }
    assertRateLimited(await roles(gw, one.accessToken), 'key 1 #3', 60);
    for (let i = 1; i <= 2; i++) assertStatus(await roles(gw, two.accessToken), 200, `key 2 #${i}`);
    assertRateLimited(await roles(gw, two.accessToken), 'key 2 #3', 60);
  });

  await t.test('a rule for an account gives it its own quota', async () => {
    const gw = await enforced(t, { calls: { perAccount }, rules: [{ account: 'acct_bob', perAccount: [{ limit: 5, seconds: 60 }] }] });
    const alice = await pairOf(gw, DEMO.alice);
    const bob = await pairOf(gw, DEMO.bob);
    for (let i = 1; i <= 5; i++) assertStatus(await roles(gw, bob.accessToken), 200, `bob #${i}`);
    const refused = await roles(gw, bob.accessToken);
    assertRateLimited(refused, 'bob #6', 60);
    assert.equal(refused.headers.get('ratelimit-policy'), '"roles-account-60s";q=5;w=60');
    for (let i = 1; i <= 3; i++) assertStatus(await roles(gw, alice.accessToken), 200, `alice #${i}`);
    assertRateLimited(await roles(gw, alice.accessToken), 'alice #4: the default', 60);
    // The rule names no route: bob's sign calls get 5 too.
    for (let i = 1; i <= 5; i++) assertStatus(await sign(gw, bob.accessToken, 'acct_bob'), 200, `bob sign #${i}`);
    assertRateLimited(await sign(gw, bob.accessToken, 'acct_bob'), 'bob sign #6', 60);
  });

  await t.test('a rule for a route gives it its own quota; cost spends more per call', async () => {
    const gw = await enforced(t, { calls: { perAccount }, rules: [{ route: 'sign', perAccount: [{ limit: 10, seconds: 60 }], cost: 3 }] });
    const { accessToken } = await pairOf(gw);
    for (let i = 1; i <= 3; i++) {
      const res = await sign(gw, accessToken);
      assertStatus(res, 200, `sign #${i}`);
      assert.equal(res.headers.get('ratelimit-policy'), '"sign-account-60s";q=10;w=60');
      assert.equal(remaining(res, 'sign-account-60s'), 10 - 3 * i, `sign #${i} spent 3`);
    }
    // 9 spent, 1 left: not enough for a call costing 3.
    assertRateLimited(await sign(gw, accessToken), 'sign #4', 60);
    // Roles keep the default quota and cost.
    for (let i = 1; i <= 3; i++) assertEqualRemaining(await roles(gw, accessToken), 'roles-account-60s', 3 - i);
    assertRateLimited(await roles(gw, accessToken), 'roles #4', 60);
  });

  await t.test('the first matching rule wins: an account rule before a route rule', async () => {
    const gw = await enforced(t, {
      calls: { perAccount },
      rules: [
        { route: 'roles', account: 'acct_bob', perAccount: [{ limit: 1, seconds: 60 }] },
        { route: 'roles', perAccount: [{ limit: 2, seconds: 60 }] },
      ],
    });
    const alice = await pairOf(gw, DEMO.alice);
    const bob = await pairOf(gw, DEMO.bob);
    assertStatus(await roles(gw, bob.accessToken), 200, 'bob #1');
    assertRateLimited(await roles(gw, bob.accessToken), 'bob #2', 60);
    for (let i = 1; i <= 2; i++) assertStatus(await roles(gw, alice.accessToken), 200, `alice #${i}`);
    assertRateLimited(await roles(gw, alice.accessToken), 'alice #3', 60);
  });
});

function assertEqualRemaining(res: JsonResponse, name: string, r: number): void {
  assertStatus(res, 200, name);
  assert.equal(remaining(res, name), r, show(res));
}

// ---------------------------------------------------------------------------------------------
// Proxied routes

test('quotas on proxied routes, with a real backend', async (t) => {
  let backendSaysLimit = false;
  const handler: Handler = (_req, res, received) => {
    const body = JSON.stringify({ url: received.url });
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    if (backendSaysLimit) Object.assign(headers, { RateLimit: '"backend";r=999;t=1', 'RateLimit-Policy': '"backend";q=1000;w=1', 'X-Backend': 'yes' });
    res.writeHead(200, headers);
    res.end(body);
  };
  const backend = await startBackend(t, handler);
  const routes = [
    { prefix: '/svc', targets: [backend.url] },
    { prefix: '/open', targets: [backend.url], auth: 'public' },
  ];
  const limits = { calls: { perAccount: [{ limit: 3, seconds: 60 }] }, public: { perAddress: [{ limit: 3, seconds: 60 }] } };
  const gw = await enforced(t, limits, { ...TRUSTED, routes });
  const reached = (path: string) => backend.received.filter((r) => r.url.startsWith(path)).length;

  await t.test('an authenticated route: per account; refused calls never reach the backend', async () => {
    const { accessToken } = await pairOf(gw);
    for (let i = 1; i <= 3; i++) {
      const res = await call(`${gw.url}/svc/items/${i}`, { token: accessToken });
      assertStatus(res, 200, `call #${i}`);
      assert.equal(res.headers.get('ratelimit-policy'), '"/svc-account-60s";q=3;w=60');
      assert.equal(res.headers.get('ratelimit'), `"/svc-account-60s";r=${3 - i};t=60`);
    }
    for (let i = 4; i <= 6; i++) assertRateLimited(await call(`${gw.url}/svc/items/${i}`, { token: accessToken }), `call #${i}`, 60);
    assert.equal(reached('/svc/'), 3, 'only the admitted calls reached the backend');
    // Bob has his own quota on the route.
    const bob = await pairOf(gw, DEMO.bob);
    assertStatus(await call(`${gw.url}/svc/items/bob`, { token: bob.accessToken }), 200, 'bob');
    assert.equal(reached('/svc/'), 4);
  });

  await t.test('a 401 (no token) on an authenticated route spends no quota', async () => {
    const fresh = await enforced(t, limits, { routes });
    for (let i = 1; i <= 5; i++) {
      const res = await call(`${fresh.url}/svc/anonymous`);
      assertStatus(res, 401, `no token #${i}`);
      assertNoLimitHeaders(res, `no token #${i}`);
    }
    const { accessToken } = await pairOf(fresh);
    for (let i = 1; i <= 3; i++) assertStatus(await call(`${fresh.url}/svc/x`, { token: accessToken }), 200, `with a token #${i}`);
    assertRateLimited(await call(`${fresh.url}/svc/x`, { token: accessToken }), 'with a token #4', 60);
  });

  await t.test('a public route: per client address, through a trusted proxy', async () => {
    const before = reached('/open/');
    for (let i = 1; i <= 3; i++) {
      const res = await call(`${gw.url}/open/page`, { headers: from('203.0.113.7') });
      assertStatus(res, 200, `address 1 #${i}`);
      assert.equal(res.headers.get('ratelimit'), `"/open-address-60s";r=${3 - i};t=60`);
    }
    assertRateLimited(await call(`${gw.url}/open/page`, { headers: from('203.0.113.7') }), 'address 1 #4', 60);
    // The address nearest the trusted proxy is the one counted: what a client writes left of it is not.
    assertRateLimited(await call(`${gw.url}/open/page`, { headers: from('10.9.9.9, 203.0.113.7') }), 'address 1 behind a spoofed entry', 60);
    assertStatus(await call(`${gw.url}/open/page`, { headers: from('203.0.113.8') }), 200, 'address 2');
    assert.equal(reached('/open/') - before, 4, 'refused calls never reached the backend');
    // A token changes nothing on a public route: it is counted by address all the same.
    const { accessToken } = await pairOf(gw);
    assertRateLimited(await call(`${gw.url}/open/page`, { token: accessToken, headers: from('203.0.113.7') }), 'address 1 with a token', 60);
  });

  await t.test('a public route: an IPv6 client is counted by its /64, a mapped IPv4 as IPv4', async () => {
    for (const [i, address] of ['2001:db8:1:2::1', '2001:db8:1:2:ffff::9', '[2001:db8:1:2::7]:4711'].entries()) {
      assertStatus(await call(`${gw.url}/open/v6`, { headers: from(address) }), 200, `${address} (#${i + 1} of one /64)`);
    }
    assertRateLimited(await call(`${gw.url}/open/v6`, { headers: from('2001:db8:1:2:abcd::1') }), 'a fourth address of the same /64', 60);
    assertStatus(await call(`${gw.url}/open/v6`, { headers: from('2001:db8:1:3::1') }), 200, 'the next /64');
    for (let i = 1; i <= 3; i++) assertStatus(await call(`${gw.url}/open/v4`, { headers: from('192.0.2.44') }), 200, `IPv4 #${i}`);
    assertRateLimited(await call(`${gw.url}/open/v4`, { headers: from('::ffff:192.0.2.44') }), 'the same address, IPv4-mapped', 60);
  });

  await t.test('a public route: an untrusted peer\'s X-Forwarded-For is ignored', async () => {
    const untrusting = await enforced(t, limits, { routes });
    for (let i = 1; i <= 3; i++) assertStatus(await call(`${untrusting.url}/open/x`, { headers: from(`198.51.100.${i}`) }), 200, `spoofed address #${i}`);
    // All were 127.0.0.1: the fourth, whatever it claims, is refused.
    assertRateLimited(await call(`${untrusting.url}/open/x`, { headers: from('198.51.100.4') }), 'spoofed address #4', 60);
    assertRateLimited(await call(`${untrusting.url}/open/x`), 'no header at all', 60);
  });

  await t.test('the gateway\'s RateLimit fields replace a backend\'s', async () => {
    backendSaysLimit = true;
    t.after(() => { backendSaysLimit = false; });
    const bob = await pairOf(gw, DEMO.bob);
    for (const [what, res] of [
      ['authenticated', await call(`${gw.url}/svc/own`, { token: bob.accessToken })],
      ['public', await call(`${gw.url}/open/own`, { headers: from('203.0.113.99') })],
    ] as const) {
      assertStatus(res, 200, what);
      assert.equal(res.headers.get('x-backend'), 'yes', `${what}: the backend's answer`);
      const state = res.headers.get('ratelimit') ?? '';
      const policy = res.headers.get('ratelimit-policy') ?? '';
      assert.doesNotMatch(state, /backend/, `${what}: RateLimit ${state}`);
      assert.doesNotMatch(policy, /backend/, `${what}: RateLimit-Policy ${policy}`);
      assert.deepEqual([...items(state).keys()], [what === 'public' ? '/open-address-60s' : '/svc-account-60s'], what);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Dry-run and off

test('dry-run: nothing is refused; what would have been is logged and counted', async (t) => {
  await t.test('limits.mode dry-run', async () => {
    const gw = await enforced(t, {
      mode: 'dry-run',
      calls: { perAccount: [{ limit: 2, seconds: 60 }] },
      signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 2, seconds: 60 }] },
    });
    const { accessToken } = await pairOf(gw);
    for (let i = 1; i <= 5; i++) {
      const res = await roles(gw, accessToken);
      assertStatus(res, 200, `roles #${i}`);
      assertNoLimitHeaders(res, `roles #${i}`);
    }
    for (let i = 1; i <= 4; i++) assertInvalidCredentials(await wrong(gw, DEMO.alice), `wrong sign-in #${i}`);
    const signedIn = await right(gw, DEMO.alice);
    assertStatus(signedIn, 200, 'the right secret after the failures');
    assertNoLimitHeaders(signedIn, 'a sign-in in dry-run');

    const lines = gw.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'rate limit would refuse (dry run)');
    assert.equal(lines.filter((l) => l.limit === 'roles-account').length, 3, 'roles #3 to #5');
    assert.ok(lines.filter((l) => l.limit === 'signin-failures-key-address').length >= 2, JSON.stringify(lines));
    for (const line of lines) {
      assert.equal(line.level, 30, 'info');
      assert.equal(typeof line.retryAfterMs, 'number');
    }
    const metrics = await metricsText(gw);
    assert.match(metrics, /^gateway_rate_limit_decisions_total\{limit="roles-account",outcome="would_refuse"\} 3$/m);
    assert.match(metrics, /^gateway_rate_limit_decisions_total\{limit="roles-account",outcome="admitted"\} 2$/m);
    assert.doesNotMatch(metrics, /outcome="refused"/);
  });

  await t.test('a rule with dryRun: true, the rest enforced', async () => {
    const gw = await enforced(t, {
      calls: { perAccount: [{ limit: 2, seconds: 60 }] },
      rules: [{ route: 'roles', dryRun: true }],
    });
    const { accessToken } = await pairOf(gw);
    for (let i = 1; i <= 4; i++) {
      const res = await roles(gw, accessToken);
      assertStatus(res, 200, `roles #${i}`);
      assertNoLimitHeaders(res, `roles #${i}`);
    }
    for (let i = 1; i <= 2; i++) assertStatus(await sign(gw, accessToken), 200, `sign #${i}`);
    assertRateLimited(await sign(gw, accessToken), 'sign #3 is enforced', 60);
    const lines = gw.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'rate limit would refuse (dry run)');
    assert.deepEqual(lines.map((l) => [l.limit, l.level]), [['roles-account', 30], ['roles-account', 30]]);
    const metrics = await metricsText(gw);
    assert.match(metrics, /^gateway_rate_limit_decisions_total\{limit="roles-account",outcome="would_refuse"\} 2$/m);
    assert.match(metrics, /^gateway_rate_limit_decisions_total\{limit="sign-account",outcome="refused"\} 1$/m);
  });
});

test('limits.mode off: no headers, never 429', async (t) => {
  const limits = {
    mode: 'off',
    calls: { perAccount: [{ limit: 1, seconds: 60 }] },
    signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 1, seconds: 60 }] },
    refresh: { perFamily: [{ limit: 1, seconds: 60 }] },
  };
  const gw = await startGateway(t, { overrides: { limits } });
  gateways.push(gw);
  for (let i = 1; i <= 5; i++) {
    const res = await wrong(gw, DEMO.alice);
    assertInvalidCredentials(res, `wrong #${i}`);
    assertNoLimitHeaders(res, `wrong #${i}`);
  }
  let pair = await pairOf(gw);
  for (let i = 1; i <= 5; i++) {
    const rolesRes = await roles(gw, pair.accessToken);
    assertStatus(rolesRes, 200, `roles #${i}`);
    assertNoLimitHeaders(rolesRes, `roles #${i}`);
    const refreshed = await refreshCall(gw, pair.refreshToken);
    assertStatus(refreshed, 200, `refresh #${i}`);
    assertNoLimitHeaders(refreshed, `refresh #${i}`);
    pair = refreshed.body.message;
    secrets.add(pair.accessToken);
    secrets.add(pair.refreshToken);
  }
  assert.doesNotMatch(await metricsText(gw), /gateway_rate_limit_decisions_total\{/, 'nothing was counted');
});

// ---------------------------------------------------------------------------------------------
// Configuration and logs

test('a rule naming an unknown route fails config loading, naming the path', () => {
  const problemsOf = (overrides: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): readonly string[] => {
    try {
      loadConfig({ env, overrides });
    } catch (err) {
      assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
      return err.problems;
    }
    assert.fail('loadConfig accepted the configuration');
  };
  const problems = problemsOf({ limits: { rules: [{ perAccount: [{ limit: 1, seconds: 1 }] }, { route: 'nope', cost: 2 }] } });
  assert.equal(problems.length, 1, JSON.stringify(problems));
  assert.match(problems[0]!, /^limits\.rules\.1\.route: no route is named "nope" \(known: sign, roles, introspect, leaks\)$/);
  // A proxied route is known by its name, else its prefix.
  const routes = [{ prefix: '/svc', targets: ['http://127.0.0.1:1'] }, { name: 'shop', prefix: '/shop', targets: ['http://127.0.0.1:1'] }];
  assert.doesNotThrow(() => loadConfig({ env: {}, overrides: { routes, limits: { rules: [{ route: '/svc' }, { route: 'shop' }] } } }));
  const byPrefix = problemsOf({ routes, limits: { rules: [{ route: '/shop' }] } });
  assert.match(byPrefix[0]!, /^limits\.rules\.0\.route: no route is named "\/shop"/);
  // From the environment, the variable is named too.
  const fromEnv = problemsOf({ routes }, { RATE_LIMIT_RULES: JSON.stringify([{ route: 'svc' }]) });
  assert.match(fromEnv[0]!, /^limits\.rules\.0\.route \(from env RATE_LIMIT_RULES\): no route is named "svc"/);
});

test('no token, API key or secret appears in any log', () => {
  assert.ok(gateways.length > 10, 'the gateways of this file');
  assert.ok(secrets.size > 20, 'the secrets of this file');
  for (const gw of gateways) {
    const log = gw.logs.join('\n');
    for (const secret of secrets) assert.ok(!log.includes(secret), `a secret or token in the log: ${secret.slice(0, 12)}…`);
    for (const apiKey of [DEMO.alice.apiKey, DEMO.bob.apiKey, 'ak_test_alice_two', 'ak_nobody_at_all']) {
      assert.ok(!log.includes(apiKey), `an API key in the log: ${apiKey}`);
    }
  }
});

test('quotas: an error answer after the quota counted keeps the fields (404, 400), a refused one says r=0', async (t) => {
  const gw = await enforced(t, { calls: { perAccount: [{ limit: 3, seconds: 60 }] } });
  const { accessToken } = await pairOf(gw);
  const missing = await call(`${gw.url}/api/sign?address=0xfeedface00000000000000000000000000000d0d`, { token: accessToken });
  assertStatus(missing, 404, 'no sign record');
  assert.deepEqual(items(missing.headers.get('ratelimit')).get('sign-account-60s'), { r: '2', t: '60' }, show(missing));
  const bad = await call(`${gw.url}/api/sign?address=0xfeedface00000000000000000000000000000d0d&address=0x1`, { token: accessToken });
  assertStatus(bad, 400, 'a repeated address');
  assert.deepEqual(items(bad.headers.get('ratelimit')).get('sign-account-60s'), { r: '1', t: '60' }, show(bad));
  assertStatus(await sign(gw, accessToken), 200, 'the third call');
  const refused = await sign(gw, accessToken);
  assertRateLimited(refused, 'the fourth call', 60);
  assert.deepEqual(items(refused.headers.get('ratelimit')).get('sign-account-60s'), { r: '0', t: '60' }, show(refused));
});
