/**
 * GET /api/sign and GET /api/roles end to end over the Redis directory store, against a real
 * redis-server: two gateway processes with a long cache TTL both see every change a writer
 * makes through RedisDirectory within seconds (the notices on `<prefix>:directory`, not the
 * TTL); through an outage (redis-server killed, or stalled with SIGSTOP) cached answers keep
 * coming until maxStaleMs while uncached keys are answered promptly with 503/504 in the
 * envelope; once Redis is back the answers recover by themselves; bad data in Redis is a 502.
 *
 * API keys still come from the data file (data.keySource "file"), so the demo key signs in;
 * the roles and sign records of acct_alice are written to Redis by the test. In-process
 * gateways run on a ManualClock (gateway.clock.advance) wherever cache ages matter; real time
 * only bounds "promptly" and how long a change or recovery may take, polled against a deadline.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { readDataFile } from '../../src/state/data-file/data-file.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { RedisDirectory } from '../../src/state/directory/redis.js';
import type { Role } from '../../src/state/directory/store.js';
import type { RedisConnection } from '../../src/state/redis/client.js';
import {
  ACCOUNT, ALICE_CAPS, ALICE_LOWER, assertListing, assertNotFound, assertPrompt, assertSign, assertStaleServed, assertStoreError, DEMO_FILE, DEMO_ROLES, FIRST_PAGE,
  listed, MAX_STALE_MS, PAST_FRESH_MS, rolesCall, SECOND_PAGE, signCall, SWR_MS, TTL_MS, UNKNOWN, until,
} from '../helpers/directory.js';
import { call, logged, show, untilDataLossNoticed, signIn, startGateway, timed, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { startGatewayProcess, waitForLog, type GatewayProcess } from '../helpers/process.js';
import { connectedRedis, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';

// acct_alice's records and roles (ALICE_CAPS, ALICE_LOWER, DEMO_ROLES, FIRST_PAGE, SECOND_PAGE), the
// cache settings (TTL_MS, far above anything the polls below wait, SWR_MS, MAX_STALE_MS) and
// PROMPT_MS: test/helpers/directory.ts.

/** A notice must reach every instance well within this ("a few seconds", far below the TTL). */
const NOTICE_DEADLINE_MS = 5000;
/** Redis back: reconnect backoff (≤ 1 s) plus the breaker cooldown (1 s), loaded machine. */
const RECOVERY_DEADLINE_MS = 15_000;

// ---------------------------------------------------------------------------------------------
// Helpers

/** The writer's side: a connection of the gateway's own client and a RedisDirectory on it. */
async function directoryWriter(t: TestContext, url: string): Promise<{ writer: RedisDirectory; redis: RedisConnection }> {
  const redis = await connectedRedis(redisSettings(url));
  t.after(() => redis.close());
  return { writer: new RedisDirectory(redis, { records: createRecordReader('UTC'), log: silentLog }), redis };
}

function startRedisGateway(t: TestContext, url: string, redis: Record<string, unknown> = {}): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      redis: { url, commandTimeoutMs: 300, breakerFailures: 3, breakerCooldownMs: 1000, ...redis },
      directory: { store: 'redis', cache: { ttlMs: TTL_MS, staleWhileRevalidateMs: SWR_MS, negativeTtlMs: 2000, maxStaleMs: MAX_STALE_MS } },
    },
  });
}

interface Instance {
  name: string;
  url: string;
  token: string;
}

/** Polls every instance at once until each sees the change; returns how long the slowest took. */
async function untilAll(what: string, instances: Instance[], attempt: (gw: Instance) => Promise<boolean>): Promise<number> {
  const started = performance.now();
  await Promise.all(instances.map((gw) => until(`${what}, on ${gw.name}`, () => attempt(gw), NOTICE_DEADLINE_MS)));
  return performance.now() - started;
}

/** Each call, for a key nothing is cached for, is answered `status` (the store failing) at once. */
async function assertUncachedFailPromptly(status: 503 | 504, condition: string, calls: [what: string, send: () => Promise<JsonResponse>][]): Promise<void> {
  for (const [what, send] of calls) {
    const { res, ms } = await timed(send);
    assertStoreError(res, status, `${what} ${condition}`);
    assertPrompt(ms, what);
  }
}

async function waitUntilReady(gw: TestGateway): Promise<void> {
  await until('/readyz 200', async () => (await call(`${gw.url}/readyz`)).status === 200, RECOVERY_DEADLINE_MS);
}

// ---------------------------------------------------------------------------------------------

test('redis store: two gateway processes with a 60 s TTL both see every change written through RedisDirectory within seconds', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const { writer, redis: connection } = await directoryWriter(t, redis.url);
  assert.deepEqual(await writer.importData(readDataFile(DEMO_FILE)), { roles: 14, signRecords: 3 });

  const env = {
    REDIS_URL: redis.url,
    DIRECTORY_STORE: 'redis',
    DIRECTORY_CACHE_TTL_MS: String(TTL_MS),
    DIRECTORY_CACHE_NEGATIVE_TTL_MS: String(TTL_MS),
    LOG_LEVEL: 'info',
  };
  const processes: Record<string, GatewayProcess> = {};
  // A generous limit: on a loaded machine the first start compiles TypeScript for seconds.
  const start = () => startGatewayProcess(t, env, { limitMs: 120_000 });
  [processes.A, processes.B] = await Promise.all([start(), start()]);
  const instances: Instance[] = [];
  for (const [name, gw] of Object.entries(processes)) instances.push({ name, url: gw.url, token: (await signIn(gw)).accessToken });
  // Both listen on the directory channel before anything is written: a notice sent earlier would be lost.
  const channel = connection.keys.directoryChannel;
  await until('both instances subscribed to the directory channel', async () => {
    const [, count] = await connection.run((c) => c.call('PUBSUB', 'NUMSUB', channel)) as [string, number];
    return count >= 2;
  }, NOTICE_DEADLINE_MS);

  await t.test('both answer roles and sign records from Redis, in the listing representation', async () => {
    for (const gw of instances) {
      assertListing(await rolesCall(gw, gw.token, 'page=1&limit=10'), FIRST_PAGE, `${gw.name}: page 1`);
      assertListing(await rolesCall(gw, gw.token, 'page=2&limit=10'), SECOND_PAGE, `${gw.name}: page 2`);
      assertListing(await rolesCall(gw, gw.token, 'name=manager'), { pages: '1', total: 2, items: [listed(DEMO_ROLES[3]!), listed(DEMO_ROLES[11]!)] }, `${gw.name}: a search`);
      assertSign(await signCall(gw, gw.token, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, `${gw.name}: the record, spelt in capitals`);
      const mixed = `0x${ALICE_CAPS.address.slice(2, 12).toLowerCase()}${ALICE_CAPS.address.slice(12)}`;
      assertSign(await signCall(gw, gw.token, mixed), mixed, ALICE_CAPS, `${gw.name}: the record, spelt mixed: did echoes it`);
      assertSign(await signCall(gw, gw.token, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, `${gw.name}: the other record`);
      assertNotFound(await signCall(gw, gw.token, UNKNOWN), `${gw.name}: an address without a record (cached as such for ${TTL_MS} ms)`);
    }
  });

  await t.test('putRoles: a changed role and a new one reach both', async () => {
    const viewer = { ...DEMO_ROLES[2]!, name: 'Viewer (read only)', public: false };
    const added: Role = { id: 13, slug: 'security-lead', name: 'Security Lead', description: 'Owns access policy.', public: true };
    await writer.putRoles(ACCOUNT, [viewer, added]);
    const firstPage = { ...FIRST_PAGE, total: 13, items: FIRST_PAGE.items.map((r) => (r.id === 3 ? listed(viewer) : r)) };
    const secondPage = { pages: '2', total: 13, items: [...SECOND_PAGE.items, listed(added)] };
    const ms = await untilAll('the changed roles', instances, async (gw) => {
      const [one, two] = await Promise.all([rolesCall(gw, gw.token, 'page=1&limit=10'), rolesCall(gw, gw.token, 'page=2&limit=10')]);
      if (one.body?.message?.total !== 13 || two.body?.message?.total !== 13) return false;
      assertListing(one, firstPage, `${gw.name}: page 1 after putRoles`);
      assertListing(two, secondPage, `${gw.name}: page 2 after putRoles`);
      return true;
    });
    t.diagnostic(`putRoles seen by both within ${Math.round(ms)} ms`);
    for (const gw of instances) {
      // Also the search, cached before: the role named "… Manager" is unchanged, the total too.
      assertListing(await rolesCall(gw, gw.token, 'name=viewer'), { pages: '1', total: 1, items: [listed(viewer)] }, `${gw.name}: a search for the renamed role`);
    }
  });

  await t.test('putSignRecord: a changed record, and a record for an address answered 404 before, reach both', async () => {
    await writer.putSignRecord(ACCOUNT, { address: ALICE_CAPS.address.toLowerCase(), signedNonce: 43, signedAt: Date.UTC(2026, 3, 2, 3, 4, 5), signedExpiredAt: Date.UTC(2026, 4, 2, 3, 4, 5) });
    await writer.putSignRecord(ACCOUNT, { address: UNKNOWN, signedNonce: 5, signedAt: Date.UTC(2026, 6, 1), signedExpiredAt: Date.UTC(2026, 7, 1) });
    const ms = await untilAll('the changed and the new record', instances, async (gw) => {
      const [changed, added] = await Promise.all([signCall(gw, gw.token, ALICE_CAPS.address), signCall(gw, gw.token, UNKNOWN)]);
      if (changed.body?.message?.signedNonce !== 43 || added.status !== 200) return false;
      assertSign(changed, ALICE_CAPS.address, { signedNonce: 43, signedAt: '2026-04-02 03:04:05', signedExpiredAt: '2026-05-02 03:04:05' }, `${gw.name}: the changed record`);
      assertSign(added, UNKNOWN, { signedNonce: 5, signedAt: '2026-07-01 00:00:00', signedExpiredAt: '2026-08-01 00:00:00' }, `${gw.name}: the new record`);
      return true;
    });
    t.diagnostic(`putSignRecord seen by both within ${Math.round(ms)} ms`);
    for (const gw of instances) {
      // Another record of the account, cached before, is unchanged.
      assertSign(await signCall(gw, gw.token, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, `${gw.name}: the untouched record`);
    }
  });

  await t.test('deleteSignRecord and deleteRoles reach both', async () => {
    await writer.deleteSignRecord(ACCOUNT, ALICE_LOWER.address);
    await writer.deleteRoles(ACCOUNT, [13]);
    const ms = await untilAll('the deletions', instances, async (gw) => {
      const [gone, page] = await Promise.all([signCall(gw, gw.token, ALICE_LOWER.address), rolesCall(gw, gw.token, 'page=2&limit=10')]);
      if (gone.status === 200 || page.body?.message?.total !== 12) return false;
      assertNotFound(gone, `${gw.name}: the deleted record`);
      assertListing(page, SECOND_PAGE, `${gw.name}: page 2 without role 13`);
      return true;
    });
    t.diagnostic(`deletions seen by both within ${Math.round(ms)} ms`);
  });

  await t.test('a write without a notice is not seen (the TTL holds); an "account" notice then reaches both', async () => {
    const json = JSON.stringify({ signedNonce: 44, signedAt: '2026-04-02 03:04:05', signedExpiredAt: '2026-05-02T03:04:05Z' });
    await connection.run((c) => c.hset(connection.keys.signRecords(ACCOUNT), ALICE_CAPS.address.toLowerCase(), json));
    for (const gw of instances) {
      const res = await signCall(gw, gw.token, ALICE_CAPS.address);
      assert.equal(res.body?.message?.signedNonce, 43, `${gw.name}: the cached record, unannounced write notwithstanding: ${show(res)}`);
    }
    await connection.run((c) => c.publish(channel, JSON.stringify({ kind: 'account', accountId: ACCOUNT })));
    const ms = await untilAll('the announced write', instances, async (gw) => {
      const res = await signCall(gw, gw.token, ALICE_CAPS.address);
      if (res.body?.message?.signedNonce !== 44) return false;
      assertSign(res, ALICE_CAPS.address, { signedNonce: 44, signedAt: '2026-04-02 03:04:05', signedExpiredAt: '2026-05-02 03:04:05' }, `${gw.name}: after the account notice`);
      return true;
    });
    t.diagnostic(`the account notice reached both within ${Math.round(ms)} ms`);
  });

  await t.test('a malformed notice is logged and taken as "anything may have changed" by both', async () => {
    const json = JSON.stringify({ signedNonce: 45, signedAt: 1775099045000, signedExpiredAt: '2026-05-02T03:04:05Z' });
    await connection.run((c) => c.hset(connection.keys.signRecords(ACCOUNT), ALICE_CAPS.address.toLowerCase(), json));
    for (const gw of instances) assert.equal((await signCall(gw, gw.token, ALICE_CAPS.address)).body?.message?.signedNonce, 44, `${gw.name}: still the cached record`);
    await connection.run((c) => c.publish(channel, '{"kind":"sign","accountId":"acct_alice","address":"not an address"}'));
    await untilAll('the write after a malformed notice', instances, async (gw) => {
      const res = await signCall(gw, gw.token, ALICE_CAPS.address);
      if (res.body?.message?.signedNonce !== 45) return false;
      assertSign(res, ALICE_CAPS.address, { signedNonce: 45, signedAt: '2026-04-02 03:04:05', signedExpiredAt: '2026-05-02 03:04:05' }, `${gw.name}: after the malformed notice`);
      return true;
    });
    for (const [name, gw] of Object.entries(processes)) {
      await waitForLog(gw.child, (line) => line.msg === 'ignored a malformed notice on the directory channel' && line.level === 40, NOTICE_DEADLINE_MS)
        .catch((err: Error) => assert.fail(`${name}: ${err.message}`));
    }
  });

  await t.test('no instance logged an error', () => {
    for (const [name, gw] of Object.entries(processes)) {
      const errors = gw.logs().filter((line) => typeof line.level === 'number' && line.level >= 50);
      assert.deepEqual(errors, [], name);
      assert.equal(gw.child.process.exitCode, null, `${name} is still running`);
    }
  });
});

test('redis store, redis-server killed: cached answers until maxStaleMs, 503 for the rest at once; recovery by itself after a restart', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const first = await directoryWriter(t, redis.url);
  await first.writer.importData(readDataFile(DEMO_FILE));
  const gw = await startRedisGateway(t, redis.url);
  await waitUntilReady(gw);
  const { accessToken: before } = await signIn(gw);

  assertSign(await signCall(gw, before, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'before the kill');
  assertListing(await rolesCall(gw, before), FIRST_PAGE, 'roles before the kill');

  await redis.kill();
  await first.redis.close();

  // Fresh copies need no store.
  assertSign(await signCall(gw, before, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'fresh copy with Redis gone');
  await assertUncachedFailPromptly(503, 'with Redis gone', [
    ['an uncached record', () => signCall(gw, before, ALICE_LOWER.address)],
    ['an uncached page', () => rolesCall(gw, before, 'page=2')],
    ['an uncached address', () => signCall(gw, before, UNKNOWN)],
  ]);

  // Past ttl + staleWhileRevalidate: the store is asked, fails, and the copy is served.
  gw.clock.advance(PAST_FRESH_MS);
  await assertStaleServed(gw, before, 'stale record with Redis gone', 'stale roles with Redis gone');
  assert.equal(logged(gw, 'directory store failing: cached copies are served while they are within directory.cache.maxStaleMs').length, 1, 'the failure was logged');

  // Past ttl + maxStale: no copy may be served.
  gw.clock.advance(MAX_STALE_MS);
  assertStoreError(await signCall(gw, before, ALICE_CAPS.address), 503, 'the cached record past maxStaleMs');
  assertStoreError(await rolesCall(gw, before), 503, 'the cached roles past maxStaleMs');

  // A new, empty server on the same port; the writer fills it again, one record changed.
  await redis.restart();
  const second = await directoryWriter(t, redis.url);
  await second.writer.importData(readDataFile(DEMO_FILE));
  await second.writer.putSignRecord(ACCOUNT, { address: ALICE_CAPS.address.toLowerCase(), signedNonce: 43, signedAt: Date.UTC(2026, 2, 1, 12), signedExpiredAt: Date.UTC(2026, 2, 31, 12) });

  // The restarted server came back empty: access tokens from before its loss are refused
  // (test/redis/data-loss.test.ts), so the rest uses one issued after it.
  let accessToken = before;
  await untilDataLossNoticed(gw, RECOVERY_DEADLINE_MS);
  await until('a sign-in after the restart', async () => {
    accessToken = (await signIn(gw).catch(() => undefined))?.accessToken ?? before;
    return accessToken !== before;
  }, RECOVERY_DEADLINE_MS);
  const recoveredMs = await until('the record answered again', async () => {
    const res = await signCall(gw, accessToken, ALICE_CAPS.address);
    if (res.status === 200) {
      assertSign(res, ALICE_CAPS.address, { ...ALICE_CAPS, signedNonce: 43 }, 'after the restart');
      return true;
    }
    assertStoreError(res, 503, 'while the gateway reconnects');
    return false;
  }, RECOVERY_DEADLINE_MS);
  t.diagnostic(`answered again ${Math.round(recoveredMs)} ms after the restart`);
  assertSign(await signCall(gw, accessToken, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, 'the formerly uncached record');
  assertListing(await rolesCall(gw, accessToken), FIRST_PAGE, 'roles after the restart');
  assertListing(await rolesCall(gw, accessToken, 'page=2'), SECOND_PAGE, 'page 2 after the restart');
  assertNotFound(await signCall(gw, accessToken, UNKNOWN), 'an unknown address after the restart');
  assert.equal(logged(gw, 'directory store answering again').length, 1, 'the recovery was logged');

  // The subscription is back too: a change is seen although the manual clock never expires the copy.
  await second.writer.putSignRecord(ACCOUNT, { address: ALICE_CAPS.address.toLowerCase(), signedNonce: 44, signedAt: Date.UTC(2026, 2, 1, 12), signedExpiredAt: Date.UTC(2026, 2, 31, 12) });
  await until('a change after the restart', async () => (await signCall(gw, accessToken, ALICE_CAPS.address)).body?.message?.signedNonce === 44, NOTICE_DEADLINE_MS);
});

test('redis store, redis-server stalled (SIGSTOP): 504 after the command timeout, cached answers until maxStaleMs; recovery by itself', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const { writer } = await directoryWriter(t, redis.url);
  await writer.importData(readDataFile(DEMO_FILE));
  // A breaker that does not open: every call waits out the command timeout (300 ms), so a stall is a 504.
  const gw = await startRedisGateway(t, redis.url, { breakerFailures: 1000 });
  await waitUntilReady(gw);
  const { accessToken } = await signIn(gw);
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'before the stall');
  assertListing(await rolesCall(gw, accessToken), FIRST_PAGE, 'roles before the stall');

  redis.pause();
  t.after(() => redis.resume());

  await assertUncachedFailPromptly(504, 'with Redis stalled', [
    ['an uncached record', () => signCall(gw, accessToken, ALICE_LOWER.address)],
    ['an uncached page', () => rolesCall(gw, accessToken, 'page=2')],
  ]);

  gw.clock.advance(PAST_FRESH_MS);
  await assertStaleServed(gw, accessToken, 'the stale record with Redis stalled', 'the stale roles with Redis stalled');

  gw.clock.advance(MAX_STALE_MS);
  const tooOld = await timed(() => signCall(gw, accessToken, ALICE_CAPS.address));
  assertStoreError(tooOld.res, 504, 'the cached record past maxStaleMs');
  assertPrompt(tooOld.ms, 'the 504 past maxStaleMs');

  redis.resume();
  const recoveredMs = await until('the record answered again', async () => {
    const res = await signCall(gw, accessToken, ALICE_CAPS.address);
    if (res.status === 200) {
      assertSign(res, ALICE_CAPS.address, ALICE_CAPS, 'after the resume');
      return true;
    }
    assert.ok(res.status === 503 || res.status === 504, `while Redis catches up: ${show(res)}`);
    return false;
  }, RECOVERY_DEADLINE_MS);
  t.diagnostic(`answered again ${Math.round(recoveredMs)} ms after the resume`);
  assertSign(await signCall(gw, accessToken, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, 'the formerly uncached record');
  assertListing(await rolesCall(gw, accessToken, 'page=2'), SECOND_PAGE, 'page 2 after the resume');

  await writer.putSignRecord(ACCOUNT, { address: ALICE_LOWER.address, signedNonce: 8, signedAt: Date.UTC(2026, 4, 20, 8, 30, 15), signedExpiredAt: Date.UTC(2027, 4, 20, 8, 30, 15) });
  await until('a change after the resume', async () => (await signCall(gw, accessToken, ALICE_LOWER.address)).body?.message?.signedNonce === 8, NOTICE_DEADLINE_MS);
});

test('redis store: a record Redis holds that cannot be read is a 502 bad_store_data, its value kept out of the log', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const { writer, redis: connection } = await directoryWriter(t, redis.url);
  await writer.importData(readDataFile(DEMO_FILE));
  const gw = await startRedisGateway(t, redis.url);
  await waitUntilReady(gw);
  const { accessToken } = await signIn(gw);
  const k = connection.keys;

  // Written by hand, as a broken dashboard might: role 3 with public "maybe", role 12 with id "abc" in its JSON.
  await connection.run((c) => c.hset(k.roles(ACCOUNT), '3', JSON.stringify({ ...DEMO_ROLES[2], public: 'maybe' })));
  await connection.run((c) => c.hset(k.roles(ACCOUNT), '12', JSON.stringify({ ...DEMO_ROLES[11], id: 'abc' })));
  await connection.run((c) => c.hset(k.signRecords(ACCOUNT), ALICE_LOWER.address, JSON.stringify({ signedNonce: 'abc', signedAt: '2026-05-20 08:30:15', signedExpiredAt: '2027-05-20 08:30:15' })));

  assertStoreError(await rolesCall(gw, accessToken, 'page=1'), 502, 'page 1 (public "maybe")', null);
  assertStoreError(await rolesCall(gw, accessToken, 'page=2'), 502, 'page 2 (id "abc")', null);
  assertStoreError(await signCall(gw, accessToken, ALICE_LOWER.address), 502, 'the record (signedNonce "abc")', null);
  // The rest of the account is served.
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'a good record');
  assertListing(await rolesCall(gw, accessToken, 'page=1&limit=2'), { pages: '6', total: 12, items: FIRST_PAGE.items.slice(0, 2) }, 'a page without the bad roles');

  const causes = logged(gw, 'request not served').filter((l) => l.code === 'bad_store_data').map((l) => String(l.cause));
  assert.equal(causes.length, 3, causes.join(' | '));
  assert.ok(causes.some((c) => /role 3: public/.test(c)), `the role and field are named: ${causes.join(' | ')}`);
  assert.ok(causes.some((c) => /role 12: id/.test(c)), `the role and field are named: ${causes.join(' | ')}`);
  assert.ok(causes.some((c) => /sign record: signedNonce/.test(c)), `the field is named: ${causes.join(' | ')}`);
  for (const line of gw.logs) {
    const { requestId: _r, time: _t, ...rest } = JSON.parse(line) as Record<string, unknown>;
    const text = JSON.stringify(rest);
    assert.ok(!text.includes('abc') && !text.includes('maybe'), `a log line carries a bad value: ${text}`);
  }

  // Repaired (and announced) by the writer: served, nothing bad was cached.
  await writer.putRoles(ACCOUNT, [DEMO_ROLES[2]!, DEMO_ROLES[11]!]);
  await writer.putSignRecord(ACCOUNT, { address: ALICE_LOWER.address, signedNonce: 7, signedAt: Date.UTC(2026, 4, 20, 8, 30, 15), signedExpiredAt: Date.UTC(2027, 4, 20, 8, 30, 15) });
  assertListing(await rolesCall(gw, accessToken, 'page=1'), FIRST_PAGE, 'page 1 once repaired');
  assertListing(await rolesCall(gw, accessToken, 'page=2'), SECOND_PAGE, 'page 2 once repaired');
  assertSign(await signCall(gw, accessToken, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, 'the record once repaired');
});
