/**
 * /readyz is public unless management.port is set, and each check writes to Redis: a flood of
 * /readyz must not become a flood of Redis writes. While a check is out, the /readyz calls that
 * arrive share its answer; so however many calls arrive while Redis is stalled, Redis gets one
 * readiness write (counted by Redis itself once it runs again).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, startGateway } from '../helpers/gateway.js';
import { rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';

async function setCalls(raw: { info(section: string): Promise<string> }): Promise<number> {
  return Number(/cmdstat_set:calls=(\d+)/.exec(await raw.info('commandstats'))?.[1] ?? 0);
}

test('a flood of /readyz while Redis stalls: every call answers in time, degraded, and Redis gets one write', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const raw = await rawRedisClient(t, redis);
  const gw = await startGateway(t, { overrides: { redis: { url: redis.url, commandTimeoutMs: 1000, breakerFailures: 1000 } } });
  assert.equal((await call(`${gw.url}/readyz`)).body.message.status, 'ready');
  const before = await setCalls(raw);

  redis.pause();
  let answers: string[];
  try {
    answers = await Promise.all(Array.from({ length: 50 }, () => call(`${gw.url}/readyz`).then((res) => `${res.status} ${res.body.message.status}`)));
  } finally {
    redis.resume();
  }
  assert.deepEqual([...new Set(answers)], ['200 degraded'], 'a stalled Redis: degraded (readiness.requireRedis is off)');
  // Once Redis runs again it executes whatever was sent while it was stopped.
  assert.equal((await call(`${gw.url}/readyz`)).body.message.status, 'ready');
  const writes = await setCalls(raw) - before;
  // The stalled check's write, and the last call's own.
  assert.ok(writes <= 2, `${writes} readiness writes for 51 calls`);
});

test('/metrics answers while Redis stalls, and a flood of it writes nothing to Redis', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const raw = await rawRedisClient(t, redis);
  const gw = await startGateway(t, { overrides: { redis: { url: redis.url, commandTimeoutMs: 1000 } } });
  assert.equal((await call(`${gw.url}/readyz`)).status, 200);
  const before = await setCalls(raw);
  redis.pause();
  try {
    const answers = await Promise.all(Array.from({ length: 20 }, async () => {
      const res = await fetch(`${gw.url}/metrics`, { signal: AbortSignal.timeout(10_000) });
      const text = await res.text();
      return `${res.status} ${/^gateway_redis_connected \d/m.test(text)}`;
    }));
    assert.deepEqual([...new Set(answers)], ['200 true']);
  } finally {
    redis.resume();
  }
  assert.equal(await setCalls(raw) - before, 0, 'a scrape asks nothing of Redis');
});
