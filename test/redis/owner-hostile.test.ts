/**
 * The owner API attacked where Redis holds the accounts (KEY_SOURCE=redis): what a malicious
 * owner can make Redis hold is bounded (test/http/owner-hostile.test.ts has the rest).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { redisKeys } from '../../src/state/redis/keys.js';
import { show } from '../helpers/gateway.js';
import { accountWithOwner, operator as operatorClient, startOwnerGateway } from '../helpers/owner.js';
import { rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';

test('Redis: an owner cannot grow an account document without bound (keys and API settings tokens are capped)', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startOwnerGateway(t, { overrides: { redis: { url: redis.url }, data: { keySource: 'redis' }, directory: { store: 'redis' } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_hoard', email: 'hoard@example.com', password: 'correct horse battery staple' });
  // 999 keys and 99 tokens written into the account's document behind the gateway (making
  // them one by one through the API rewrites the growing document each time: slow).
  const client = await rawRedisClient(t, redis);
  const accountKey = redisKeys(gw.services.config.redis.keyPrefix).account('acct_hoard');
  const stored = JSON.parse((await client.hget(accountKey, 'doc'))!);
  const hex = (prefix: string, i: number) => `sha256:${createHash('sha256').update(`${prefix}${i}`).digest('hex')}`;
  const createdAt = new Date().toISOString();
  for (let i = 0; i < 999; i++) stored.apiKeys.push({ id: `key_hoard_${i}`, apiKey: `ak_hoard_${i}`, secretDigest: hex('key', i), disabled: false, scopes: [] });
  for (let i = 0; i < 99; i++) stored.settingsTokens.push({ id: `stk_hoard_${i}`, name: `t${i}`, digest: hex('token', i), start: 'gwst_hoar', scopes: [], createdAt });
  await client.hset(accountKey, 'doc', JSON.stringify(stored));
  await client.hincrby(accountKey, 'v', 1);

  assert.equal((await owner.send('POST', '/accounts/acct_hoard/keys', { name: 'the thousandth' })).status, 201);
  const key = await owner.send('POST', '/accounts/acct_hoard/keys', { name: 'one too many' });
  assert.equal(key.status, 409, show(key));
  assert.equal((await owner.send('POST', '/accounts/acct_hoard/settings-tokens', { name: 'the hundredth' })).status, 201);
  const token = await owner.send('POST', '/accounts/acct_hoard/settings-tokens', { name: 'one too many' });
  assert.equal(token.status, 409, show(token));

  const doc = JSON.parse((await client.hget(accountKey, 'doc'))!);
  assert.equal(doc.apiKeys.length, 1000, 'Redis holds the thousand keys, no more');
  assert.equal(doc.settingsTokens.length, 100);
});

test('Redis: an unreadable client address from a trusted proxy does not make a change fail (it answered 503 store_unavailable)', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startOwnerGateway(t, { overrides: { proxy: { trustedProxies: ['127.0.0.1'] }, redis: { url: redis.url }, data: { keySource: 'redis' }, directory: { store: 'redis' } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_xff', email: 'xff@example.com', password: 'correct horse battery staple' });
  const res = await owner.send('POST', '/accounts/acct_xff/keys', { name: 'ci' }, { 'x-forwarded-for': 'y'.repeat(70) });
  assert.equal(res.status, 201, show(res));
  const audit = await owner.get('/accounts/acct_xff/audit?limit=1');
  assert.equal(audit.status, 200, show(audit));
  assert.ok(audit.body.message.items[0].ip.length <= 64);
});

const REDIS_OWNER = (url: string) => ({ redis: { url }, data: { keySource: 'redis' as const }, directory: { store: 'redis' as const } });

test('Redis: a lone surrogate in a key description is refused, so it cannot make the account unreadable (roles then answered 404 "No such account.")', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startOwnerGateway(t, { overrides: REDIS_OWNER(redis.url) });
  const owner = await accountWithOwner(gw, { accountId: 'acct_lone', email: 'lone@example.com', password: 'correct horse battery staple' });
  const key = await owner.send('POST', '/accounts/acct_lone/keys', { name: 'ci' });
  assert.equal(key.status, 201, show(key));
  const patched = await owner.send('PATCH', `/accounts/acct_lone/keys/${key.body.message.key.id}`, { description: '\udc00' });
  assert.equal(patched.status, 400, show(patched));
  assert.equal(patched.body.message.field, 'description');
  const role = await owner.send('POST', '/accounts/acct_lone/roles', { id: 1, slug: 'reader', name: 'Reader', public: true });
  assert.equal(role.status, 201, show(role));
});

test('Redis: a document its scripts cannot decode is a 502 bad_store_data naming the account in the log, never a missing account, and opens no breaker', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startOwnerGateway(t, { overrides: REDIS_OWNER(redis.url) });
  const owner = await accountWithOwner(gw, { accountId: 'acct_undecodable', email: 'undecodable@example.com', password: 'correct horse battery staple' });
  const other = await accountWithOwner(gw, { accountId: 'acct_fine', email: 'fine@example.com', password: 'correct horse battery staple' });
  const reader = { id: 1, slug: 'reader', name: 'Reader', public: true };
  const record = { address: `0x${'ab'.repeat(20)}`, signedNonce: 1, signedAt: '2026-01-01T00:00:00Z', signedExpiredAt: '2027-01-01T00:00:00Z' };
  assert.equal((await owner.send('POST', '/accounts/acct_undecodable/roles', reader)).status, 201);
  // Written behind the gateway, as older versions let the owner API write it: JSON.stringify
  // escapes the lone surrogate as \udc00, which JSON.parse reads and Redis's cjson refuses.
  const client = await rawRedisClient(t, redis);
  const keys = redisKeys(gw.services.config.redis.keyPrefix);
  const stored = JSON.parse((await client.hget(keys.account('acct_undecodable'), 'doc'))!);
  await client.hset(keys.account('acct_undecodable'), 'doc', JSON.stringify({ ...stored, name: 'broken \udc00' }));
  const operator = operatorClient(gw);

  const calls = [
    () => owner.send('POST', '/accounts/acct_undecodable/roles', { ...reader, id: 2, slug: 'writer' }),
    () => operator.send('POST', '/accounts/acct_undecodable/roles', { ...reader, id: 2, slug: 'writer' }),
    () => owner.send('DELETE', '/accounts/acct_undecodable/roles/1'),
    () => owner.send('POST', '/accounts/acct_undecodable/sign-records', record),
  ];
  for (const call of calls) {
    const res = await call();
    assert.equal(res.status, 502, show(res));
    assert.equal(res.body.message.code, 'bad_store_data');
  }
  // Many more at once than the breaker's threshold (5 failures in a row): an error reply about
  // data is no outage, so the other account's calls still go through.
  const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => owner.send('POST', '/accounts/acct_undecodable/roles', { ...reader, id: 10 + i, slug: `r${i}` })));
  assert.deepEqual([...new Set(burst.map((res) => res.status))], [502]);
  const line = gw.logs.map((l) => JSON.parse(l)).find((l) => l.code === 'bad_store_data');
  assert.ok(line !== undefined && String(line.cause).includes('acct_undecodable'), `the log names the account: ${JSON.stringify(line)}`);
  assert.ok(!gw.logs.some((l) => l.includes('broken')), 'the stored text itself is not logged');
  const fine = await other.send('POST', '/accounts/acct_fine/roles', reader);
  assert.equal(fine.status, 201, show(fine));

  await t.test('a role whose JSON cannot be decoded is an error too, not a role whose slug clashes with nothing', async () => {
    await client.hset(keys.roles('acct_fine'), '1', JSON.stringify({ ...reader, name: 'broken \udc00' }));
    const twin = await other.send('POST', '/accounts/acct_fine/roles', { ...reader, id: 2 });
    assert.equal(twin.status, 502, show(twin));
    assert.equal(twin.body.message.code, 'bad_store_data');
  });
});
