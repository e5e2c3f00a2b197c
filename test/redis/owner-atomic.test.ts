/**
 * An account change and the sign-in records of its keys are one step in Redis (issue 26):
 *
 *  - a gateway that dies right after the script that stores the account (its connection refuses
 *    every later call: the process is gone) leaves no disabled or deleted key signing in, on one
 *    server and on a Cluster of three primaries (a script spanning two slots fails there);
 *  - end to end: a running gateway that has the key cached refuses it once the dying instance's
 *    change is stored;
 *  - adding a key to a large account writes that key's records only (every command Redis
 *    receives is watched with MONITOR);
 *  - records an older version wrote outside the account's slot keep signing in until the
 *    account's first change, which moves them and retires the strays it names.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { Config } from '../../src/config/schema.js';
import { StoreUnavailable } from '../../src/errors/errors.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { RedisKeyDirectory } from '../../src/state/keys/redis.js';
import { RedisOwnerStore } from '../../src/state/owners/redis.js';
import type { AccountDoc } from '../../src/state/owners/store.js';
import type { RedisClient, RedisConnection } from '../../src/state/redis/client.js';
import { until } from '../helpers/directory.js';
import { postJson, sha256Hex, show, startGateway, storedDigest } from '../helpers/gateway.js';
import { connectedRedis, rawRedisClient, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';
import { startRedisCluster } from '../helpers/redis-topologies.js';

const SECRET = 'sk_atomic_owner_change_secret';
const key = (n: number | string) => ({ id: `key_atomic_${n}`, apiKey: `ak_atomic_${n}`, secretDigest: storedDigest(SECRET), disabled: false, scopes: [] as string[] });
const KEY = key(1);
const ACCOUNT: AccountDoc = { id: 'acct_atomic', name: 'Atomic', enabled: true, createdAt: '2026-11-01T00:00:00.000Z', apiKeys: [KEY], members: [], invites: [], settingsTokens: [], webhooks: [] };

/**
 * The gateway process of `redis` as it dies right after the script that stores an account
 * change: every call it makes after that script answered fails (a dead process writes nothing
 * more). Redis itself is real; only this instance's later calls are cut.
 */
function dyingAfterAccountScript(redis: RedisConnection): RedisConnection & { readonly died: boolean } {
  let died = false;
  const watched = (client: RedisClient) => new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== 'gwOwnerUpdateAccount' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        const answer = await value.apply(target, args);
        died = true;
        return answer;
      };
    },
  });
  return Object.assign(Object.create(redis) as RedisConnection, {
    get died() { return died; },
    keys: redis.keys,
    run<T>(call: (client: RedisClient) => Promise<T>): Promise<T> {
      if (died) return Promise.reject(new StoreUnavailable(new Error('the process is gone')));
      return redis.run((c) => call(watched(c)));
    },
  });
}

async function stores(t: TestContext, settings: Config['redis']) {
  const redis = await connectedRedis(settings);
  t.after(() => redis.close());
  const other = await connectedRedis(settings);
  t.after(() => other.close());
  const make = (connection: RedisConnection) => new RedisOwnerStore(connection, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents: 100 });
  return { redis, store: make(redis), dying: () => make(dyingAfterAccountScript(redis)), keys: new RedisKeyDirectory(other) };
}

/** A change made by an instance that dies right after its account script; whether its caller heard back does not matter. */
async function changeAndDie(store: RedisOwnerStore, change: (doc: AccountDoc) => AccountDoc): Promise<void> {
  await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: change(doc), events: [], result: undefined })).catch((err: unknown) => {
    if (!(err instanceof StoreUnavailable)) throw err;
  });
}

for (const topology of ['one server', 'cluster'] as const) test(`a gateway dying right after an account change leaves no disabled or deleted key signing in (${topology})`, redisSuite(), async (t) => {
  const settings = topology === 'cluster'
    ? redisSettings('redis://unused', { url: undefined, clusterNodes: (await startRedisCluster(t)).nodes })
    : redisSettings((await startRedis(t)).url);
  const { store, dying, keys } = await stores(t, settings);
  assert.equal(await store.createAccount({ ...ACCOUNT, apiKeys: [KEY, key(2), key(3)] }, []), true);
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, false, 'the key signs in before');

  await changeAndDie(dying(), (doc) => ({ ...doc, apiKeys: doc.apiKeys.map((k) => (k.id === KEY.id ? { ...k, disabled: true } : k)) }));
  assert.equal((await store.readAccount(ACCOUNT.id))?.apiKeys[0]?.disabled, true, 'the change is stored');
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, true, 'the disabled key is disabled by apiKey');
  assert.equal((await keys.findByKeyId(KEY.id))?.disabled, true, 'and by key id (refresh)');

  await changeAndDie(dying(), (doc) => ({ ...doc, apiKeys: doc.apiKeys.filter((k) => k.id !== key(2).id) }));
  assert.equal(await keys.findByApiKey(key(2).apiKey), undefined, 'the deleted key is gone by apiKey');
  assert.equal(await keys.findByKeyId(key(2).id), undefined, 'and by key id');

  await changeAndDie(dying(), (doc) => ({ ...doc, enabled: false }));
  assert.equal((await keys.findByApiKey(key(3).apiKey))?.disabled, true, 'a disabled account\'s key is disabled');

  // The next change by a live instance tidies up and serves the same.
  await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, enabled: true }, events: [], result: undefined }));
  assert.equal((await keys.findByApiKey(key(3).apiKey))?.disabled, false);
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, true);
  assert.equal(await keys.findByApiKey(key(2).apiKey), undefined);
});

test('end to end: a key disabled by an instance that dies right after storing it is refused at sign-in by a running gateway', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const { store, dying } = await stores(t, redisSettings(server.url));
  assert.equal(await store.createAccount(ACCOUNT, []), true);
  const gw = await startGateway(t, { overrides: { redis: { url: server.url }, data: { keySource: 'redis' } } });
  const signIn = () => postJson(`${gw.url}/api/signin`, { apiKey: KEY.apiKey, apiSecret: sha256Hex(SECRET) });
  const before = await signIn();
  assert.equal(before.status, 200, `signs in (and the gateway keeps the record): ${show(before)}`);

  await changeAndDie(dying(), (doc) => ({ ...doc, apiKeys: doc.apiKeys.map((k) => ({ ...k, disabled: true })) }));
  // The change's notice went out in the same script: the gateway drops its copy when it arrives.
  await until('the disabled key is refused', async () => (await signIn()).status === 401, 5000);
  const after = await signIn();
  assert.equal(after.status, 401, `the disabled key stays refused: ${show(after)}`);
});

test('adding a key to an account of 40 keys writes that key\'s records and no other key\'s', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const { store, keys } = await stores(t, redisSettings(server.url));
  const many = Array.from({ length: 40 }, (_, i) => key(`m${i}`));
  assert.equal(await store.createAccount({ ...ACCOUNT, apiKeys: many }, []), true);

  const monitor = await (await rawRedisClient(t, server)).monitor();
  t.after(() => monitor.disconnect());
  const seen: string[][] = [];
  let sawMarker: () => void = () => {};
  const marked = new Promise<void>((resolve) => { sawMarker = resolve; });
  monitor.on('monitor', (_time: string, args: string[]) => {
    seen.push(args);
    if (args[1] === 'gw:monitor-marker') sawMarker();
  });
  const fresh = key('new');
  await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, apiKeys: [...doc.apiKeys, fresh] }, events: [], result: undefined }));
  // A marker through the same server: every command before it has been seen by then.
  const marker = await rawRedisClient(t, server);
  await marker.get('gw:monitor-marker');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([marked, new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('MONITOR never showed the marker')), 10_000); })]).finally(() => clearTimeout(timer));

  // Every name a key's records may have, old layout and new (the account's JSON names every key,
  // but it is a value, not a key name).
  const names = (k: typeof KEY) => [`gw:key:${k.id}`, `gw:apikey:${k.apiKey}`, `gw:akey:{${ACCOUNT.id}}:${k.id}`];
  const otherNames = new Set(many.flatMap(names));
  const writes = seen.filter(([command]) => !['hgetall', 'get', 'exists', 'smembers', 'zrange', 'monitor'].includes(command!.toLowerCase()));
  const others = writes.filter((args) => args.some((arg) => otherNames.has(arg)));
  assert.deepEqual(others.map((args) => args.slice(0, 3).join(' ')), [], 'no command touches another key\'s records');
  assert.ok(writes.some((args) => args.some((arg) => names(fresh).includes(arg))), 'the new key\'s records are written');
  assert.equal((await keys.findByApiKey(fresh.apiKey))?.keyId, fresh.id);
  assert.equal((await keys.findByApiKey(many[7]!.apiKey))?.keyId, many[7]!.id);
});

test('records an older version wrote outside the account\'s slot sign in until the account\'s first change, which moves them and retires its strays', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const { store, keys } = await stores(t, redisSettings(server.url));
  const raw = await rawRedisClient(t, server);
  const stray = key('stray');
  // As an older version left things: the account without `keysInSlot`, records by apiKey and by
  // key id with `v`, named in the account's set; a stray deleted key whose records were never retired.
  await raw.hset('gw:acct:{acct_atomic}', 'doc', JSON.stringify(ACCOUNT), 'v', '3');
  await raw.zadd('gw:accounts', 0, ACCOUNT.id);
  const legacy = (k: typeof KEY, disabled: string) => ({ keyId: k.id, accountId: ACCOUNT.id, secretDigest: k.secretDigest, disabled, scopes: '', v: '3' });
  for (const k of [KEY, stray]) {
    await raw.hset(`gw:key:${k.id}`, legacy(k, '0'));
    await raw.hset(`gw:apikey:${k.apiKey}`, legacy(k, '0'));
    await raw.sadd('gw:acct-keys:{acct_atomic}', `gw:key:${k.id}`, `gw:apikey:${k.apiKey}`);
  }
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, false, 'an older version\'s record signs in');

  await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, name: 'renamed' }, events: [], result: undefined }));
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.keyId, KEY.id, 'served from the account\'s slot');
  assert.equal((await keys.findByKeyId(KEY.id))?.keyId, KEY.id);
  assert.deepEqual(await raw.hgetall(`gw:apikey:${KEY.apiKey}`), { home: ACCOUNT.id, keyId: KEY.id }, 'the old record is a pointer now');
  assert.equal(await keys.findByApiKey(stray.apiKey), undefined, 'the stray is retired');
  assert.equal(await raw.exists(`gw:key:${stray.id}`, 'gw:acct-keys:{acct_atomic}'), 0);

  await store.updateAccount(ACCOUNT.id, (doc) => ({ doc: { ...doc, apiKeys: doc.apiKeys.map((k) => ({ ...k, disabled: true })) }, events: [], result: undefined }));
  assert.equal((await keys.findByApiKey(KEY.apiKey))?.disabled, true);
});
