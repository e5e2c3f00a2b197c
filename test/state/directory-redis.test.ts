/**
 * RedisDirectory against a real redis-server: the Directory contract over imported data; records
 * written by hand in the documented layout (other representations are read, malformed ones are
 * BadStoreData); the name search computed in Redis agreeing with MemoryDirectory over a big
 * account; change notices heard across connections, malformed notices and reconnects as gaps;
 * a stalled Redis as StoreTimeout and a stopped one as StoreUnavailable.
 *
 * The layout is spelled out here literally (`gw:roles:{acct}`, `gw:role:{acct}`,
 * `gw:sign:{acct}`, channel `gw:directory`), as a dashboard or collector written elsewhere
 * would, rather than taken from src/state/redis/keys.ts.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { Redis } from 'ioredis';
import type { Config } from '../../src/config/schema.js';
import { StoreTimeout, StoreUnavailable } from '../../src/errors/errors.js';
import { dataFileSchema, type DataFile } from '../../src/state/data-file/data-file.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { MemoryDirectory } from '../../src/state/directory/memory.js';
import { RedisDirectory } from '../../src/state/directory/redis.js';
import type { DirectoryChange, Role } from '../../src/state/directory/store.js';
import { connectRedis, type RedisConnection } from '../../src/state/redis/client.js';
import { DIRECTORY_FIXTURE, runDirectoryContract } from '../contracts/directory.contract.js';
import { ADDRESS, expectBadStoreData, PROMPT_MS, rejection, timedPromise } from '../helpers/directory.js';
import { connectedRedis, rawRedisClient, redisSettings, redisSuite, silentLog, startRedis, type TestRedis } from '../helpers/redis.js';

// ADDRESS (the fixture's sign record), PROMPT_MS, timedPromise, rejection and expectBadStoreData:
// test/helpers/directory.ts.

function newDirectory(redis: RedisConnection, timeZone = 'UTC'): RedisDirectory {
  return new RedisDirectory(redis, { records: createRecordReader(timeZone), log: silentLog });
}

/** A connection of the gateway's client to `server`, closed in t.after. */
async function connectTo(t: TestContext, server: TestRedis, extra: Partial<Config['redis']> = {}): Promise<RedisConnection> {
  const redis = await connectedRedis(redisSettings(server.url, { commandTimeoutMs: 5000, ...extra }));
  t.after(() => redis.close());
  return redis;
}

// runDirectoryContract takes no test options: where redisSuite() skips, a placeholder of the
// same name is skipped (loudly) instead; elsewhere, under CI too, the contract runs.
const redisOptions = redisSuite();
if (redisOptions.skip) {
  test('Directory contract: redis', redisOptions, () => {});
} else {
  runDirectoryContract('redis', async (data) => {
    const server = await startRedis();
    let redis: RedisConnection | undefined;
    const close = async () => {
      await redis?.close();
      await server.stop();
    };
    try {
      redis = await connectedRedis(redisSettings(server.url, { commandTimeoutMs: 5000 }));
      const directory = newDirectory(redis);
      const expected = {
        roles: data.accounts.reduce((n, a) => n + a.roles.length, 0),
        signRecords: data.accounts.reduce((n, a) => n + a.signRecords.length, 0),
      };
      assert.deepEqual(await directory.importData(data), expected);
      return { directory, close };
    } catch (err) {
      await close();
      throw err;
    }
  });
}

test('RedisDirectory: imported data sits in the documented layout', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const directory = newDirectory(await connectTo(t, server));
  const raw = await rawRedisClient(t, server);
  await directory.importData(DIRECTORY_FIXTURE);

  assert.deepEqual(await raw.zrange('gw:roles:{acct_a}', 0, -1, 'WITHSCORES'), ['1', '1', '2', '2', '3', '3', '4', '4', '5', '5']);
  assert.deepEqual(JSON.parse((await raw.hget('gw:role:{acct_a}', '1'))!), { id: 1, slug: 'r1', name: 'Odd Role 1', description: 'role 1', public: true });
  assert.deepEqual(await raw.hkeys('gw:sign:{acct_a}'), [ADDRESS], 'sign records are keyed by the lowercase address');
  const record = JSON.parse((await raw.hget('gw:sign:{acct_a}', ADDRESS))!);
  assert.equal(record.signedNonce, 42);
  assert.equal(Date.parse(record.signedAt), Date.UTC(2026, 2, 1, 12));
  assert.equal(Date.parse(record.signedExpiredAt), Date.UTC(2026, 2, 31, 10));
  assert.deepEqual(await raw.zrange('gw:roles:{acct_b}', 0, -1), ['9']);
  assert.equal(await raw.exists('gw:sign:{acct_b}'), 0, 'an account without sign records gets no hash');
});

test('RedisDirectory: records written by hand in other representations are normalised', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const redis = await connectTo(t, server);
  const directory = newDirectory(redis);
  const acct = 'acct_hand';
  const roleJson: [number | string, unknown][] = [
    // Written the way the interface's listing shows them, or as another tool would.
    [1, { id: '1', slug: 'one', name: 'One', description: 'first', public: '1' }],
    [2, { id: 2, slug: 'two', name: 'Two', description: null, public: true }],
    [3, { id: 3, slug: 'three', name: 'Three', public: 0 }],
    [4, { slug: 'four', name: 'Four', description: 'no id in the JSON', public: 'false' }],
    [10, { id: 10, slug: 'ten', name: 'Ten', description: 'ten', public: 'true', extra: 'ignored', createdAt: '2020-01-01' }],
    [11, { id: '11', slug: 11, name: 'Eleven', description: '', public: '0' }],
  ];
  await redis.run(async (c) => {
    for (const [id, json] of roleJson) {
      await c.zadd(`gw:roles:{${acct}}`, Number(id), String(id));
      await c.hset(`gw:role:{${acct}}`, String(id), JSON.stringify(json));
    }
    return undefined;
  });

  await t.test('roles: string ids, public as "1"/true/0/"false"/"0", description null or absent', async () => {
    const page = await directory.listRoles(acct, { offset: 0, limit: 10 });
    assert.equal(page.total, 6);
    assert.deepEqual(page.items, [
      { id: 1, slug: 'one', name: 'One', description: 'first', public: true },
      { id: 2, slug: 'two', name: 'Two', description: '', public: true },
      { id: 3, slug: 'three', name: 'Three', description: '', public: false },
      { id: 4, slug: 'four', name: 'Four', description: 'no id in the JSON', public: false },
      { id: 10, slug: 'ten', name: 'Ten', description: 'ten', public: true },
      { id: 11, slug: '11', name: 'Eleven', description: '', public: false },
    ]);
    for (const role of page.items) assert.deepEqual(Object.keys(role).sort(), ['description', 'id', 'name', 'public', 'slug'], 'fields the gateway does not use are dropped');
    // Numeric order (the score), not the members' string order ("10" < "2").
    assert.deepEqual((await directory.listRoles(acct, { offset: 4, limit: 2 })).items.map((r) => r.id), [10, 11]);
  });

  await t.test('a role JSON without "id" takes the id from the index, in a listing and in a search', async () => {
    assert.deepEqual(await directory.listRoles(acct, { offset: 3, limit: 1 }), {
      items: [{ id: 4, slug: 'four', name: 'Four', description: 'no id in the JSON', public: false }],
      total: 6,
    });
    assert.deepEqual(await directory.listRoles(acct, { offset: 0, limit: 10, nameContains: 'fOU' }), {
      items: [{ id: 4, slug: 'four', name: 'Four', description: 'no id in the JSON', public: false }],
      total: 1,
    });
  });

  const sign = (address: string, json: unknown) => redis.run((c) => c.hset(`gw:sign:{${acct}}`, address, JSON.stringify(json)));
  const at = Date.UTC(2026, 2, 1, 12, 30, 15);
  const expires = Date.UTC(2026, 3, 1, 0, 0, 0);

  await t.test('sign records: epoch ms, YYYY-MM-DD HH:MM:SS, ISO 8601 with an offset, the nonce as digits', async () => {
    const cases: [string, unknown][] = [
      ['epoch ms', { signedNonce: 7, signedAt: at, signedExpiredAt: expires }],
      ['local time (UTC)', { signedNonce: 7, signedAt: '2026-03-01 12:30:15', signedExpiredAt: '2026-04-01 00:00:00' }],
      ['ISO 8601 with offsets', { signedNonce: 7, signedAt: '2026-03-01T14:30:15+02:00', signedExpiredAt: '2026-03-31T19:00:00-05:00' }],
      ['nonce as digits, mixed times', { signedNonce: '7', signedAt: '2026-03-01T12:30:15.000Z', signedExpiredAt: '2026-04-01 00:00:00' }],
    ];
    for (const [i, [what, json]] of cases.entries()) {
      const address = `0x${String(i + 1).padStart(40, 'a')}`;
      await sign(address, json);
      assert.deepEqual(await directory.findSignRecord(acct, address), { address, signedNonce: 7, signedAt: at, signedExpiredAt: expires }, what);
    }
  });

  await t.test('YYYY-MM-DD HH:MM:SS is read in the configured time zone', async () => {
    const address = `0x${'b'.repeat(40)}`;
    await sign(address, { signedNonce: 1, signedAt: '2026-03-01 13:30:15', signedExpiredAt: '2026-07-01 02:00:00' });
    const berlin = newDirectory(redis, 'Europe/Berlin');
    // Berlin: +01:00 in March, +02:00 (summer time) in July.
    assert.deepEqual(await berlin.findSignRecord(acct, address), { address, signedNonce: 1, signedAt: at, signedExpiredAt: Date.UTC(2026, 6, 1, 0) });
    assert.equal((await directory.findSignRecord(acct, address))?.signedAt, Date.UTC(2026, 2, 1, 13, 30, 15), 'the same text in UTC');
  });
});

test('RedisDirectory: malformed records written by hand are BadStoreData, naming the field, never the value', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const redis = await connectTo(t, server);
  const directory = newDirectory(redis);
  const good = { slug: 's', name: 'Good name', description: '', public: 0 };
  /** One account per case, so that each listing fails for its own reason only. */
  async function roles(acct: string, entries: { member: string; score: number; json?: string }[]): Promise<void> {
    await redis.run(async (c) => {
      for (const { member, score, json } of entries) {
        await c.zadd(`gw:roles:{${acct}}`, score, member);
        if (json !== undefined) await c.hset(`gw:role:{${acct}}`, member, json);
      }
      return undefined;
    });
  }

  await t.test('role id "abc" (in the JSON, or only in the index)', async () => {
    await roles('acct_abc', [{ member: '1', score: 1, json: JSON.stringify({ ...good, id: 1 }) }, { member: 'abc', score: 2, json: JSON.stringify({ ...good, id: 'abc' }) }]);
    await expectBadStoreData(directory.listRoles('acct_abc', { offset: 0, limit: 10 }), 'id "abc" in the JSON', /role abc: id/);
    await roles('acct_abc2', [{ member: 'abc', score: 2, json: JSON.stringify(good) }]);
    await expectBadStoreData(directory.listRoles('acct_abc2', { offset: 0, limit: 10 }), 'id "abc" from the index', /role abc: id/);
    // The page before it does not touch it: only what is read must be readable.
    assert.deepEqual((await directory.listRoles('acct_abc', { offset: 0, limit: 1 })).items.map((r) => r.id), [1]);
  });

  await t.test('an index member without a hash record: in a listing, and in a search', async () => {
    await roles('acct_ghost', [{ member: '1', score: 1, json: JSON.stringify({ ...good, id: 1 }) }, { member: '2', score: 2 }]);
    await expectBadStoreData(directory.listRoles('acct_ghost', { offset: 0, limit: 10 }), 'listing', /role 2: in the index but not in the hash/);
    await expectBadStoreData(directory.listRoles('acct_ghost', { offset: 0, limit: 10, nameContains: 'good' }), 'search', /role 2/);
  });

  await t.test('role JSON that is not JSON: in a listing, and in a search', async () => {
    await roles('acct_notjson', [{ member: '3', score: 3, json: '{"id":3,"slug":"s","name":"N' }]);
    await expectBadStoreData(directory.listRoles('acct_notjson', { offset: 0, limit: 10 }), 'listing', /role 3: not JSON/);
    await expectBadStoreData(directory.listRoles('acct_notjson', { offset: 0, limit: 10, nameContains: 'n' }), 'search', /role 3/);
  });

  await t.test('a role whose JSON names another id', async () => {
    await roles('acct_otherid', [{ member: '5', score: 5, json: JSON.stringify({ ...good, id: 6 }) }]);
    await expectBadStoreData(directory.listRoles('acct_otherid', { offset: 0, limit: 10 }), 'listing', /role 5: its JSON names another id/);
    await expectBadStoreData(directory.listRoles('acct_otherid', { offset: 0, limit: 10, nameContains: 'good' }), 'search', /role 5: its JSON names another id/);
  });

  await t.test('a searched role without a name (or a JSON that is not an object): the search fails', async () => {
    await roles('acct_noname', [
      { member: '1', score: 1, json: JSON.stringify({ ...good, id: 1 }) },
      { member: '2', score: 2, json: JSON.stringify({ id: 2, slug: 's', description: '', public: 0 }) },
    ]);
    await expectBadStoreData(directory.listRoles('acct_noname', { offset: 0, limit: 10, nameContains: 'good' }), 'no name', /account acct_noname, role 2: no readable name/);
    await expectBadStoreData(directory.listRoles('acct_noname', { offset: 0, limit: 10 }), 'no name, listing', /role 2: name/);
    await roles('acct_array', [{ member: '1', score: 1, json: '[1,2]' }]);
    await expectBadStoreData(directory.listRoles('acct_array', { offset: 0, limit: 10, nameContains: 'x' }), 'an array', /role 1: no readable name/);
  });

  await t.test('bad role values: public "yes", an empty slug, a negative id', async () => {
    const cases: [string, unknown, RegExp][] = [
      ['public "yes"', { ...good, id: 1, public: 'yes' }, /role 1: public/],
      ['empty slug', { ...good, id: 1, slug: '' }, /role 1: slug/],
      ['id -1', { ...good, id: -1 }, /role 1: id/],
      ['id 1.5', { ...good, id: 1.5 }, /role 1: id/],
      ['id "01"', { ...good, id: '01' }, /role 1: id/],
    ];
    for (const [i, [what, json, mentions]] of cases.entries()) {
      const acct = `acct_value_${i}`;
      await roles(acct, [{ member: '1', score: 1, json: JSON.stringify(json) }]);
      await expectBadStoreData(directory.listRoles(acct, { offset: 0, limit: 10 }), what, mentions);
    }
  });

  await t.test('sign records: not JSON, bad times, bad nonce; the value stays out of the message', async () => {
    const acct = 'acct_badsign';
    const cases: [string, string, RegExp][] = [
      ['not JSON', 'SECRET-not-json{', /sign record: not JSON/],
      ['a date that does not exist', JSON.stringify({ signedNonce: 1, signedAt: '2026-02-30 10:00:00', signedExpiredAt: 0 }), /signedAt/],
      ['ISO 8601 without an offset', JSON.stringify({ signedNonce: 1, signedAt: 0, signedExpiredAt: '2026-03-01T12:00:00' }), /signedExpiredAt/],
      ['a time in words', JSON.stringify({ signedNonce: 1, signedAt: 'SECRET yesterday', signedExpiredAt: 0 }), /signedAt/],
      ['a negative nonce', JSON.stringify({ signedNonce: -1, signedAt: 0, signedExpiredAt: 0 }), /signedNonce/],
      ['a nonce "SECRET"', JSON.stringify({ signedNonce: 'SECRET', signedAt: 0, signedExpiredAt: 0 }), /signedNonce/],
      ['no signedAt', JSON.stringify({ signedNonce: 1, signedExpiredAt: 0 }), /signedAt/],
      ['a JSON string', JSON.stringify('SECRET'), /sign record/],
    ];
    for (const [i, [what, json, mentions]] of cases.entries()) {
      const address = `0x${String(i).padStart(40, 'c')}`;
      await redis.run((c) => c.hset(`gw:sign:{${acct}}`, address, json));
      const err = await expectBadStoreData(directory.findSignRecord(acct, address), what, mentions);
      const message = String((err.cause as Error).message);
      assert.ok(!message.includes('SECRET') && !err.message.includes('SECRET'), `${what}: the value is in the message: ${message}`);
    }
  });
});

/** Roles with names mixing case, Lua pattern characters and shared substrings; ids sparse and shuffled. */
function bigAccount(count: number): Role[] {
  const words = ['Alpha', 'beta', 'GAMMA', 'DeLtA', '100% (beta)', 'a.b*c', 'x-ray [v2]'];
  const roles: Role[] = [];
  for (let i = 0; i < count; i++) {
    const id = i * 3 + (i % 3);
    roles.push({ id, slug: `s${id}`, name: `${words[i % words.length]} role ${i}`, description: i % 5 === 0 ? '' : `d${i}`, public: i % 2 === 0 });
  }
  // A deterministic shuffle: the writes arrive in no particular order.
  for (let i = roles.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [roles[i], roles[j]] = [roles[j]!, roles[i]!];
  }
  return roles;
}

test('RedisDirectory: the name search over a big account agrees with MemoryDirectory, page by page', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const directory = newDirectory(await connectTo(t, server));
  const roles = bigAccount(2000);
  const data: DataFile = dataFileSchema.parse({ accounts: [{ id: 'acct_big', apiKeys: [], roles, signRecords: [] }] });
  const memory = new MemoryDirectory(data);
  assert.deepEqual(await directory.importData(data), { roles: 2000, signRecords: 0 });

  const needles = [undefined, '', 'alpha', 'ALPHA', 'BeTa', 'role 1', 'ROLE 19', 'a role 1', '% (', 'a.b*', '[v2]', '.', 'role', 'nothing like it', 'role 1999'];
  const pages: [number, number][] = [[0, 10], [0, 1], [5, 3], [490, 20], [499, 2], [500, 1], [995, 10], [1000, 100], [1499, 7], [1990, 100], [2000, 10], [5000, 10]];
  for (const nameContains of needles) {
    for (const [offset, limit] of pages) {
      const query = { offset, limit, ...(nameContains === undefined ? {} : { nameContains }) };
      const [fromRedis, fromMemory] = await Promise.all([directory.listRoles('acct_big', query), memory.listRoles('acct_big', query)]);
      assert.deepEqual(fromRedis, fromMemory, `query ${JSON.stringify(query)}`);
    }
  }
  // The comparison is not vacuous: searches that span several chunks of the script.
  const beta = await directory.listRoles('acct_big', { offset: 500, limit: 5, nameContains: 'beta' });
  assert.equal(beta.total, 572, '"beta" and "100% (beta)": 286 roles each');
  assert.equal(beta.items.length, 5);
  assert.ok(beta.items.every((r) => r.name.toLowerCase().includes('beta')));
  assert.equal((await directory.listRoles('acct_big', { offset: 0, limit: 1, nameContains: 'role' })).total, 2000);
  const last = await directory.listRoles('acct_big', { offset: 0, limit: 10, nameContains: 'role 1999' });
  assert.deepEqual(last.items.map((r) => r.id), [1999 * 3 + (1999 % 3)], 'the last role of the last chunk is found');
});

test('RedisDirectory: the search compares ASCII letters without case, other characters as they are', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const directory = newDirectory(await connectTo(t, server));
  await directory.putRoles('acct_text', [
    { id: 1, slug: 'a', name: 'Ärger im Büro', description: '', public: false },
    { id: 2, slug: 'b', name: 'ADMIN', description: '', public: false },
    { id: 3, slug: 'c', name: 'café', description: '', public: false },
  ]);
  const ids = async (nameContains: string) => (await directory.listRoles('acct_text', { offset: 0, limit: 10, nameContains })).items.map((r) => r.id);
  assert.deepEqual(await ids('admin'), [2]);
  assert.deepEqual(await ids('Admin'), [2]);
  assert.deepEqual(await ids('büro'), [1], 'non-ASCII text matches as written');
  assert.deepEqual(await ids('IM Bü'), [1], 'ASCII letters around it still ignore case');
  assert.deepEqual(await ids('café'), [3]);
  assert.deepEqual(await ids('%'), [], 'a Lua pattern character is matched literally');
});

test('RedisDirectory: a role whose name is written as a JSON number is listed, and searched, as text', redisSuite(), async (t) => {
  // directory-records.ts reads a name given as a number as its text ("name": 2024 → "2024"),
  // so a listing serves such a role; the search must then treat it alike, not fail the account.
  const server = await startRedis(t);
  const redis = await connectTo(t, server);
  const directory = newDirectory(redis);
  await redis.run(async (c) => {
    await c.zadd('gw:roles:{acct_num}', 1, '1', 2, '2');
    await c.hset('gw:role:{acct_num}', '1', JSON.stringify({ id: 1, slug: 'y', name: 2024, description: '', public: 0 }));
    await c.hset('gw:role:{acct_num}', '2', JSON.stringify({ id: 2, slug: 'o', name: 'Other', description: '', public: 0 }));
    return undefined;
  });
  const numeric = { id: 1, slug: 'y', name: '2024', description: '', public: false };
  const other = { id: 2, slug: 'o', name: 'Other', description: '', public: false };
  assert.deepEqual(await directory.listRoles('acct_num', { offset: 0, limit: 10 }), { items: [numeric, other], total: 2 }, 'the listing reads the name as text');
  assert.deepEqual(await directory.listRoles('acct_num', { offset: 0, limit: 10, nameContains: 'other' }), { items: [other], total: 1 }, 'a search for another role');
  assert.deepEqual(await directory.listRoles('acct_num', { offset: 0, limit: 10, nameContains: '202' }), { items: [numeric], total: 1 }, 'a search for the numeric name');
});

/** Everything a listener hears, in order, awaited one at a time. */
function recorder() {
  type Heard = { change: DirectoryChange } | { gap: true };
  const heard: Heard[] = [];
  let wake: (() => void) | undefined;
  const push = (h: Heard) => {
    heard.push(h);
    wake?.();
  };
  return {
    listener: { onChange: (change: DirectoryChange) => push({ change }), onGap: () => push({ gap: true }) },
    heard,
    /** The next thing heard, within `limitMs`. */
    async next(limitMs = 5000): Promise<Heard> {
      const deadline = Date.now() + limitMs;
      while (heard.length === 0) {
        const left = deadline - Date.now();
        if (left <= 0) assert.fail(`nothing heard within ${limitMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
      return heard.shift()!;
    },
  };
}

/** Waits until `count` connections subscribe to the directory channel. */
async function subscribed(raw: Redis, count = 1, limitMs = 5000): Promise<void> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const [, n] = (await raw.pubsub('NUMSUB', 'gw:directory')) as [string, number];
    if (Number(n) >= count) return;
    if (Date.now() > deadline) assert.fail(`no subscriber on gw:directory within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A fresh redis-server, a raw client on it, and a RedisDirectory watching it with a recorder
 * listening: the first connection of the subscriber (a gap) already heard, the subscription in place.
 */
async function watchedRedis(t: TestContext): Promise<{ server: TestRedis; raw: Redis; watcher: RedisDirectory; heard: ReturnType<typeof recorder> }> {
  const server = await startRedis(t);
  const raw = await rawRedisClient(t, server);
  const watcher = newDirectory(await connectTo(t, server));
  const heard = recorder();
  watcher.watch(heard.listener);
  assert.deepEqual(await heard.next(), { gap: true }, 'the first connection of the subscriber is a gap');
  await subscribed(raw);
  return { server, raw, watcher, heard };
}

test('RedisDirectory: writes of one connection are heard by another as the right change', redisSuite(), async (t) => {
  const { server, raw, watcher, heard } = await watchedRedis(t);
  const writer = newDirectory(await connectTo(t, server));

  const role: Role = { id: 7, slug: 'r7', name: 'Seven', description: '', public: true };
  await writer.putRoles('acct_w', [role]);
  assert.deepEqual(await heard.next(), { change: { kind: 'roles', accountId: 'acct_w' } }, 'putRoles');
  assert.deepEqual((await watcher.listRoles('acct_w', { offset: 0, limit: 10 })).items, [role], 'the change is readable when announced');

  const record = { address: ADDRESS, signedNonce: 3, signedAt: Date.UTC(2026, 0, 1), signedExpiredAt: Date.UTC(2026, 1, 1) };
  await writer.putSignRecord('acct_w', record);
  assert.deepEqual(await heard.next(), { change: { kind: 'sign', accountId: 'acct_w', address: ADDRESS } }, 'putSignRecord');
  assert.deepEqual(await watcher.findSignRecord('acct_w', ADDRESS), record);

  await writer.deleteRoles('acct_w', [7]);
  assert.deepEqual(await heard.next(), { change: { kind: 'roles', accountId: 'acct_w' } }, 'deleteRoles');
  assert.deepEqual(await watcher.listRoles('acct_w', { offset: 0, limit: 10 }), { items: [], total: 0 });

  await writer.deleteSignRecord('acct_w', ADDRESS);
  assert.deepEqual(await heard.next(), { change: { kind: 'sign', accountId: 'acct_w', address: ADDRESS } }, 'deleteSignRecord');
  assert.equal(await watcher.findSignRecord('acct_w', ADDRESS), undefined);

  // Notices published by hand, as the dashboard would.
  await raw.publish('gw:directory', JSON.stringify({ kind: 'account', accountId: 'acct_x' }));
  assert.deepEqual(await heard.next(), { change: { kind: 'account', accountId: 'acct_x' } }, 'an account notice');
  await raw.publish('gw:directory', JSON.stringify({ kind: 'sign', accountId: 'acct_x', address: ADDRESS.toUpperCase().replace('0X', '0x'), extra: 1 }));
  assert.deepEqual(await heard.next(), { change: { kind: 'sign', accountId: 'acct_x', address: ADDRESS } }, 'the address of a notice is lowercased');
  await raw.publish('gw:other', JSON.stringify({ kind: 'account', accountId: 'acct_y' }));
  await raw.publish('gw:directory', JSON.stringify({ kind: 'roles', accountId: 'acct_z' }));
  assert.deepEqual(await heard.next(), { change: { kind: 'roles', accountId: 'acct_z' } }, 'another channel is not listened to');
  assert.equal(heard.heard.length, 0, 'nothing more');
});

test('RedisDirectory: a malformed notice on the channel is a gap', redisSuite(), async (t) => {
  const { raw, heard } = await watchedRedis(t);

  const malformed = [
    'not json',
    'null',
    '[]',
    '"roles"',
    JSON.stringify({ kind: 'roles' }),
    JSON.stringify({ kind: 'roles', accountId: 'acct with space' }),
    JSON.stringify({ kind: 'roles', accountId: 42 }),
    JSON.stringify({ kind: 'sign', accountId: 'acct_a' }),
    JSON.stringify({ kind: 'sign', accountId: 'acct_a', address: '0x1234' }),
    JSON.stringify({ kind: 'everything', accountId: 'acct_a' }),
  ];
  for (const message of malformed) {
    await raw.publish('gw:directory', message);
    assert.deepEqual(await heard.next(), { gap: true }, `"${message}" is a gap`);
  }
  // The listener goes on hearing well-formed notices after them.
  await raw.publish('gw:directory', JSON.stringify({ kind: 'roles', accountId: 'acct_a' }));
  assert.deepEqual(await heard.next(), { change: { kind: 'roles', accountId: 'acct_a' } });
});

test('RedisDirectory: a reconnect of the subscriber is a gap, and notices are heard again after it', redisSuite(), async (t) => {
  const { server, raw, heard } = await watchedRedis(t);

  await t.test('CLIENT KILL TYPE pubsub', async () => {
    const killed = await raw.client('KILL', 'TYPE', 'pubsub');
    assert.equal(killed, 1, 'one subscriber connection was killed');
    assert.deepEqual(await heard.next(), { gap: true }, 'the reconnect');
    await subscribed(raw);
    await raw.publish('gw:directory', JSON.stringify({ kind: 'roles', accountId: 'acct_after_kill' }));
    assert.deepEqual(await heard.next(), { change: { kind: 'roles', accountId: 'acct_after_kill' } }, 'subscribed again');
  });

  await t.test('the server restarted (empty)', async () => {
    await server.restart();
    assert.deepEqual(await heard.next(10_000), { gap: true }, 'the reconnect to the new server');
    const fresh = await rawRedisClient(t, server);
    await subscribed(fresh);
    await fresh.publish('gw:directory', JSON.stringify({ kind: 'account', accountId: 'acct_after_restart' }));
    assert.deepEqual(await heard.next(), { change: { kind: 'account', accountId: 'acct_after_restart' } }, 'subscribed again');
  });
});

test('RedisDirectory: a stalled Redis is StoreTimeout, a stopped one StoreUnavailable, both prompt', redisSuite(), async (t) => {
  const commandTimeoutMs = 300;
  const server = await startRedis(t);
  const seed = newDirectory(await connectTo(t, server));
  await seed.importData(DIRECTORY_FIXTURE);
  // A breaker that opens only after four failures: the first three below each reach Redis.
  const directory = newDirectory(await connectTo(t, server, { commandTimeoutMs, breakerFailures: 4, breakerCooldownMs: 10_000 }));
  assert.equal((await directory.listRoles('acct_a', { offset: 0, limit: 2 })).total, 5, 'answers before the stall');

  server.pause();
  t.after(() => server.resume());
  const calls: [string, () => Promise<unknown>][] = [
    ['findSignRecord', () => directory.findSignRecord('acct_a', ADDRESS)],
    ['listRoles', () => directory.listRoles('acct_a', { offset: 0, limit: 2 })],
    ['listRoles with a name', () => directory.listRoles('acct_a', { offset: 0, limit: 2, nameContains: 'odd' })],
  ];
  for (const [what, call] of calls) {
    const { value: err, ms } = await timedPromise(rejection(call(), what));
    assert.ok(err instanceof StoreTimeout, `${what} with Redis stalled: expected StoreTimeout, got ${String(err)}`);
    assert.equal(err.status, 504);
    assert.equal(err.code, 'store_timeout');
    assert.ok(ms < commandTimeoutMs + PROMPT_MS, `${what} took ${Math.round(ms)} ms`);
  }
  // The writes time out the same way.
  const write = await timedPromise(rejection(directory.putRoles('acct_a', []), 'putRoles'));
  assert.ok(write.value instanceof StoreTimeout, `putRoles with Redis stalled: ${String(write.value)}`);
  // Four failures in a row: the breaker is open, and the next call fails at once without waiting.
  const open = await timedPromise(rejection(directory.findSignRecord('acct_a', ADDRESS), 'breaker open'));
  assert.ok(open.value instanceof StoreUnavailable, `with the breaker open: ${String(open.value)}`);
  assert.match(String((open.value.cause as Error).message), /circuit breaker/, 'failed by the breaker, not by Redis');
  assert.ok(open.ms < commandTimeoutMs, `with the breaker open the call waited ${Math.round(open.ms)} ms`);

  server.resume();
  // A fresh connection (no breaker history): Redis answers again, then is stopped.
  const after = newDirectory(await connectTo(t, server, { commandTimeoutMs, breakerFailures: 100 }));
  assert.equal((await after.listRoles('acct_a', { offset: 0, limit: 2 })).total, 5, 'answers after the resume');
  await server.kill();
  for (const [what, call] of [
    ['findSignRecord', () => after.findSignRecord('acct_a', ADDRESS)],
    ['listRoles', () => after.listRoles('acct_a', { offset: 0, limit: 2 })],
    ['listRoles with a name', () => after.listRoles('acct_a', { offset: 0, limit: 2, nameContains: 'odd' })],
    ['putSignRecord', () => after.putSignRecord('acct_a', { address: ADDRESS, signedNonce: 1, signedAt: 0, signedExpiredAt: 0 })],
  ] as const) {
    const { value: err, ms } = await timedPromise(rejection(call(), what));
    assert.ok(err instanceof StoreUnavailable, `${what} with Redis stopped: expected StoreUnavailable, got ${String(err)}`);
    assert.equal(err.status, 503, what);
    assert.ok(err.headers['Retry-After'] !== undefined, `${what}: Retry-After`);
    assert.ok(ms < PROMPT_MS, `${what} with Redis stopped took ${Math.round(ms)} ms`);
  }
});

test('RedisDirectory: a Redis that was never there is StoreUnavailable at once', redisSuite(), async (t) => {
  const server = await startRedis(t);
  await server.kill();
  const redis = connectRedis(redisSettings(server.url, { connectTimeoutMs: 500 }), silentLog);
  t.after(() => redis.close());
  const directory = newDirectory(redis);
  for (const call of [() => directory.findSignRecord('acct_a', ADDRESS), () => directory.listRoles('acct_a', { offset: 0, limit: 10 })]) {
    const { value: err, ms } = await timedPromise(rejection(call(), 'no Redis'));
    assert.ok(err instanceof StoreUnavailable, String(err));
    assert.ok(ms < PROMPT_MS, `took ${Math.round(ms)} ms`);
  }
});
