/**
 * Fault injection against a real redis-server: killed (SIGKILL, data gone), stalled (SIGSTOP:
 * connections stay, nothing answers), and absent when the gateway starts. Whatever Redis does,
 * the gateway stays up and answers promptly; a dependency failure is a 503 store_unavailable in
 * the envelope with Retry-After, never a 401/403; calls bearing a valid access token keep
 * working; /readyz stays 200 and says redis is down (degraded), as /healthz stays 200; nothing is half-written; no
 * secret reaches the log; and once Redis is back the gateway serves again by itself.
 *
 * "Promptly" is asserted with generous bounds: the point is that nothing hangs. Recovery is
 * polled with a deadline, never waited for with a fixed sleep.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { connect } from 'node:net';
import { test, type TestContext } from 'node:test';
import { rolesCall } from '../helpers/directory.js';
import { call, DEMO, postJson, untilDataLossNoticed, sha256Hex, show, signIn, startGateway, timed, type JsonResponse, type TestGateway, type TokenPair } from '../helpers/gateway.js';
import { answersPing, rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';
import { refreshHandleOf } from '../helpers/refresh-token.js';

/**
 * Short, so that a stall costs little; the breaker opens after BREAKER_FAILURES failures in a
 * row. Not shorter: a test process on a loaded 2-core machine can go 200 ms without the CPU,
 * and a command of the healthy Redis then timed out before the outage began.
 */
const COMMAND_TIMEOUT_MS = 1000;
const BREAKER_FAILURES = 3;
const BREAKER_COOLDOWN_MS = 1000;
/**
 * No request may take longer than this during an outage: "it answered, it did not hang".
 * Loose enough for a 2-core machine running other suites (a 1 GiB transfer among them).
 */
const PROMPT_MS = 6000;
/** How long the gateway may take to notice on its own that Redis is back. */
const RECOVERY_DEADLINE_MS = 15_000;

type Who = { apiKey: string; secret: string };

function startGatewayOn(t: TestContext, redisUrl: string, redis: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      ...extra,
      redis: {
        url: redisUrl,
        commandTimeoutMs: COMMAND_TIMEOUT_MS,
        breakerFailures: BREAKER_FAILURES,
        breakerCooldownMs: BREAKER_COOLDOWN_MS,
        ...redis,
      },
    },
  });
}

function credentials(who: Who = DEMO.alice) {
  return { apiKey: who.apiKey, apiSecret: sha256Hex(who.secret) };
}

const signInCall = (gw: TestGateway, who: Who = DEMO.alice) => postJson(`${gw.url}/api/signin`, credentials(who));
const refreshCall = (gw: TestGateway, refreshToken: string) => postJson(`${gw.url}/api/refresh`, { refreshToken });
const resetCall = (gw: TestGateway, who: Who = DEMO.alice) => postJson(`${gw.url}/api/reset`, credentials(who));
const readyz = (gw: TestGateway) => call(`${gw.url}/readyz`);
const healthz = (gw: TestGateway) => call(`${gw.url}/healthz`);

/** The answer to any call that needed Redis while Redis fails: 503 in the envelope, never an auth failure. */
function assertStoreUnavailable(res: JsonResponse, what: string, retryAfter = String(Math.ceil(BREAKER_COOLDOWN_MS / 1000))): void {
  assert.equal(res.status, 503, `${what}: ${show(res)}`);
  assert.equal(res.body?.success, false, what);
  assert.equal(res.body.message.code, 'store_unavailable', what);
  assert.match(res.body.message.description, /store the gateway depends on is unavailable/, what);
  assert.equal(typeof res.body.message.requestId, 'string', `${what}: a 5xx carries the request id`);
  assert.equal(res.headers.get('retry-after'), retryAfter, `${what}: Retry-After`);
  assert.equal(res.headers.get('www-authenticate'), null, `${what}: a store failure is not an authentication challenge`);
  assert.equal(res.headers.get('cache-control'), 'no-store', what);
}

function assertPrompt(ms: number, what: string, bound = PROMPT_MS): void {
  assert.ok(ms < bound, `${what} took ${Math.round(ms)} ms (bound ${bound} ms)`);
}

function assertPair(res: JsonResponse, what: string): TokenPair {
  assert.equal(res.status, 200, `${what}: ${show(res)}`);
  assert.equal(res.body.success, true, what);
  assert.equal(typeof res.body.message.accessToken, 'string', what);
  assert.equal(typeof res.body.message.refreshToken, 'string', what);
  return res.body.message as TokenPair;
}

function assertRolesServed(res: JsonResponse, what: string): void {
  assert.equal(res.status, 200, `${what}: ${show(res)}`);
  assert.equal(res.body.success, true, what);
  assert.ok(Array.isArray(res.body.message.items) && res.body.message.items.length > 0, what);
}

function assertInvalidGrant(res: JsonResponse, what: string): void {
  assert.equal(res.status, 401, `${what}: ${show(res)}`);
  assert.equal(res.body.message.code, 'invalid_grant', what);
}

async function assertReadyzDown(gw: TestGateway, what: string): Promise<void> {
  const { res, ms } = await timed(() => readyz(gw));
  // Degraded, still ready: calls with a valid token go on (readiness.requireRedis is off).
  assert.equal(res.status, 200, `${what}: ${show(res)}`);
  assert.deepEqual(res.body, { success: true, message: { status: 'degraded', checks: { redis: 'down', directory: 'up', signingKeys: 'up' }, degraded: ['redis'] } }, what);
  assertPrompt(ms, `${what}: /readyz`);
}

async function assertHealthy(gw: TestGateway, what: string): Promise<void> {
  const { res, ms } = await timed(() => healthz(gw));
  assert.equal(res.status, 200, `${what}: ${show(res)}`);
  assert.deepEqual(res.body, { success: true, message: { status: 'ok' } }, what);
  assertPrompt(ms, `${what}: /healthz`);
}

/** Polls /readyz until it is 200 with redis up; fails the test at the deadline. */
async function waitUntilReady(gw: TestGateway, deadlineMs = RECOVERY_DEADLINE_MS): Promise<number> {
  const started = performance.now();
  let last: JsonResponse | undefined;
  while (performance.now() - started < deadlineMs) {
    last = await readyz(gw);
    if (last.body?.message?.status === 'ready') {
      assert.deepEqual(last.body, { success: true, message: { status: 'ready', checks: { redis: 'up', directory: 'up', signingKeys: 'up' } } });
      return performance.now() - started;
    }
    assert.equal(last.body?.message?.status, 'degraded', `/readyz while recovering: ${show(last)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`/readyz did not turn 200 within ${deadlineMs} ms of Redis coming back; last: ${last === undefined ? 'none' : show(last)}`);
}

/** Polls until the access token is refused as revoked; fails the test at the deadline. */
async function waitUntilRevoked(gw: TestGateway, accessToken: string, deadlineMs = 5000): Promise<void> {
  const started = performance.now();
  let last: JsonResponse | undefined;
  while (performance.now() - started < deadlineMs) {
    last = await rolesCall(gw, accessToken);
    if (last.status === 401) {
      assert.equal(last.body.message.code, 'invalid_token');
      return;
    }
    assert.equal(last.status, 200, `bearer call after the reset: ${show(last)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`a token reset was not honoured within ${deadlineMs} ms after recovery; last: ${last === undefined ? 'none' : show(last)}`);
}

function logMessages(gw: TestGateway): string[] {
  return gw.logs.map((line) => String((JSON.parse(line) as { msg?: unknown }).msg));
}

test('Redis killed then restarted: 503s at once, bearer calls still served, readiness follows, recovery by itself', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startGatewayOn(t, redis.url);
  await waitUntilReady(gw, 5000);

  // Before the outage: the store path works, and a refresh token and access token are held.
  const first = await signIn(gw);
  const held = assertPair(await refreshCall(gw, first.refreshToken), 'refresh before the kill');

  await redis.kill();

  const signInDown = await timed(() => signInCall(gw));
  assertStoreUnavailable(signInDown.res, 'sign-in with Redis killed');
  assertPrompt(signInDown.ms, 'first sign-in after the kill');

  const refreshDown = await timed(() => refreshCall(gw, held.refreshToken));
  assertStoreUnavailable(refreshDown.res, 'refresh with Redis killed');
  assertPrompt(refreshDown.ms, 'refresh after the kill');

  const resetDown = await timed(() => resetCall(gw));
  assertStoreUnavailable(resetDown.res, 'POST /api/reset with Redis killed');
  assertPrompt(resetDown.ms, 'reset after the kill');

  // Nothing cached for this account: the revocation read fails, and the token is accepted.
  const bearerDown = await timed(() => rolesCall(gw, held.accessToken));
  assertRolesServed(bearerDown.res, 'GET /api/roles with a valid access token while Redis is killed');
  assertPrompt(bearerDown.ms, 'bearer call after the kill');

  await assertReadyzDown(gw, 'Redis killed');
  await assertHealthy(gw, 'Redis killed');

  // A burst during the outage: every one 503, every one prompt (the breaker is open by now).
  const burst = await Promise.all(Array.from({ length: 50 }, () => timed(() => signInCall(gw, DEMO.bob))));
  burst.forEach(({ res, ms }, i) => {
    assertStoreUnavailable(res, `sign-in #${i} of the burst`);
    assertPrompt(ms, `sign-in #${i} of the burst`);
  });
  assert.ok(logMessages(gw).some((m) => m.startsWith('redis circuit breaker open')), 'the breaker opened, and said so');
  assert.ok(logMessages(gw).includes('redis connection lost: reconnecting'), 'the lost connection was logged');
  // The bearer call is still served with the breaker open.
  assertRolesServed(await rolesCall(gw, first.accessToken), 'bearer call with the breaker open');
  await assertHealthy(gw, 'after the burst');

  // Past the clock skew allowed around the epoch's start, so "before the loss" is unambiguous.
  gw.clock.advance(10_000);
  await redis.restart();
  const recoveredMs = await waitUntilReady(gw);
  t.diagnostic(`ready again ${Math.round(recoveredMs)} ms after the restart`);
  // Empty: tokens issued before the gateway notices would carry the old epoch (docs/redis.md).
  await untilDataLossNoticed(gw);

  // Served normally again: sign-in, refresh, bearer calls, resets.
  const fresh = assertPair(await signInCall(gw), 'sign-in after the restart');
  const next = assertPair(await refreshCall(gw, fresh.refreshToken), 'refresh after the restart');
  assertRolesServed(await rolesCall(gw, next.accessToken), 'bearer call after the restart');
  assertPair(await refreshCall(gw, next.refreshToken), 'second refresh after the restart');

  // The refresh token from before the kill died with the killed server's data: 401, never 5xx.
  assertInvalidGrant(await refreshCall(gw, held.refreshToken), 'refresh token issued before the kill');
  // The restarted server came back empty: its resets are gone, so every access token issued
  // before the loss is refused (test/redis/data-loss.test.ts has the rest).
  await waitUntilRevoked(gw, held.accessToken);

  // Resets work again, and one made by another instance reaches this one (its subscriber is
  // back): the cached copy of the account's resets would otherwise be trusted forever here, the
  // manual clock never expiring it.
  const other = await startGatewayOn(t, redis.url);
  // Its clock started later but was not moved as this one's was: a reset must come after the token.
  other.clock.advance(gw.clock.now() - other.clock.now() + 1000);
  assert.equal((await resetCall(other)).status, 200, 'reset through another instance after the restart');
  await waitUntilRevoked(gw, next.accessToken);
});

test('Redis stalled (SIGSTOP): 503 within the command timeout, then at once with the breaker open; recovery by itself', redisSuite(), async (t) => {
  // A longer cooldown, so that the breaker stays open through the fast phase below; a command
  // timeout long enough that "well under it" holds on a loaded machine.
  const commandTimeoutMs = 800;
  const cooldownMs = 5000;
  const retryAfter = String(cooldownMs / 1000);
  const redis = await startRedis(t);
  const gw = await startGatewayOn(t, redis.url, { commandTimeoutMs, breakerCooldownMs: cooldownMs });
  await waitUntilReady(gw, 5000);

  const alice = await signIn(gw, DEMO.alice);
  const bob = await signIn(gw, DEMO.bob);

  redis.pause();

  // Breaker closed: the call goes to Redis and waits out the command timeout, no longer.
  const firstDown = await timed(() => signInCall(gw));
  assertStoreUnavailable(firstDown.res, 'sign-in with Redis stalled', retryAfter);
  assert.ok(firstDown.ms >= commandTimeoutMs - 50, `the first call waited on Redis (${Math.round(firstDown.ms)} ms)`);
  assertPrompt(firstDown.ms, 'first sign-in with Redis stalled', commandTimeoutMs + 1200);

  // A bearer call whose account's resets were never read: the read times out, the token is accepted.
  const bearerSlow = await timed(() => rolesCall(gw, bob.accessToken));
  assertRolesServed(bearerSlow.res, 'bearer call with Redis stalled, breaker closed');
  assertPrompt(bearerSlow.ms, 'bearer call with Redis stalled, breaker closed', commandTimeoutMs + 1200);

  // The third failure in a row opens the breaker.
  const thirdDown = await timed(() => refreshCall(gw, alice.refreshToken));
  assertStoreUnavailable(thirdDown.res, 'refresh with Redis stalled', retryAfter);
  assertPrompt(thirdDown.ms, 'refresh with Redis stalled', commandTimeoutMs + 1200);
  assert.ok(logMessages(gw).some((m) => m.startsWith('redis circuit breaker open')), 'the breaker opened after the failures');

  // Breaker open: every call fails without waiting on Redis, i.e. well under the command timeout.
  for (let i = 0; i < 20; i++) {
    const { res, ms } = await timed(() => (i % 2 === 0 ? signInCall(gw) : refreshCall(gw, alice.refreshToken)));
    assertStoreUnavailable(res, `call #${i} with the breaker open`, retryAfter);
    assertPrompt(ms, `call #${i} with the breaker open (must not wait on Redis)`, commandTimeoutMs);
  }
  const bearerFast = await timed(() => rolesCall(gw, alice.accessToken));
  assertRolesServed(bearerFast.res, 'bearer call with Redis stalled, breaker open');
  assertPrompt(bearerFast.ms, 'bearer call with the breaker open', commandTimeoutMs);

  await assertReadyzDown(gw, 'Redis stalled');
  await assertHealthy(gw, 'Redis stalled');

  redis.resume();
  const recoveredMs = await waitUntilReady(gw);
  t.diagnostic(`ready again ${Math.round(recoveredMs)} ms after the resume`);

  assertPair(await signInCall(gw), 'sign-in after the resume');
  // alice's refresh token was never presented to Redis while it stalled (the 503s above failed
  // before the store, or timed out before it answered): it still rotates.
  const next = assertPair(await refreshCall(gw, alice.refreshToken), 'refresh after the resume');
  assertPair(await refreshCall(gw, next.refreshToken), 'second refresh after the resume');
  assertRolesServed(await rolesCall(gw, next.accessToken), 'bearer call after the resume');
});

test('a refresh that stalls is never half-written: the same token then gets one consistent successor', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startGatewayOn(t, redis.url);
  await waitUntilReady(gw, 5000);
  const keys = gw.services.config.redis.keyPrefix;

  const first = await signIn(gw);
  const parts = refreshHandleOf(first.refreshToken);

  redis.pause();
  const stalled = await timed(() => refreshCall(gw, first.refreshToken));
  assertStoreUnavailable(stalled.res, 'refresh with Redis stalled');
  assertPrompt(stalled.ms, 'refresh with Redis stalled');
  redis.resume();
  await waitUntilReady(gw);

  // What the store holds now: the stalled rotate ran entirely or not at all.
  const inspect = await rawRedisClient(t, redis);
  const tokenKey = `${keys}:rt:{${parts.accountId}}:${parts.tokenId}`;
  const familyKey = `${keys}:fam:{${parts.accountId}}:${parts.familyId}`;
  const consumed = await inspect.hgetall(tokenKey);
  const family = await inspect.hgetall(familyKey);
  assert.ok(consumed.hash !== undefined, 'the presented token is still recorded');
  if (consumed.rot !== undefined) {
    t.diagnostic('the stalled rotate ran after Redis resumed');
    assert.ok(consumed.next, 'a consumed token names its successor');
    assert.equal(family.current, consumed.next, 'the family points at that successor');
    const successor = await inspect.hgetall(`${keys}:rt:{${parts.accountId}}:${consumed.next}`);
    assert.ok(successor.hash !== undefined, 'the successor was stored with the consumption');
  } else {
    t.diagnostic('the stalled rotate never ran');
    assert.equal(consumed.next, undefined);
    assert.equal(family.current, parts.tokenId, 'the family still points at the presented token');
  }

  // The client retries with the same token: it gets a pair (the grace window returns the one the
  // stalled call stored), and that pair is the family's one current successor, not a fork.
  const retried = assertPair(await refreshCall(gw, first.refreshToken), 'the same refresh retried after recovery');
  const retriedParts = refreshHandleOf(retried.refreshToken);
  assert.equal(retriedParts.familyId, parts.familyId);
  assert.equal((await inspect.hgetall(familyKey)).current, retriedParts.tokenId, 'the retried answer is the family\'s current token');
  if (consumed.next !== undefined) assert.equal(retriedParts.tokenId, consumed.next, 'the grace window returned the stalled call\'s successor');
  assertRolesServed(await rolesCall(gw, retried.accessToken), 'the retried access token');

  // And that successor refreshes once more, normally.
  const after = assertPair(await refreshCall(gw, retried.refreshToken), 'refresh of the successor');
  assert.equal((await inspect.hgetall(familyKey)).current, refreshHandleOf(after.refreshToken).tokenId);
  assert.equal((await inspect.hgetall(familyKey)).revoked, undefined, 'the family was never treated as reused');
});

test('no secret reaches the log through an outage: Redis password, tokens, API secret', redisSuite(), async (t) => {
  const password = 's3cr3t-pass';
  // `--requirepass` cannot be used here: the helper's start-up probe is an unauthenticated PING,
  // which such a server answers -NOAUTH, so startRedis would never see it start. The same
  // protection with ACLs: clients without the password may only PING; the gateway's user needs it.
  const redis = await startRedis(t, ['--user', 'default', 'on', 'nopass', '-@all', '+ping', '--user', 'gateway', 'on', `>${password}`, '~*', '&*', '+@all']);
  assert.match(await rawReply(redis.port, 'GET x'), /^-NOPERM/, 'this Redis refuses clients without the password');
  const url = `redis://gateway:${password}@127.0.0.1:${redis.port}`;
  const gw = await startGatewayOn(t, url, {}, { log: { level: 'trace' } });
  await waitUntilReady(gw, 5000);

  const pairs: TokenPair[] = [];
  const keep = (pair: TokenPair) => (pairs.push(pair), pair);
  const first = keep(await signIn(gw));
  const second = keep(assertPair(await refreshCall(gw, first.refreshToken), 'refresh before the kill'));
  assertRolesServed(await rolesCall(gw, second.accessToken), 'bearer call before the kill');

  await redis.kill();
  assertStoreUnavailable(await signInCall(gw), 'sign-in with Redis killed');
  assertStoreUnavailable(await refreshCall(gw, second.refreshToken), 'refresh with Redis killed');
  assertStoreUnavailable(await resetCall(gw), 'reset with Redis killed');
  assertRolesServed(await rolesCall(gw, second.accessToken), 'bearer call with Redis killed');
  await assertReadyzDown(gw, 'Redis killed');

  await redis.restart();
  await waitUntilReady(gw);
  const third = keep(assertPair(await signInCall(gw), 'sign-in after the restart'));
  keep(assertPair(await refreshCall(gw, third.refreshToken), 'refresh after the restart'));
  assertInvalidGrant(await refreshCall(gw, second.refreshToken), 'refresh token from before the kill');

  // The log saw the outage (so a leak would have had its chance)...
  const messages = logMessages(gw);
  assert.ok(messages.includes('redis connection lost: reconnecting'), 'the lost connection was logged');
  assert.ok(messages.filter((m) => m === 'redis connected').length >= 2, 'connected, then connected again');
  assert.ok(messages.includes('request not served'), 'the 503s were logged');
  assert.ok(messages.includes('redis call failed'), 'the failed Redis calls were logged (debug)');
  assert.ok(gw.services.config.redis.url?.includes(password), 'the gateway holds the password, so it could leak it');

  // ...and none of it is a secret.
  const secrets: [string, string][] = [
    ['the Redis password', password],
    ['the API secret hash', sha256Hex(DEMO.alice.secret)],
    ['the API secret', DEMO.alice.secret],
  ];
  for (const [i, pair] of pairs.entries()) {
    secrets.push([`access token #${i}`, pair.accessToken]);
    secrets.push([`access token #${i} signature`, pair.accessToken.split('.')[2]!]);
    secrets.push([`refresh token #${i}`, pair.refreshToken]);
    secrets.push([`refresh token #${i} secret`, pair.refreshToken.split('.')[1]!]);
  }
  assert.ok(gw.logs.length > 20, `a real log was captured (${gw.logs.length} lines)`);
  for (const line of gw.logs) {
    for (const [name, secret] of secrets) {
      assert.ok(!line.includes(secret), `the log holds ${name}: ${line}`);
    }
  }
});

test('Redis refusing writes (OOM) is a 503 too, and the refused rotate consumed nothing', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startGatewayOn(t, redis.url);
  await waitUntilReady(gw, 5000);
  const first = await signIn(gw);
  const inspect = await rawRedisClient(t, redis);

  // Redis answers, but with an error reply: a different failure from no answer at all.
  await inspect.config('SET', 'maxmemory-policy', 'noeviction');
  await inspect.config('SET', 'maxmemory', '1');
  assertStoreUnavailable(await signInCall(gw), 'sign-in with Redis out of memory');
  assertStoreUnavailable(await refreshCall(gw, first.refreshToken), 'refresh with Redis out of memory');
  assertRolesServed(await rolesCall(gw, first.accessToken), 'bearer call with Redis out of memory');

  await inspect.config('SET', 'maxmemory', '0');
  await waitUntilReady(gw);
  const next = assertPair(await refreshCall(gw, first.refreshToken), 'the refused refresh retried');
  assertPair(await refreshCall(gw, next.refreshToken), 'its successor');
  for (const line of gw.logs) {
    for (const secret of [first.refreshToken, first.accessToken, next.refreshToken, next.accessToken]) {
      assert.ok(!line.includes(secret), `the log holds a token: ${line}`);
    }
  }
});

test('Redis down when the gateway starts: it starts anyway, answers 503, and serves once Redis is up', redisSuite(), async (t) => {
  // A port where nothing listens: a Redis started there and killed at once.
  const redis = await startRedis(t);
  await redis.kill();
  assert.equal(await answersPing(redis.port), false);

  const started = await timed(() => startGatewayOn(t, redis.url, { connectTimeoutMs: 500 }));
  const gw = started.res;
  assertPrompt(started.ms, 'start-up with Redis down', 500 + 2500);
  assert.ok(logMessages(gw).some((m) => m.startsWith('redis is not reachable yet')), 'start-up says Redis is not reachable');

  await assertHealthy(gw, 'Redis down at start');
  await assertReadyzDown(gw, 'Redis down at start');
  const signInDown = await timed(() => signInCall(gw));
  assertStoreUnavailable(signInDown.res, 'sign-in with Redis down at start');
  assertPrompt(signInDown.ms, 'sign-in with Redis down at start');
  const jwks = await call(`${gw.url}/.well-known/jwks.json`);
  assert.equal(jwks.status, 200, 'the public keys need no Redis');

  await redis.restart();
  await waitUntilReady(gw);

  const pair = assertPair(await signInCall(gw), 'sign-in once Redis is up');
  assertRolesServed(await rolesCall(gw, pair.accessToken), 'bearer call once Redis is up');
  const next = assertPair(await refreshCall(gw, pair.refreshToken), 'refresh once Redis is up');
  // A reset made by another instance reaches this one: its subscriber, which never had a
  // connection, has one now.
  assertRolesServed(await rolesCall(gw, next.accessToken), 'bearer call before the reset');
  const other = await startGatewayOn(t, redis.url);
  assert.equal((await resetCall(other)).status, 200, 'reset through another instance once Redis is up');
  await waitUntilRevoked(gw, next.accessToken);
});

/**
 * docs/redis.md ("Redis faults") promises that during an outage an instance "goes on honouring every reset it knew
 * of when Redis became unreachable: those whose notice it heard ... and those in its cache",
 * also when the subscriber reconnects (a gap) while the store still cannot be read.
 */
test('a reset known from the cache is still honoured when the subscriber reconnects while Redis calls fail', redisSuite(), async (t) => {
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const shared = { signing: { keys: [{ kid: 'outage-test', alg: 'EdDSA', pem }] } };
  const redis = await startRedis(t);
  // Long cooldown: the breaker, once open, stays open through the checks below.
  const settings = { breakerCooldownMs: 10_000 };
  const b = await startGatewayOn(t, redis.url, settings, shared);
  const token = (await signIn(b)).accessToken;
  assert.equal((await resetCall(b)).status, 200, 'reset through instance B');

  // A starts after the reset: it learns of it only by reading it (into its cache), not by notice.
  const a = await startGatewayOn(t, redis.url, settings, shared);
  assert.equal((await rolesCall(a, token)).status, 401, 'A refuses the reset token');

  // Redis fails A's calls (error replies) until A's breaker opens; the cached reset still holds.
  const inspect = await rawRedisClient(t, redis);
  await inspect.config('SET', 'maxmemory-policy', 'noeviction');
  await inspect.config('SET', 'maxmemory', '1');
  for (let i = 0; i < BREAKER_FAILURES; i++) assertStoreUnavailable(await signInCall(a), `sign-in #${i} on A`, '10');
  assert.equal((await rolesCall(a, token)).status, 401, 'A refuses the reset token with its breaker open');

  // The subscriber connections drop and come back (as in a network blip).
  const connected = () => logMessages(a).filter((m) => m === 'redis subscriber connected').length;
  const before = connected();
  await inspect.client('KILL', 'TYPE', 'pubsub');
  const deadline = performance.now() + 5000;
  while (connected() === before) {
    assert.ok(performance.now() < deadline, 'A\'s subscriber reconnected');
    await new Promise((r) => setTimeout(r, 20));
  }
  for (let i = 0; i < 5; i++) {
    const res = await rolesCall(a, token);
    assert.equal(res.status, 401, `A still refuses the reset token after its subscriber reconnected (call #${i}): ${res.status}`);
  }
});

/** The first reply line to one inline command over a fresh, unauthenticated connection. */
function rawReply(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.setTimeout(2000, () => { socket.destroy(); reject(new Error('no reply')); });
    socket.on('error', reject);
    socket.on('data', (d: Buffer) => { socket.destroy(); resolve(d.toString()); });
    socket.write(`${command}\r\n`);
  });
}
