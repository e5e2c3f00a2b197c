/**
 * A Redis Cluster (3 primaries, no replicas) with a primary killed: every call to its slots
 * fails within redis.commandTimeoutMs, as StoreUnavailable (503 with Retry-After), while the
 * other primaries keep answering. ioredis's failover retries (100 ms apart, up to 16, its
 * command timeout starting only at the first send to a node) once made such calls fail 600 to
 * 700 ms after they began against a 500 ms timeout.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StoreUnavailable } from '../../src/errors/errors.js';
import { connectRedis } from '../../src/stores/redis/client.js';
import { redisSettings, redisSuite, silentLog } from '../helpers/redis.js';
import { startRedisCluster } from '../helpers/redis-topologies.js';

test('Cluster with a primary killed: every call to its slots fails within commandTimeoutMs, the others still answer', redisSuite(), async (t) => {
  const cluster = await startRedisCluster(t);
  // Long enough that "within the timeout" leaves no doubt on a loaded machine (the failures now
  // come in milliseconds), short enough that ioredis's old retries (16 redirections, 100 ms
  // apart) would have outlasted it: before the fix they failed only after the timeout, which
  // started late.
  const COMMAND_TIMEOUT_MS = 1000;
  const redis = connectRedis(redisSettings('redis://unused', { url: undefined, clusterNodes: cluster.nodes, commandTimeoutMs: COMMAND_TIMEOUT_MS, breakerFailures: 1000 }), silentLog);
  t.after(() => redis.close());
  assert.equal(await redis.waitUntilReady(10_000), true);
  // Keys spread over every primary: {0} … {29} land in many slots.
  const keys = Array.from({ length: 30 }, (_, i) => `gwtimeout:{${i}}`);
  for (const key of keys) await redis.run((c) => c.set(key, 'v'));

  await cluster.killNode(cluster.ports[0]!);
  let failed = 0;
  let answered = 0;
  for (let round = 0; round < 5; round++) {
    await Promise.all(keys.map(async (key) => {
      const started = performance.now();
      try {
        await redis.run((c) => c.set(key, 'v'));
        answered++;
      } catch (err) {
        const ms = performance.now() - started;
        assert.ok(err instanceof StoreUnavailable, `a failure is StoreUnavailable: ${String(err)}`);
        assert.ok(ms < COMMAND_TIMEOUT_MS, `${key} failed after ${Math.round(ms)} ms, not within commandTimeoutMs (${COMMAND_TIMEOUT_MS} ms): ${String(err.cause)}`);
        failed++;
      }
    }));
  }
  assert.ok(failed > 0, 'some keys live on the killed primary');
  assert.ok(answered > 0, 'the live primaries still answer');
});
