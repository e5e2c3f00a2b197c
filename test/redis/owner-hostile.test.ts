/**
 * The owner API attacked where Redis holds the accounts (KEY_SOURCE=redis): what a malicious
 * owner can make Redis hold is bounded (test/http/owner-hostile.test.ts has the rest).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { redisKeys } from '../../src/stores/redis/keys.js';
import { show } from '../helpers/gateway.js';
import { accountWithOwner, startOwnerGateway } from '../helpers/owner.js';
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
