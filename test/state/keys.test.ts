import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryKeyDirectory } from '../../src/state/keys/memory.js';
import { RedisKeyDirectory } from '../../src/state/keys/redis.js';
import type { KeyDirectory } from '../../src/state/keys/store.js';
import { connectRedis, type RedisConnection } from '../../src/state/redis/client.js';
import { systemClock } from '../../src/util/clock.js';
import { runKeyDirectoryContract } from '../contracts/keys.contract.js';
import { redisSettings, redisSuite, silentLog, startRedis, type TestRedis } from '../helpers/redis.js';

runKeyDirectoryContract('memory', async (data) => ({ keys: new MemoryKeyDirectory(data), close: async () => {} }));

/** A fresh server and one connection to it, ready for use. */
async function connectFresh(): Promise<{ server: TestRedis; redis: RedisConnection; close(): Promise<void> }> {
  const server = await startRedis();
  const redis = connectRedis(redisSettings(server.url), silentLog);
  const close = async () => {
    await redis.close();
    await server.stop();
  };
  if (!(await redis.waitUntilReady(5000))) {
    await close();
    throw new Error(`no connection to ${server.url} within 5 s`);
  }
  return { server, redis, close };
}

// runKeyDirectoryContract takes no test options: where redisSuite() skips, a placeholder of
// the same name is skipped (loudly) instead; elsewhere, under CI too, the contract runs.
const redisOptions = redisSuite();
if (redisOptions.skip) {
  test('KeyDirectory contract: redis', redisOptions, () => {});
} else {
  runKeyDirectoryContract('redis', async (data) => {
    const { redis, close } = await connectFresh();
    const keys = new RedisKeyDirectory(redis);
    assert.equal(await keys.importKeys(data), data.accounts.reduce((n, a) => n + a.apiKeys.length, 0));
    return { keys, close };
  });
  // As the gateway reads them (KEY_SOURCE=redis): through the key-record cache, each lookup twice.
  runKeyDirectoryContract('redis, cached', async (data) => {
    const { redis, close } = await connectFresh();
    const keys = new RedisKeyDirectory(redis, { cache: { ttlMs: 60_000, maxEntries: 100, clock: systemClock } });
    assert.equal(await keys.importKeys(data), data.accounts.reduce((n, a) => n + a.apiKeys.length, 0));
    // Until the keys channel's subscription is confirmed nothing is kept: wait for a lookup served from the cache.
    const deadline = Date.now() + 5000;
    for (let reads = -1; reads !== keys.reads; await keys.findByApiKey('ak_first_key')) {
      assert.ok(Date.now() < deadline, 'the cache serves within 5 s');
      reads = keys.reads;
      await new Promise((r) => setTimeout(r, 10));
    }
    const twice: KeyDirectory = {
      findByApiKey: async (apiKey) => (await keys.findByApiKey(apiKey), keys.findByApiKey(apiKey)),
      findByKeyId: async (keyId) => (await keys.findByKeyId(keyId), keys.findByKeyId(keyId)),
    };
    return { keys: twice, close };
  });
}

test('RedisKeyDirectory: a hand-written malformed record counts as absent', redisSuite(), async (t) => {
  const { redis, close } = await connectFresh();
  t.after(close);
  const keys = new RedisKeyDirectory(redis);
  const good = { keyId: 'key_ok', accountId: 'acct_a', secretDigest: `sha256:${'ab'.repeat(32)}`, disabled: '0' };
  /** Writes one record under both names, as an operator's tool might, bypassing putKey's checks. */
  async function write(apiKey: string, fields: Record<string, string>): Promise<void> {
    await redis.run((c) => c.hset(redis.keys.apiKey(apiKey), fields));
    if (fields.keyId !== undefined) await redis.run((c) => c.hset(redis.keys.keyId(fields.keyId!), fields));
  }

  await t.test('the well-formed control record written the same way is found by both names', async () => {
    await write('ak_control', good);
    const expected = { keyId: 'key_ok', accountId: 'acct_a', secretDigest: good.secretDigest, disabled: false, scopes: [] };
    assert.deepEqual(await keys.findByApiKey('ak_control'), expected);
    assert.deepEqual(await keys.findByKeyId('key_ok'), expected);
    await write('ak_control_off', { ...good, keyId: 'key_ok_off', disabled: '1' });
    assert.equal((await keys.findByApiKey('ak_control_off'))?.disabled, true);
    await write('ak_control_scoped', { ...good, keyId: 'key_ok_scoped', scopes: 'orders:read reports' });
    assert.deepEqual((await keys.findByKeyId('key_ok_scoped'))?.scopes, ['orders:read', 'reports']);
  });

  const { keyId: _k, ...noKeyId } = good;
  const { accountId: _a, ...noAccountId } = good;
  const { secretDigest: _s, ...noDigest } = good;
  const { disabled: _d, ...noDisabled } = good;
  const malformed: [string, Record<string, string>][] = [
    ['missing keyId', noKeyId],
    ['missing accountId', { ...noAccountId, keyId: 'key_no_account' }],
    ['missing secretDigest', { ...noDigest, keyId: 'key_no_digest' }],
    ['missing disabled', { ...noDisabled, keyId: 'key_no_disabled' }],
    ['digest too short', { ...good, keyId: 'key_short', secretDigest: `sha256:${'ab'.repeat(31)}` }],
    ['digest in uppercase hex', { ...good, keyId: 'key_upper', secretDigest: `sha256:${'AB'.repeat(32)}` }],
    ['digest of another hash', { ...good, keyId: 'key_md5', secretDigest: `md5:${'ab'.repeat(32)}` }],
    ['digest without its prefix', { ...good, keyId: 'key_bare', secretDigest: 'ab'.repeat(32) }],
    ['disabled "yes"', { ...good, keyId: 'key_yes', disabled: 'yes' }],
    ['disabled "true"', { ...good, keyId: 'key_true', disabled: 'true' }],
    ['disabled empty', { ...good, keyId: 'key_empty', disabled: '' }],
    ['key id with a space', { ...good, keyId: 'key 1' }],
    ['account id with a space', { ...good, keyId: 'key_space_acct', accountId: 'acct a' }],
    ['empty key id', { ...good, keyId: '' }],
    ['scopes with a double space', { ...good, keyId: 'key_scope_gap', scopes: 'a  b' }],
    ['scope with a quote', { ...good, keyId: 'key_scope_quote', scopes: 'a "b"' }],
  ];

  await t.test('missing field, bad digest, disabled other than 0/1, id with a space: absent by apiKey and by id', async () => {
    for (const [i, [what, fields]] of malformed.entries()) {
      const apiKey = `ak_malformed_${i}`;
      await write(apiKey, fields);
      assert.equal(await keys.findByApiKey(apiKey), undefined, `${what}, by apiKey`);
      if (fields.keyId !== undefined) assert.equal(await keys.findByKeyId(fields.keyId), undefined, `${what}, by key id`);
    }
    // The records are really there: absent because malformed, not because unwritten.
    const stored = await redis.run((c) => c.hgetall(redis.keys.apiKey('ak_malformed_8')));
    assert.equal(stored.disabled, 'yes');
  });

  await t.test('putKey refuses to write what findBy* would not read back', async () => {
    await assert.rejects(keys.putKey('ak_refused', { keyId: 'key 2', accountId: 'acct_a', secretDigest: good.secretDigest, disabled: false, scopes: [] }), TypeError);
    await assert.rejects(keys.putKey('ak_refused', { keyId: 'key_2', accountId: 'acct_a', secretDigest: 'sha256:nope', disabled: false, scopes: [] }), TypeError);
    await assert.rejects(keys.putKey('ak_refused', { keyId: 'key_2', accountId: 'acct_a', secretDigest: good.secretDigest, disabled: false, scopes: ['two words'] }), TypeError);
    assert.equal(await keys.findByApiKey('ak_refused'), undefined);
  });
});
