/**
 * An API key's last use, as owners see it in the key view (GET …/keys and …/keys/{id}): recorded
 * at a successful sign-in, never at a refused one, and written at most once per 5 minutes per
 * key and instance (auth/key-use.ts), in memory or in Redis (state/key-use/store.ts), where a second
 * instance sees it; recording it changes nothing in the account (no audit event). The write is
 * off the sign-in's path, so the test waits for it.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import { createRecordReader } from '../../src/state/directory/records.js';
import { RedisKeyUseStore } from '../../src/state/key-use/redis.js';
import { RedisOwnerStore } from '../../src/state/owners/redis.js';
import type { AccountDoc } from '../../src/state/owners/store.js';
import { auditEvent } from '../contracts/owners.contract.js';
import { DEMO, postJson, sha256Hex, show, startGateway, storedDigest, type TestGateway } from '../helpers/gateway.js';
import { ADMIN_TOKEN, operator, startOwnerGateway } from '../helpers/owner.js';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { connectedRedis, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';

const FIVE_MINUTES = 300_000;

function signIn(gw: TestGateway, apiKey: string, secret: string) {
  return postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: sha256Hex(secret) });
}

async function lastUsed(gw: TestGateway, accountId: string, keyId: string): Promise<string | undefined> {
  const res = await operator(gw).get(`/accounts/${accountId}/keys/${keyId}`);
  assert.equal(res.status, 200, show(res));
  return res.body.message.lastUsedAt;
}

/** Waits (bounded) until the key's lastUsedAt is `expected`: the write follows the sign-in's answer. */
async function until(gw: TestGateway, accountId: string, keyId: string, expected: string): Promise<void> {
  let seen: string | undefined;
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(20)) {
    seen = await lastUsed(gw, accountId, keyId);
    if (seen === expected) return;
  }
  assert.equal(seen, expected, 'the key\'s last use was recorded');
}

test('memory: a key shows no last use until it signs in, then the sign-in\'s time, renewed at most every 5 minutes', async (t) => {
  const gw = await startOwnerGateway(t);
  const { accountId, keyId, apiKey, secret } = DEMO.alice;
  assert.equal(await lastUsed(gw, accountId, keyId), undefined, 'never used');
  assert.equal((await signIn(gw, apiKey, 'not the secret')).status, 401);
  assert.equal((await signIn(gw, DEMO.aliceDisabled.apiKey, DEMO.aliceDisabled.secret)).status, 401);

  const first = new Date(gw.clock.now()).toISOString();
  assert.equal((await signIn(gw, apiKey, secret)).status, 200);
  await until(gw, accountId, keyId, first);
  const listed = await operator(gw).get(`/accounts/${accountId}/keys`);
  assert.deepEqual(listed.body.message.items.map((k: { id: string; lastUsedAt?: string }) => [k.id, k.lastUsedAt]), [[keyId, first], [DEMO.aliceDisabled.keyId, undefined]], 'in the listing too; refused sign-ins record nothing');

  // A sign-in within 5 minutes is not written; one after them is.
  gw.clock.advance(FIVE_MINUTES - 1000);
  assert.equal((await signIn(gw, apiKey, secret)).status, 200);
  gw.clock.advance(2000);
  const later = new Date(gw.clock.now()).toISOString();
  assert.equal((await signIn(gw, apiKey, secret)).status, 200);
  await until(gw, accountId, keyId, later);
  const audit = await operator(gw).get(`/accounts/${accountId}/audit`);
  assert.deepEqual(audit.body.message.items, [], 'a sign-in is no change to the account');
});

test('Redis: the last use is kept in Redis, so another instance shows it', redisSuite(), async (t: TestContext) => {
  const server = await startRedis(t);
  const redis = await connectedRedis(redisSettings(server.url));
  t.after(() => redis.close());
  const store = new RedisOwnerStore(redis, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents: 100 });
  const secret = 'sk_last_used_redis_secret';
  const key = { id: 'key_used_1', apiKey: 'ak_used_1', secretDigest: storedDigest(secret), disabled: false, scopes: [] as string[] };
  const account: AccountDoc = { id: 'acct_used', name: 'Used', enabled: true, createdAt: '2026-11-01T00:00:00.000Z', apiKeys: [key], members: [], invites: [], settingsTokens: [], webhooks: [] };
  assert.equal(await store.createAccount(account, [auditEvent(Date.now(), 'account.create', account.id)]), true);
  const overrides = { redis: { url: server.url }, data: { keySource: 'redis' }, owner: { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)] } };
  const [one, two] = [await startGateway(t, { overrides }), await startGateway(t, { overrides })];

  const at = new Date(one.clock.now()).toISOString();
  assert.equal((await signIn(one, key.apiKey, secret)).status, 200);
  await until(two, account.id, key.id, at);
  assert.deepEqual(await new RedisKeyUseStore(redis).read(account.id), new Map([[key.id, Date.parse(at)]]), 'kept in Redis');
  assert.equal((await store.readAccount(account.id))?.apiKeys[0]?.id, key.id);
});
