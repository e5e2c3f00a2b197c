/**
 * The key-record cache of KEY_SOURCE=redis (state/keys/cache.ts), with two real
 * gateways on one real redis-server and the owner store of a third connection as the writer:
 * a sign-in or refresh reads the key record once and then serves it from the cache (one round
 * trip: its token script); a key disabled, rolled or deleted (through the owner store, or
 * putKey as keys:create and keys:import write) stops signing in and refreshing on both gateways
 * by the notice alone, their clocks standing still so that no TTL can explain it; a write
 * nobody announced is served until `redis.keyCacheTtlMs`; a gap in the notices (the subscriber
 * cut off) drops the cache.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { createRecordReader } from '../../src/state/directory/records.js';
import { RedisKeyDirectory } from '../../src/state/keys/redis.js';
import { RedisOwnerStore } from '../../src/state/owners/redis.js';
import type { AccountDoc } from '../../src/state/owners/store.js';
import { until } from '../helpers/directory.js';
import { postJson, sha256Hex, show, startGateway, storedDigest, type TestGateway } from '../helpers/gateway.js';
import { connectedRedis, rawRedisClient, redisSettings, redisSuite, silentLog, startRedis, type TestRedis } from '../helpers/redis.js';

const SECRET = 'sk_key_cache_secret';
const KEY = { id: 'key_cache_1', apiKey: 'ak_cache_1', secretDigest: storedDigest(SECRET), disabled: false, scopes: ['orders:read'] };
const ACCOUNT: AccountDoc = { id: 'acct_cache', name: 'Cache', enabled: true, createdAt: '2026-11-01T00:00:00.000Z', apiKeys: [KEY], members: [], invites: [], settingsTokens: [], webhooks: [] };
const TTL_MS = 5000;

function redisGateway(t: TestContext, url: string): Promise<TestGateway> {
  return startGateway(t, { overrides: { redis: { url, keyCacheTtlMs: TTL_MS }, data: { keySource: 'redis' } } });
}

function keysOf(gw: TestGateway): RedisKeyDirectory {
  assert.ok(gw.services.keys instanceof RedisKeyDirectory);
  return gw.services.keys;
}

const signIn = (gw: TestGateway, secret = SECRET, apiKey = KEY.apiKey) => postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: sha256Hex(secret) });
const refresh = (gw: TestGateway, refreshToken: string) => postJson(`${gw.url}/api/refresh`, { refreshToken });

/** Until every gateway's key subscriber is confirmed (before it, nothing is cached). */
async function subscribed(server: TestRedis, t: TestContext, count: number): Promise<void> {
  const raw = await rawRedisClient(t, server);
  await until(`${count} subscribers on gw:keys`, async () => Number((await raw.pubsub('NUMSUB', 'gw:keys'))[1]) >= count);
}

async function setup(t: TestContext) {
  const server = await startRedis(t);
  const redis = await connectedRedis(redisSettings(server.url));
  t.after(() => redis.close());
  const store = new RedisOwnerStore(redis, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents: 100 });
  assert.equal(await store.createAccount(ACCOUNT, []), true);
  const gateways = [await redisGateway(t, server.url), await redisGateway(t, server.url)];
  await subscribed(server, t, 2);
  const change = (edit: (key: AccountDoc['apiKeys'][number]) => AccountDoc['apiKeys'][number] | undefined) => store.updateAccount(ACCOUNT.id, (doc) => ({
    doc: { ...doc, apiKeys: doc.apiKeys.flatMap((k) => edit(k) ?? []) },
    events: [],
    result: undefined,
  }));
  return { server, redis, store, gateways, change };
}

/** Signs in on `gw` and returns the pair; fails the test otherwise. */
async function pairOn(gw: TestGateway, secret = SECRET): Promise<{ accessToken: string; refreshToken: string }> {
  const res = await signIn(gw, secret);
  assert.equal(res.status, 200, show(res));
  return res.body.message;
}

test('KEY_SOURCE=redis: the key record is read once, then sign-in and refresh cost their token script alone', redisSuite(), async (t) => {
  const { gateways: [gw] } = await setup(t);
  const keys = keysOf(gw!);
  let pair = await pairOn(gw!);
  const refreshed = await refresh(gw!, pair.refreshToken);
  assert.equal(refreshed.status, 200, show(refreshed));
  pair = refreshed.body.message;
  // One read by apiKey (sign-in) and one by key id (refresh) so far; none from here on.
  const before = keys.reads;
  assert.equal(before, 2);
  for (let i = 0; i < 5; i++) {
    await pairOn(gw!);
    const next = await refresh(gw!, pair.refreshToken);
    assert.equal(next.status, 200, show(next));
    pair = next.body.message;
  }
  assert.equal(keys.reads, before, 'no key record read again while nothing changed');
});

test('KEY_SOURCE=redis: a key disabled, rolled or deleted stops signing in and refreshing on both gateways by the notice', redisSuite(), async (t) => {
  const { gateways, change } = await setup(t);
  // Both caches warm, by apiKey and by key id; the clocks never move in this test.
  const pairs: { refreshToken: string }[] = [];
  for (const gw of gateways) {
    const pair = await pairOn(gw);
    const res = await refresh(gw, pair.refreshToken);
    assert.equal(res.status, 200, show(res));
    pairs.push(res.body.message);
  }

  await t.test('disabled: sign-in and refresh refused on both', async () => {
    await change((k) => ({ ...k, disabled: true }));
    for (const [i, gw] of gateways.entries()) {
      await until(`gateway ${i} refuses the disabled key's sign-in`, async () => (await signIn(gw)).status === 401);
      assert.equal((await refresh(gw, pairs[i]!.refreshToken)).status, 401, `gateway ${i}: the disabled key's refresh`);
    }
    await change((k) => ({ ...k, disabled: false }));
    for (const [i, gw] of gateways.entries()) {
      await until(`gateway ${i} signs the enabled key in again`, async () => (await signIn(gw)).status === 200);
    }
  });

  await t.test('rolled without overlap: the old secret refused on both, the new one signs in', async () => {
    await change((k) => ({ ...k, secretDigest: storedDigest('sk_key_cache_rolled') }));
    for (const [i, gw] of gateways.entries()) {
      await until(`gateway ${i} refuses the replaced secret`, async () => (await signIn(gw)).status === 401);
      assert.equal((await signIn(gw, 'sk_key_cache_rolled')).status, 200, `gateway ${i}: the new secret`);
    }
  });

  await t.test('deleted: sign-in and refresh refused on both', async () => {
    const fresh: { refreshToken: string }[] = [];
    for (const gw of gateways) fresh.push(await pairOn(gw, 'sk_key_cache_rolled'));
    await change(() => undefined);
    for (const [i, gw] of gateways.entries()) {
      await until(`gateway ${i} refuses the deleted key's sign-in`, async () => (await signIn(gw, 'sk_key_cache_rolled')).status === 401);
      assert.equal((await refresh(gw, fresh[i]!.refreshToken)).status, 401, `gateway ${i}: the deleted key's refresh`);
    }
  });
});

test('KEY_SOURCE=redis: putKey (keys:create --redis, keys:import) announces its writes', redisSuite(), async (t) => {
  const { redis, gateways } = await setup(t);
  for (const gw of gateways) await pairOn(gw);
  const record = { keyId: KEY.id, accountId: ACCOUNT.id, secretDigest: KEY.secretDigest, disabled: true, scopes: KEY.scopes };
  await new RedisKeyDirectory(redis).putKey(KEY.apiKey, record);
  for (const [i, gw] of gateways.entries()) {
    await until(`gateway ${i} refuses the key putKey disabled`, async () => (await signIn(gw)).status === 401);
  }
});

test('KEY_SOURCE=redis: a write nobody announced is served until keyCacheTtlMs, a gap in the notices drops the cache', redisSuite(), async (t) => {
  const { server, gateways: [gw] } = await setup(t);
  const raw = await rawRedisClient(t, server);
  const keys = keysOf(gw!);
  // The key's record, in its account's slot (the names by apiKey and key id lead there).
  const disableByHand = () => raw.hset(`gw:akey:{${ACCOUNT.id}}:${KEY.id}`, 'disabled', '1');
  const enableByHand = () => raw.hset(`gw:akey:{${ACCOUNT.id}}:${KEY.id}`, 'disabled', '0');

  await t.test('unannounced: the cached record until the TTL ends, then the one in Redis', async () => {
    await pairOn(gw!);
    await disableByHand();
    assert.equal((await signIn(gw!)).status, 200, 'the cached (enabled) record, as nothing announced the write');
    gw!.clock.advance(TTL_MS - 1);
    assert.equal((await signIn(gw!)).status, 200, 'still within the TTL');
    gw!.clock.advance(1);
    assert.equal((await signIn(gw!)).status, 401, 'read again past the TTL: disabled');
  });

  await t.test('a gap (the subscriber cut off and back): nothing cached before it is served', async () => {
    await enableByHand();
    gw!.clock.advance(TTL_MS);
    await pairOn(gw!);
    await disableByHand();
    assert.equal((await signIn(gw!)).status, 200, 'cached');
    await raw.client('KILL', 'TYPE', 'pubsub');
    // Subscribed again on a new connection (so the gateway saw the old one close).
    await subscribed(server, t, 1);
    // Until the cache serves again (a sign-in that reads nothing): what it then serves must be
    // what was read after the gap, not the copy from before it.
    const statuses: number[] = [];
    await until('the cache serves again after the gap', async () => {
      const reads = keys.reads;
      statuses.push((await signIn(gw!)).status);
      return keys.reads === reads;
    });
    assert.ok(statuses.every((s) => s === 401), `every sign-in after the gap refused: ${statuses.join(' ')}`);
  });
});

test('KEY_SOURCE=redis: the writing instance drops its own copies before the change returns, not when its notice comes back', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const redis = await connectedRedis(redisSettings(server.url));
  t.after(() => redis.close());
  // The real connection, but a keys channel whose notices never arrive (listening all along):
  // only the writer's own drop can make the change visible here.
  const deaf = Object.assign(Object.create(redis) as typeof redis, { subscribe: () => ({ listening: true }) });
  const keys = new RedisKeyDirectory(deaf, { cache: { ttlMs: 60_000, maxEntries: 100, clock: { now: () => 0 } } });
  const store = new RedisOwnerStore(redis, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents: 100, onKeysWritten: () => keys.dropCache() });
  assert.equal(await store.createAccount(ACCOUNT, []), true);
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, false);
  const reads = keys.reads;
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, false);
  assert.equal(keys.reads, reads, 'the second lookup is served from the cache');

  await t.test('an owner-store change', async () => {
    await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, apiKeys: doc.apiKeys.map((k) => ({ ...k, disabled: true })) }, events: [], result: undefined }));
    assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, true);
    assert.equal((await keys.findByKeyId(KEY.id))?.disabled, true);
  });

  await t.test('its own putKey', async () => {
    await keys.findByApiKey(KEY.apiKey);
    await keys.putKey(KEY.apiKey, { keyId: KEY.id, accountId: ACCOUNT.id, secretDigest: KEY.secretDigest, disabled: false, scopes: ['orders:write'] });
    assert.deepEqual((await keys.findByApiKey(KEY.apiKey))?.scopes, ['orders:write']);
  });
});
