/**
 * /readyz against real redis-server processes: it lists every check (redis, directory,
 * signingKeys); "redis" means Redis takes a WRITE (a SET with a short PX of a key under the
 * prefix), so a server that answers PING but refuses writes is not ready; on a Cluster every
 * primary takes one, so a killed primary makes the instance unready at the next probe (a PING
 * answered by a live node kept one ready for 13 s while sign-ins failed), and a stalled one
 * makes it unready once the write has waited redis.commandTimeoutMs.
 *
 * These gateways set readiness.requireRedis, so that a Redis down is a 503; without it the
 * instance stays ready, `degraded` (test/redis/readiness-degraded.test.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, DEMO, postJson, sha256Hex, show, startGateway, untilReady, type TestGateway } from '../helpers/gateway.js';
import { rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';
import { redisCli, startRedisCluster } from '../helpers/redis-topologies.js';

const ALL_UP = { redis: 'up', directory: 'up', signingKeys: 'up' };
const REDIS_DOWN = { redis: 'down', directory: 'up', signingKeys: 'up' };

async function readyz(gw: TestGateway) {
  return call(`${gw.url}/readyz`);
}

async function assertReadiness(gw: TestGateway, status: 200 | 503, checks: Record<string, string>, what: string): Promise<void> {
  const res = await readyz(gw);
  assert.equal(res.status, status, `${what}: ${show(res)}`);
  assert.deepEqual(res.body, { success: status === 200, message: { status: status === 200 ? 'ready' : 'unavailable', checks } }, what);
}

const signIn = (gw: TestGateway) => postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });

test('standalone: /readyz writes a short-lived key under the prefix, and a Redis refusing writes is not ready', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const raw = await rawRedisClient(t, redis);
  const gw = await startGateway(t, { overrides: { redis: { url: redis.url, keyPrefix: 'gwready', breakerFailures: 1000 }, readiness: { requireRedis: true } } });

  await t.test('every check is listed, all up', async () => {
    await untilReady(gw);
    await assertReadiness(gw, 200, ALL_UP, 'a healthy Redis');
  });

  await t.test('the check wrote its key under the prefix, with a PX of a few seconds', async () => {
    const keys = await raw.keys('gwready:readyz:*');
    assert.deepEqual(keys, ['gwready:readyz:{standalone}']);
    const ttl = await raw.pttl(keys[0]!);
    assert.ok(ttl > 0 && ttl <= 5000, `PTTL ${ttl}`);
  });

  await t.test('answering PING but refusing writes (min-replicas-to-write, no replica): redis down', async () => {
    await raw.config('SET', 'min-replicas-to-write', '1');
    assert.equal(await raw.ping(), 'PONG', 'PING still answered');
    await assertReadiness(gw, 503, REDIS_DOWN, 'writes refused');
    // The instance is rightly out: a sign-in needs a write.
    assert.equal((await signIn(gw)).status, 503);
  });

  await t.test('writes taken again: ready', async () => {
    await raw.config('SET', 'min-replicas-to-write', '0');
    await assertReadiness(gw, 200, ALL_UP, 'writes taken again');
  });
});

test('Cluster: /readyz writes on every primary, and one killed primary makes it unready at once', redisSuite(), async (t) => {
  const cluster = await startRedisCluster(t);
  const gw = await startGateway(t, { overrides: { redis: { clusterNodes: cluster.nodes, keyPrefix: 'gwready', breakerFailures: 1000 }, readiness: { requireRedis: true } } });

  await t.test('ready, and each primary holds a readiness key of its own slots', async () => {
    // A fresh Cluster client may need a slots refresh before its first write goes through.
    await untilReady(gw);
    await assertReadiness(gw, 200, ALL_UP, 'a healthy Cluster');
    for (const port of cluster.ports) {
      const keys = (await redisCli(port, ['--no-raw', 'keys', 'gwready:readyz:*'])).match(/"[^"]*"/g) ?? [];
      assert.equal(keys.length, 1, `node ${port} holds one readiness key: ${keys.join(', ')}`);
    }
  });

  await t.test('a primary killed: the next /readyz is 503 with redis down, not after a slots refresh', async () => {
    await cluster.killNode(cluster.ports[1]!);
    await assertReadiness(gw, 503, REDIS_DOWN, 'a primary killed');
    await assertReadiness(gw, 503, REDIS_DOWN, 'asked again');
  });
});

test('Cluster: a stalled primary (SIGSTOP) makes /readyz 503 once the write times out', redisSuite(), async (t) => {
  const cluster = await startRedisCluster(t);
  const gw = await startGateway(t, { overrides: { redis: { clusterNodes: cluster.nodes, commandTimeoutMs: 300, breakerFailures: 1000 }, readiness: { requireRedis: true } } });
  // 300 ms for three writes at once is short on a loaded machine: a precondition, so asked until it holds.
  await untilReady(gw);
  await assertReadiness(gw, 200, ALL_UP, 'a healthy Cluster');
  // Its connections stay up: only the bound on the check (commandTimeoutMs) can tell.
  cluster.pauseNode(cluster.ports[2]!);
  await assertReadiness(gw, 503, REDIS_DOWN, 'a primary stalled');
});
