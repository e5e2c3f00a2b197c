/**
 * Per-key usage with Redis: two in-process gateways on one redis-server (a key prefix of this
 * file's own) count into the same buckets, so either answers the sum of both; a gateway that
 * stops flushes what it held first; a flush that fails (Redis gone) is logged at warn, naming no
 * key, token or secret, and its counts are dropped (nothing held grows while Redis is away).
 * The keys come from the data file: with Redis configured the owner store only reads it, which
 * is all the usage operation needs (the account exists). The store's contract also runs on a
 * Redis Cluster of three masters: a batch spans accounts, whose buckets are in other slots.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { call, DEMO, logged, show, signIn, untilReady, type TestGateway } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner.js';
import { RedisUsageCounters } from '../../src/state/usage/redis.js';
import { runUsageCountersContract } from '../contracts/usage.contract.js';
import { connectedRedis, redisSettings, redisSuite, startRedis } from '../helpers/redis.js';
import { startRedisCluster } from '../helpers/redis-topologies.js';

const ACCOUNT = DEMO.alice.accountId;

async function redisGateway(t: TestContext, url: string, prefix: string): Promise<TestGateway> {
  const gw = await startOwnerGateway(t, { overrides: { redis: { url, keyPrefix: prefix, commandTimeoutMs: 300 } } });
  // Its first sign-in needs Redis: on a loaded machine the first connection may need a retry.
  await untilReady(gw);
  return gw;
}

async function itemsOn(gw: TestGateway): Promise<unknown> {
  const res = await operator(gw).get(`/accounts/${ACCOUNT}/usage?hours=1`);
  assert.equal(res.status, 200, show(res));
  return res.body.message.items;
}

async function rolesCalls(gw: TestGateway, token: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200);
}

test('usage in Redis: two gateways sum their counts, a stopping gateway flushes, a failed flush is dropped and logged without secrets', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const prefix = `usage-${process.pid}`;
  const a = await redisGateway(t, server.url, prefix);
  const b = await redisGateway(t, server.url, prefix);
  // Each gateway has a signing key of its own: each signs its callers in itself.
  const onA = await signIn(a, DEMO.alice);
  const onB = await signIn(b, DEMO.alice);
  const bobOnB = await signIn(b, DEMO.bob);

  await t.test('either gateway answers the counts of both', async () => {
    await rolesCalls(a, onA.accessToken, 3);
    await rolesCalls(b, onB.accessToken, 2);
    await rolesCalls(b, bobOnB.accessToken, 1);
    await a.services.usage!.flush();
    await b.services.usage!.flush();
    const expected = [{ keyId: DEMO.alice.keyId, requests: 5, rateLimited: 0, statuses: { '1xx': 0, '2xx': 5, '3xx': 0, '4xx': 0, '5xx': 0 } }];
    assert.deepEqual(await itemsOn(a), expected);
    assert.deepEqual(await itemsOn(b), expected);
  });

  await t.test('a gateway that stops flushes what it held', async () => {
    const c = await redisGateway(t, server.url, prefix);
    const onC = await signIn(c, DEMO.alice);
    await rolesCalls(c, onC.accessToken, 4);
    assert.equal(c.services.usage!.size, 1);
    await c.close();
    assert.deepEqual(await itemsOn(a), [{ keyId: DEMO.alice.keyId, requests: 9, rateLimited: 0, statuses: { '1xx': 0, '2xx': 9, '3xx': 0, '4xx': 0, '5xx': 0 } }]);
  });

  await t.test('another prefix on the same server is another gateway\'s: it sees none of it', async () => {
    const other = await redisGateway(t, server.url, `${prefix}-other`);
    assert.deepEqual(await itemsOn(other), []);
  });

  await t.test('Redis gone: the flush fails, is logged at warn without secrets, and its counts are dropped', async () => {
    await rolesCalls(a, onA.accessToken, 2);
    assert.equal(a.services.usage!.size, 1);
    await server.kill();
    await a.services.usage!.flush();
    assert.equal(a.services.usage!.size, 0, 'nothing kept for a retry');
    const warnings = logged(a, 'usage counts could not be written to the usage store: this flush\'s counts are dropped');
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]!.level, 40);
    assert.equal(warnings[0]!.dropped, 1);
    const text = JSON.stringify(warnings[0]);
    for (const secret of [onA.accessToken, onA.refreshToken, DEMO.alice.secret, DEMO.alice.apiKey, DEMO.alice.keyId]) {
      assert.ok(!text.includes(secret), 'the warning names no token, secret or key');
    }
  });
});

runUsageCountersContract('redis cluster (3 masters)', async () => {
  const cluster = await startRedisCluster();
  try {
    const redis = await connectedRedis(redisSettings('redis://unused', { url: undefined, clusterNodes: cluster.nodes, keyPrefix: 'usage' }));
    return {
      counters: new RedisUsageCounters(redis),
      now: Date.UTC(2026, 0, 1),
      close: async () => {
        await redis.close();
        await cluster.stop();
      },
    };
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}, redisSuite());
