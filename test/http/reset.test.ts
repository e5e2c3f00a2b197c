/**
 * POST /api/reset end to end on the memory default: the owner's token reset (interface §5.6).
 * A reset at R (the gateway clock, ms) kills refresh-token families started at or before R and
 * access tokens whose `iat_ms` is at or before R; a token issued at R + 1 lives. The clock is a
 * ManualClock, so "the same millisecond" and "one millisecond later" are exact.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { ManualClock } from '../helpers/clock.js';
import { call, DEMO, postJson, sha256Hex, signIn, startGateway, storedDigest, type JsonResponse, type TestGateway, type TokenPair } from '../helpers/gateway.js';
import { tempDir } from '../helpers/process.js';

interface Key {
  apiKey: string;
  secret: string;
}

function credentials(who: Key): { apiKey: string; apiSecret: string } {
  return { apiKey: who.apiKey, apiSecret: sha256Hex(who.secret) };
}

function reset(gw: TestGateway, body: unknown): Promise<JsonResponse> {
  return postJson(`${gw.url}/api/reset`, body);
}

/** `YYYY-MM-DD HH:MM:SS` in UTC, the default data.timeZone. */
function utcTimestamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`;
}

/** The access token opens a protected route and the refresh token rotates; returns the new pair. */
async function assertAlive(gw: TestGateway, pair: TokenPair, label: string): Promise<TokenPair> {
  const roles = await call(`${gw.url}/api/roles`, { token: pair.accessToken });
  assert.equal(roles.status, 200, `${label}: access token ${JSON.stringify(roles.body)}`);
  const refreshed = await postJson(`${gw.url}/api/refresh`, { refreshToken: pair.refreshToken });
  assert.equal(refreshed.status, 200, `${label}: refresh token ${JSON.stringify(refreshed.body)}`);
  return refreshed.body.message as TokenPair;
}

/** The access token gets 401 invalid_token and the refresh token 401 invalid_grant. */
async function assertDead(gw: TestGateway, pair: TokenPair, label: string): Promise<void> {
  const roles = await call(`${gw.url}/api/roles`, { token: pair.accessToken });
  assert.equal(roles.status, 401, `${label}: access token ${JSON.stringify(roles.body)}`);
  assert.equal(roles.body.success, false);
  assert.equal(roles.body.message.code, 'invalid_token', label);
  assert.match(roles.headers.get('www-authenticate') ?? '', /^Bearer .*error="invalid_token"/, label);
  const refreshed = await postJson(`${gw.url}/api/refresh`, { refreshToken: pair.refreshToken });
  assert.equal(refreshed.status, 401, `${label}: refresh token ${JSON.stringify(refreshed.body)}`);
  assert.equal(refreshed.body.message.code, 'invalid_grant', label);
}

function assertResetAnswer(res: JsonResponse, expected: Record<string, string>, at: number): void {
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.match(res.headers.get('content-type')!, /^application\/json/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  assert.deepEqual(Object.keys(res.body).sort(), ['message', 'success']);
  assert.equal(res.body.success, true);
  assert.deepEqual(res.body.message, { ...expected, resetAt: utcTimestamp(at) });
  assert.match(res.body.message.resetAt, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
}

test('POST /api/reset', async (t) => {
  // The first reset falls at .999 of a second (499 + 60 000 + 1 500 ms): resetAt is cut to the second, not rounded.
  const gw = await startGateway(t, { clock: new ManualClock(Math.floor(Date.now() / 1000) * 1000 + 499) });
  const url = `${gw.url}/api/reset`;
  /** Everything secret that went over the wire, for the log test at the end. */
  const secrets: string[] = [];
  const issued = async (who: Key = DEMO.alice) => {
    const pair = await signIn(gw, who);
    secrets.push(pair.accessToken, pair.refreshToken, pair.refreshToken.split('.')[1]!);
    return pair;
  };

  await t.test('the default scope is the key: its tokens die; other accounts keep theirs', async () => {
    gw.clock.advance(60_000);
    const alice = await issued();
    const bob = await issued(DEMO.bob);
    gw.clock.advance(1500);
    // Used right before the reset: the answer "not reset" is now cached, and must not outlive the reset.
    assert.equal((await call(`${gw.url}/api/roles`, { token: alice.accessToken })).status, 200);
    const res = await reset(gw, credentials(DEMO.alice));
    assert.equal(gw.clock.now() % 1000, 999);
    assertResetAnswer(res, { scope: 'key', accountId: DEMO.alice.accountId, keyId: DEMO.alice.keyId }, gw.clock.now());
    await assertDead(gw, alice, 'alice, issued before the reset');
    await assertAlive(gw, bob, 'bob, another account');
  });

  await t.test('a sign-in one millisecond after the reset works, and so does its refresh', async () => {
    gw.clock.advance(60_000);
    const before = await issued();
    assert.equal((await reset(gw, credentials(DEMO.alice))).status, 200);
    const resetAt = gw.clock.now();
    gw.clock.advance(1);
    const after = await issued();
    assert.equal(decodeJwt(after.accessToken).iat_ms, resetAt + 1);
    const next = await assertAlive(gw, after, 'alice, issued 1 ms after the reset');
    await assertAlive(gw, next, 'its successor');
    await assertDead(gw, before, 'alice, issued before the reset');
  });

  await t.test('a token issued in the same millisecond as the reset is dead', async () => {
    gw.clock.advance(60_000);
    const same = await issued();
    const res = await reset(gw, { ...credentials(DEMO.alice), scope: 'key' });
    assertResetAnswer(res, { scope: 'key', accountId: DEMO.alice.accountId, keyId: DEMO.alice.keyId }, gw.clock.now());
    assert.equal(decodeJwt(same.accessToken).iat_ms, gw.clock.now());
    await assertDead(gw, same, 'alice, issued in the reset millisecond');
  });

  await t.test('refuses a wrong secret, an unknown key and a disabled key with the sign-in 401, and resets nothing', async () => {
    gw.clock.advance(60_000);
    const alice = await issued();
    const bob = await issued(DEMO.bob);
    gw.clock.advance(1000);
    const attempts = [
      { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex('wrong') },
      { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.bob.secret), scope: 'account' },
      { apiKey: 'ak_nobody_here', apiSecret: sha256Hex(DEMO.alice.secret) },
      { ...credentials(DEMO.aliceDisabled), scope: 'account' }, // same account as alice: must not reach her tokens
      { ...credentials(DEMO.aliceDisabled), scope: 'key' },
    ];
    const signInAnswer = await postJson(`${gw.url}/api/signin`, attempts[0]);
    assert.equal(signInAnswer.status, 401);
    for (const body of attempts) {
      const res = await postJson(url, body);
      assert.equal(res.status, 401, JSON.stringify(body));
      assert.equal(res.body.success, false);
      assert.equal(res.body.message.code, 'invalid_credentials');
      assert.deepEqual(res.body, signInAnswer.body, 'the very answer sign-in gives');
      assert.equal(res.headers.get('www-authenticate'), signInAnswer.headers.get('www-authenticate'));
      assert.equal(res.headers.get('cache-control'), 'no-store');
    }
    await assertAlive(gw, alice, 'alice after refused resets');
    await assertAlive(gw, bob, 'bob after refused resets');
  });

  await t.test('answers bad bodies with 400 invalid_request (415 for what is not JSON), and resets nothing', async () => {
    gw.clock.advance(60_000);
    const alice = await issued();
    gw.clock.advance(1000);
    const good = credentials(DEMO.alice);
    const json = { 'content-type': 'application/json' };
    const cases: [RequestInit, number, string][] = [
      [{ body: '{"apiKey":', headers: json }, 400, 'invalid_request'],
      [{ body: '', headers: json }, 400, 'invalid_request'],
      [{ body: '[]', headers: json }, 400, 'invalid_request'],
      [{ body: '{}', headers: json }, 400, 'invalid_request'],
      [{ body: JSON.stringify({ apiSecret: good.apiSecret }), headers: json }, 400, 'invalid_request'],
      [{ body: JSON.stringify({ apiKey: good.apiKey }), headers: json }, 400, 'invalid_request'],
      [{ body: JSON.stringify({ ...good, scope: 'everything' }), headers: json }, 400, 'invalid_request'],
      [{ body: JSON.stringify({ ...good, scope: 'KEY' }), headers: json }, 400, 'invalid_request'],
      [{ body: JSON.stringify({ ...good, scope: null }), headers: json }, 400, 'invalid_request'],
      [{ body: JSON.stringify({ ...good, scope: ['account'] }), headers: json }, 400, 'invalid_request'],
      [{ body: JSON.stringify({ ...good, apiKey: 42 }), headers: json }, 400, 'invalid_request'],
      // The plain secret instead of its SHA-256: the caller's format mistake, as at sign-in.
      [{ body: JSON.stringify({ apiKey: good.apiKey, apiSecret: DEMO.alice.secret }), headers: json }, 400, 'invalid_request'],
      [{ body: new URLSearchParams(good).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, 'unsupported_media_type'],
      [{ body: JSON.stringify(good), headers: { 'content-type': 'text/plain' } }, 415, 'unsupported_media_type'],
    ];
    for (const [init, status, code] of cases) {
      const res = await call(url, { method: 'POST', ...init });
      assert.equal(res.status, status, `${String(init.body)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.success, false);
      assert.equal(res.body.message.code, code, String(init.body));
      assert.equal(typeof res.body.message.description, 'string');
    }
    await assertAlive(gw, alice, 'alice after refused bodies');
  });

  await t.test('only POST is served', async () => {
    const res = await call(url);
    assert.equal(res.status, 405);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message.code, 'method_not_allowed');
    assert.match(res.headers.get('allow')!, /\bPOST\b/);
  });

  await t.test('logs "tokens reset" with the scope, never the secret, its hash or any token', async () => {
    gw.clock.advance(60_000);
    await issued(DEMO.bob);
    const before = gw.logs.length;
    assert.equal((await reset(gw, { ...credentials(DEMO.bob), scope: 'account' })).status, 200);
    const lines = gw.logs.slice(before).map((line) => JSON.parse(line) as Record<string, unknown>);
    const line = lines.find((l) => l.msg === 'tokens reset');
    assert.ok(line, `no "tokens reset" line in ${JSON.stringify(lines)}`);
    assert.equal(line.accountId, DEMO.bob.accountId);
    assert.equal(line.scope, 'account');
    assert.equal(line.keyId, undefined, 'an account reset names no key');
    const keyLines = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'tokens reset' && l.scope === 'key');
    assert.ok(keyLines.some((l) => l.accountId === DEMO.alice.accountId && l.keyId === DEMO.alice.keyId), 'the key resets were logged with their key');

    const log = gw.logs.join('\n');
    for (const who of [DEMO.alice, DEMO.bob, DEMO.aliceDisabled]) {
      assert.ok(!log.includes(who.secret), 'a plain secret is in the log');
      assert.ok(!log.includes(sha256Hex(who.secret)), 'an apiSecret is in the log');
    }
    assert.ok(secrets.length > 10);
    for (const secret of secrets) assert.ok(!log.includes(secret), 'a token is in the log');
  });
});

test('POST /api/reset on an account with two keys', async (t) => {
  const dir = tempDir(t, 'gateway-reset-');
  const one = { id: 'key_duo_1', apiKey: 'ak_test_duo_one', secret: `sk_${randomBytes(16).toString('hex')}` };
  const two = { id: 'key_duo_2', apiKey: 'ak_test_duo_two', secret: `sk_${randomBytes(16).toString('hex')}` };
  const solo = { id: 'key_solo_1', apiKey: 'ak_test_solo', secret: `sk_${randomBytes(16).toString('hex')}` };
  const entry = (k: typeof one) => ({ id: k.id, apiKey: k.apiKey, secretDigest: storedDigest(k.secret) });
  const file = join(dir, 'data.json');
  writeFileSync(file, JSON.stringify({
    accounts: [
      { id: 'acct_duo', apiKeys: [entry(one), entry(two)] },
      { id: 'acct_solo', apiKeys: [entry(solo)] },
    ],
  }));
  const gw = await startGateway(t, { overrides: { data: { file } } });

  await t.test('a key reset of key 1 leaves key 2 of the same account working', async () => {
    const p1 = await signIn(gw, one);
    const p2 = await signIn(gw, two);
    gw.clock.advance(1000);
    const res = await reset(gw, { ...credentials(one), scope: 'key' });
    assertResetAnswer(res, { scope: 'key', accountId: 'acct_duo', keyId: one.id }, gw.clock.now());
    await assertDead(gw, p1, 'key 1');
    await assertAlive(gw, p2, 'key 2');
  });

  await t.test('an account reset, made with either key, kills the tokens of every key of the account only', async () => {
    gw.clock.advance(1000);
    const p1 = await signIn(gw, one);
    const p2 = await assertAlive(gw, await signIn(gw, two), 'key 2 before'); // a refreshed pair too
    const other = await signIn(gw, solo);
    gw.clock.advance(1000);
    const res = await reset(gw, { ...credentials(two), scope: 'account' });
    assertResetAnswer(res, { scope: 'account', accountId: 'acct_duo' }, gw.clock.now());
    assert.ok(!('keyId' in res.body.message), 'an account reset names no key');
    await assertDead(gw, p1, 'key 1');
    await assertDead(gw, p2, 'key 2');
    await assertAlive(gw, other, 'another account');

    gw.clock.advance(1);
    await assertAlive(gw, await signIn(gw, one), 'key 1 after the reset');
    await assertAlive(gw, await signIn(gw, two), 'key 2 after the reset');
  });
});
