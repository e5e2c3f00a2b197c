/**
 * The Redis owner store behind several gateway instances, against a real redis-server: what
 * one instance's store writes, two real gateways (data.keySource and directory.store "redis",
 * a directory cache TTL far above the waits here) serve at once — a role in /api/roles by the
 * directory notice, an API key signing in, a disabled key or account refused; changes from two
 * instances to one account all survive; a deleted key stays deleted whatever of its tidying is
 * left undone; an index entry is believed only if the account agrees
 * (these on one server and on a Cluster of three masters, where a command spanning two slots
 * would fail with CROSSSLOT); sessions end by their TTL in Redis itself.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { Config } from '../../src/config/schema.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { RedisKeyDirectory } from '../../src/state/keys/redis.js';
import { RedisOwnerStore } from '../../src/state/owners/redis.js';
import type { AccountDoc } from '../../src/state/owners/store.js';
import type { RedisConnection } from '../../src/state/redis/client.js';
import { RedisSessionStore } from '../../src/state/sessions/redis.js';
import { systemClock } from '../../src/util/clock.js';
import { auditEvent } from '../contracts/owners.contract.js';
import { rolesCall, TTL_MS, until } from '../helpers/directory.js';
import { postJson, sha256Hex, show, startGateway, storedDigest, type TestGateway } from '../helpers/gateway.js';
import { connectedRedis, rawRedisClient, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';
import { startRedisCluster } from '../helpers/redis-topologies.js';

const SECRET = 'sk_owner_store_instances_secret';
const KEY = { id: 'key_inst_1', apiKey: 'ak_inst_1', secretDigest: storedDigest(SECRET), disabled: false, scopes: [] as string[] };
const ACCOUNT: AccountDoc = { id: 'acct_inst', name: 'Instances', enabled: true, createdAt: '2026-11-01T00:00:00.000Z', apiKeys: [KEY], members: [], invites: [], settingsTokens: [], webhooks: [] };
const NOTICE_DEADLINE_MS = 5000;

async function ownerStore(t: TestContext, url: string | Config['redis']): Promise<{ store: RedisOwnerStore; redis: RedisConnection }> {
  const redis = await connectedRedis(typeof url === 'string' ? redisSettings(url) : url);
  t.after(() => redis.close());
  return { store: new RedisOwnerStore(redis, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents: 100 }), redis };
}

function redisGateway(t: TestContext, url: string): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      redis: { url },
      data: { keySource: 'redis' },
      directory: { store: 'redis', cache: { ttlMs: TTL_MS, staleWhileRevalidateMs: 1000, negativeTtlMs: TTL_MS, maxStaleMs: 120_000 } },
    },
  });
}

function signIn(gw: TestGateway, apiKey = KEY.apiKey, secret = SECRET) {
  return postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: sha256Hex(secret) });
}

test('two gateways serve what one instance\'s owner store writes: roles by the notice, keys at once', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const { store } = await ownerStore(t, server.url);
  assert.equal(await store.createAccount(ACCOUNT, [auditEvent(Date.now(), 'account.create', ACCOUNT.id)]), true);
  const gateways = [await redisGateway(t, server.url), await redisGateway(t, server.url)];

  const tokens: string[] = [];
  for (const gw of gateways) {
    const res = await signIn(gw);
    assert.equal(res.status, 200, `a key the store wrote signs in on every instance: ${show(res)}`);
    tokens.push(res.body.message.accessToken);
  }

  await t.test('a role written through the store is served by both instances\' /api/roles within the notice', async () => {
    for (const [i, gw] of gateways.entries()) {
      const before = await rolesCall(gw, tokens[i]!);
      assert.equal(before.status, 200, show(before));
      assert.equal(before.body.message.total, 0, 'cached: no roles yet');
    }
    assert.equal(await store.putRole(ACCOUNT.id, { id: 7, slug: 'seven', name: 'Seven', description: '', public: true }, undefined, []), 'ok');
    for (const [i, gw] of gateways.entries()) {
      const ms = await until(`instance ${i} serves role 7`, async () => (await rolesCall(gw, tokens[i]!)).body?.message?.total === 1, NOTICE_DEADLINE_MS);
      t.diagnostic(`instance ${i}: role served after ${Math.round(ms)} ms (cache TTL ${TTL_MS} ms)`);
    }
    const listed = await rolesCall(gateways[1]!, tokens[1]!);
    assert.deepEqual(listed.body.message.items, [{ id: 7, slug: 'seven', name: 'Seven', description: '', public: 1 }]);
  });

  await t.test('a key disabled through the store refuses sign-in on both instances; enabled again, it signs in', async () => {
    await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, apiKeys: doc.apiKeys.map((k) => ({ ...k, disabled: true })) }, events: [], result: undefined }));
    for (const [i, gw] of gateways.entries()) await until(`instance ${i} refuses the disabled key`, async () => (await signIn(gw)).status === 401, NOTICE_DEADLINE_MS);
    await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, apiKeys: doc.apiKeys.map((k) => ({ ...k, disabled: false })) }, events: [], result: undefined }));
    for (const [i, gw] of gateways.entries()) await until(`instance ${i} signs in with the key enabled again`, async () => (await signIn(gw)).status === 200, NOTICE_DEADLINE_MS);
  });

  await t.test('a disabled account\'s keys refuse sign-in on both instances', async () => {
    // Key records (the account's state with them) are cached by each instance until the
    // store's notice arrives (state/keys/cache.ts): within the notice, not at once (the
    // project's CI once saw a sign-in beat it under load).
    await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, enabled: false }, events: [], result: undefined }));
    for (const [i, gw] of gateways.entries()) await until(`instance ${i} refuses the disabled account`, async () => (await signIn(gw)).status === 401, NOTICE_DEADLINE_MS);
    await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, enabled: true }, events: [], result: undefined }));
    for (const [i, gw] of gateways.entries()) await until(`instance ${i} signs in again`, async () => (await signIn(gw)).status === 200, NOTICE_DEADLINE_MS);
  });

  await t.test('a rolled key keeps its previous secret in the sign-in record until previousValidUntil', async () => {
    const validUntil = Date.now() + 60_000;
    await store.updateAccount(ACCOUNT.id, (doc) => ({
      doc: { ...doc, apiKeys: doc.apiKeys.map((k) => ({ ...k, secretDigest: storedDigest('sk_rolled'), previousSecretDigest: k.secretDigest, previousValidUntil: new Date(validUntil).toISOString() })) },
      events: [],
      result: undefined,
    }));
    const record = await gateways[0]!.services.keys.findByKeyId(KEY.id);
    assert.equal(record?.secretDigest, storedDigest('sk_rolled'));
    assert.equal(record?.previousSecretDigest, KEY.secretDigest);
    assert.equal(record?.previousValidUntil, validUntil);
    await until('the new secret signs in on the other instance', async () => (await signIn(gateways[1]!, KEY.apiKey, 'sk_rolled')).status === 200, NOTICE_DEADLINE_MS);
  });

  await t.test('a deleted key refuses sign-in on both instances, and nothing of its records is left', async () => {
    await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, apiKeys: [] }, events: [], result: undefined }));
    for (const [i, gw] of gateways.entries()) await until(`instance ${i} refuses the deleted key`, async () => (await signIn(gw, KEY.apiKey, 'sk_rolled')).status === 401, NOTICE_DEADLINE_MS);
    const raw = await rawRedisClient(t, server);
    assert.equal(await raw.exists(`gw:key:${KEY.id}`, `gw:apikey:${KEY.apiKey}`, `gw:akey:{${ACCOUNT.id}}:${KEY.id}`), 0);
  });
});

for (const topology of ['one server', 'cluster'] as const) test(`changes from two instances to one account all survive; a deleted key stays deleted (${topology})`, redisSuite(), async (t) => {
  const settings = topology === 'cluster'
    ? redisSettings('redis://unused', { url: undefined, clusterNodes: (await startRedisCluster(t)).nodes })
    : redisSettings((await startRedis(t)).url);
  const a = await ownerStore(t, settings);
  const b = await ownerStore(t, settings);
  assert.equal(await a.store.createAccount({ ...ACCOUNT, apiKeys: [] }, []), true);

  await t.test('20 concurrent changes on each of two instances: all 40 kept, with their events', async () => {
    await Promise.all([a.store, b.store].flatMap((store, s) => Array.from({ length: 20 }, (_, i) => store.updateAccount(ACCOUNT.id, (doc) => ({
      doc: { ...doc, invites: [...doc.invites, { id: `inv_${s}_${i}`, email: 'x@example.com', digest: `sha256:${sha256Hex(`${s}.${i}`)}`, createdAt: ACCOUNT.createdAt!, expiresAt: ACCOUNT.createdAt! }] },
      events: [auditEvent(Date.now(), 'invite.create', `inv_${s}_${i}`)],
      result: undefined,
    })))));
    const doc = await b.store.readAccount(ACCOUNT.id);
    assert.equal(doc?.invites.length, 40);
    assert.equal((await a.store.listAudit(ACCOUNT.id, { limit: 100 })).length, 40);
    // Every invite is found by its digest, from either instance.
    assert.equal((await a.store.findInvite(`sha256:${sha256Hex('1.19')}`))?.invite.id, 'inv_1_19');
  });

  await t.test('a key deleted by an instance that died before deleting its pointers stays deleted', async () => {
    const k = a.redis.keys;
    const doomed = { ...KEY, id: 'key_doomed', apiKey: 'ak_doomed' };
    await a.store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, apiKeys: [doomed] }, events: [], result: undefined }));
    const keys = new RedisKeyDirectory(b.redis);
    assert.equal((await keys.findByApiKey(doomed.apiKey))?.keyId, doomed.id);
    // The dying instance: its change is stored (the script, with the key's tombstone), nothing after it.
    const stored = await a.redis.run((c) => c.hgetall(k.account(ACCOUNT.id)));
    const without = { ...JSON.parse(stored.doc!), apiKeys: [] };
    const version = await a.redis.run((c) => c.gwOwnerUpdateAccount(
      6, k.account(ACCOUNT.id), k.audit(ACCOUNT.id), k.roleIndex(ACCOUNT.id), k.roles(ACCOUNT.id), k.signRecords(ACCOUNT.id), k.accountKey(ACCOUNT.id, doomed.id),
      stored.v!, JSON.stringify(without), '0', 100, k.directoryChannel, JSON.stringify({ kind: 'account', accountId: ACCOUNT.id }),
      k.keysChannel, JSON.stringify({ accountId: ACCOUNT.id }), '0', '',
    ));
    assert.ok(version > 0);
    assert.equal(await keys.findByApiKey(doomed.apiKey), undefined, 'the pointer leads to a tombstone');
    assert.equal(await keys.findByKeyId(doomed.id), undefined);
    await b.store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, name: 'next change' }, events: [], result: undefined }));
    assert.equal(await keys.findByApiKey(doomed.apiKey), undefined);
  });

  await t.test('a createAccount refused for a taken id writes no index entry', async () => {
    const k = a.redis.keys;
    const digest = `sha256:${'5'.repeat(64)}`;
    const again = { ...ACCOUNT, apiKeys: [{ ...KEY, id: 'key_again', apiKey: 'ak_again' }], settingsTokens: [{ id: 'st_again', name: 'x', digest, start: 'gwst_xxxx', scopes: [], createdAt: ACCOUNT.createdAt! }] };
    assert.equal(await b.store.createAccount(again, []), false);
    assert.equal(await a.redis.run((c) => c.get(k.settingsToken(digest))), null);
    for (const name of [k.apiKey('ak_again'), k.keyId('key_again')]) assert.equal(await a.redis.run((c) => c.exists(name)), 0);
  });

  await t.test('an index entry is believed only if the account agrees', async () => {
    const k = a.redis.keys;
    const digest = `sha256:${'9'.repeat(64)}`;
    await a.redis.run((c) => c.set(k.settingsToken(digest), ACCOUNT.id));
    await a.redis.run((c) => c.set(k.invite(digest), ACCOUNT.id));
    await a.redis.run((c) => c.sadd(k.ownerAccounts('own_stray'), ACCOUNT.id));
    await a.redis.run((c) => c.set(k.ownerEmail('stray@example.com'), 'own_stray'));
    assert.equal(await b.store.findSettingsToken(digest), undefined);
    assert.equal(await b.store.findInvite(digest), undefined);
    assert.deepEqual(await b.store.accountsOf('own_stray'), []);
    assert.equal(await b.store.findOwnerByEmail('stray@example.com'), undefined);
    // A stale email claim does not keep the email from an owner who wants it.
    const owner = { id: 'own_real', email: 'stray@example.com', passwordHash: 'x', mustChangePassword: false, disabled: false, createdAt: ACCOUNT.createdAt! };
    assert.equal(await b.store.createOwner(owner), true);
    assert.equal((await a.store.findOwnerByEmail('STRAY@example.com'))?.id, 'own_real');
  });
});

test('sessions end by their TTL in Redis itself; the owner\'s set lives as long as the longest session', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const redis = await connectedRedis(redisSettings(server.url));
  t.after(() => redis.close());
  const sessions = new RedisSessionStore(redis, { clock: systemClock });
  const raw = await rawRedisClient(t, server);
  const now = Date.now();
  await sessions.create('sha256:idle', { ownerId: 'own_ttl', csrfToken: 'c', createdAt: now, idleExpiresAt: now + 600, expiresAt: now + 60_000 });
  await sessions.create('sha256:long', { ownerId: 'own_ttl', csrfToken: 'c', createdAt: now, idleExpiresAt: now + 30_000, expiresAt: now + 40_000 });
  const ttl = await raw.pttl('gw:sess:sha256:idle');
  assert.ok(ttl > 0 && ttl <= 600, `the idle deadline is the TTL (PTTL ${ttl})`);
  const setTtl = await raw.pttl('gw:owner-sess:own_ttl');
  assert.ok(setTtl > 55_000 && setTtl <= 60_000, `the owner's set lives as long as the longest absolute end (PTTL ${setTtl})`);
  await new Promise((r) => setTimeout(r, 800));
  assert.equal(await raw.exists('gw:sess:sha256:idle'), 0, 'gone from Redis without being read');
  assert.equal(await raw.exists('gw:sess:sha256:long'), 1);
  await sessions.touch('sha256:long', Date.now() + 120_000);
  const capped = await raw.pttl('gw:sess:sha256:long');
  assert.ok(capped <= 40_000, `touch caps the TTL at the absolute end (PTTL ${capped})`);
});
