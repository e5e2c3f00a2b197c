/**
 * A Redis Cluster (3 primaries, no replicas) with a primary killed: every call to its slots
 * fails within redis.commandTimeoutMs, as StoreUnavailable (503 with Retry-After), while the
 * other primaries keep answering. ioredis's failover retries (100 ms apart, up to 16, its
 * command timeout starting only at the first send to a node) once made such calls fail 600 to
 * 700 ms after they began against a 500 ms timeout; the gateway's own deadline on Cluster calls
 * (stores/redis/client.ts) bounds them now.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StoreUnavailable } from '../../src/errors/errors.js';
import { connectRedis } from '../../src/stores/redis/client.js';
import { redisSettings, redisSuite, silentLog } from '../helpers/redis.js';
import { startRedisCluster } from '../helpers/redis-topologies.js';

test('Cluster with a primary killed: every call to its slots fails within commandTimeoutMs, the others still answer', redisSuite(), async (t) => {
  const cluster = await startRedisCluster(t);
  // Short enough that ioredis's retries (16 redirections, 100 ms apart) would outlast it
  // without the gateway's deadline: before it, calls failed only after the timeout, which
  // started late.
  const COMMAND_TIMEOUT_MS = 500;
  // A call that fails after the timeout must fail with it: at most this long after a timer of
  // the same length started with the call fired (a loaded machine delays both alike). Without
  // the gateway's deadline a re-sent command fails about 100 ms after it, on its own timeout.
  const AFTER_TIMER_MS = 40;
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
      let timerFiredAt = Number.POSITIVE_INFINITY;
      const timer = setTimeout(() => { timerFiredAt = performance.now(); }, COMMAND_TIMEOUT_MS);
      try {
        await redis.run((c) => c.set(key, 'v'));
        answered++;
      } catch (err) {
        const at = performance.now();
        assert.ok(err instanceof StoreUnavailable, `a failure is StoreUnavailable: ${String(err)}`);
        assert.ok(at - started < COMMAND_TIMEOUT_MS || at - timerFiredAt < AFTER_TIMER_MS,
          `${key} failed after ${Math.round(at - started)} ms, ${Math.round(at - timerFiredAt)} ms after its ${COMMAND_TIMEOUT_MS} ms timer: not within commandTimeoutMs (${String(err.cause)})`);
        failed++;
      } finally {
        clearTimeout(timer);
      }
    }));
  }
  assert.ok(failed > 0, 'some keys live on the killed primary');
  assert.ok(answered > 0, 'the live primaries still answer');
});
