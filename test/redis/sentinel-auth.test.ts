/**
 * The sentinels' own password (redis.sentinelPassword, REDIS_SENTINEL_PASSWORD), against a real
 * sentinel with `requirepass` monitoring a master that has none: given it, the gateway finds the
 * master, is ready and signs in; without it, or with a wrong one, the sentinel refuses it and
 * its redis check is down; the password is never logged. And an ACL user of the sentinels' own
 * (redis.sentinelUsername), the default user off.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, show, signIn, startGateway, untilReady, type TestGateway } from '../helpers/gateway.js';
import { redisSuite } from '../helpers/redis.js';
import { startRedisSentinel } from '../helpers/redis-topologies.js';

const SENTINEL_PASSWORD = 'sentinel-only-pw-7c1e';

/** /readyz as a gateway that should be ready (`untilReady`: its first connection may need a retry), or at once. */
async function readyChecks(gw: TestGateway, { shouldBeReady = false } = {}) {
  const res = shouldBeReady ? await untilReady(gw) : await call(`${gw.url}/readyz`);
  return { status: res.status, state: res.body.message.status, checks: res.body.message.checks, shown: show(res) };
}

test('Sentinel with requirepass: the gateway authenticates to the sentinels with redis.sentinelPassword', redisSuite(), async (t) => {
  const sentinel = await startRedisSentinel(t, { name: 'gw-auth-master', sentinelPassword: SENTINEL_PASSWORD });
  const redis = { sentinels: sentinel.sentinels, sentinelName: sentinel.name, connectTimeoutMs: 500 };

  await t.test('with the password: ready, signs in, and the password is not in the log', async (t) => {
    const gw = await startGateway(t, { overrides: { redis: { ...redis, sentinelPassword: SENTINEL_PASSWORD } } });
    const ready = await readyChecks(gw, { shouldBeReady: true });
    assert.equal(ready.status, 200, ready.shown);
    assert.equal(ready.checks.redis, 'up');
    assert.equal(typeof (await signIn(gw)).accessToken, 'string');
    assert.ok(!gw.logs.some((line) => line.includes(SENTINEL_PASSWORD)), 'the sentinel password is not logged');
  });

  await t.test('without it: the sentinel refuses, redis down', async (t) => {
    const gw = await startGateway(t, { overrides: { redis } });
    const ready = await readyChecks(gw);
    // Degraded, not unready: readiness.requireRedis is off (test/redis/readiness-degraded.test.ts).
    assert.equal(ready.state, 'degraded', ready.shown);
    assert.equal(ready.checks.redis, 'down');
  });

  await t.test('with a wrong one: redis down, and neither password is logged', async (t) => {
    const gw = await startGateway(t, { overrides: { redis: { ...redis, sentinelPassword: 'wrong-pw-0b9d' } } });
    const ready = await readyChecks(gw);
    // Degraded, not unready: readiness.requireRedis is off (test/redis/readiness-degraded.test.ts).
    assert.equal(ready.state, 'degraded', ready.shown);
    assert.equal(ready.checks.redis, 'down');
    assert.ok(!gw.logs.some((line) => line.includes('wrong-pw-0b9d') || line.includes(SENTINEL_PASSWORD)));
  });
});

test('Sentinel with an ACL user of its own: redis.sentinelUsername with redis.sentinelPassword', redisSuite(), async (t) => {
  const sentinel = await startRedisSentinel(t, { name: 'gw-acl-master', sentinelUsername: 'gw-sentinel', sentinelPassword: SENTINEL_PASSWORD });
  const redis = { sentinels: sentinel.sentinels, sentinelName: sentinel.name, connectTimeoutMs: 500 };

  await t.test('as that user: ready, signs in', async (t) => {
    const gw = await startGateway(t, { overrides: { redis: { ...redis, sentinelUsername: 'gw-sentinel', sentinelPassword: SENTINEL_PASSWORD } } });
    const ready = await readyChecks(gw, { shouldBeReady: true });
    assert.equal(ready.status, 200, ready.shown);
    assert.equal(typeof (await signIn(gw)).accessToken, 'string');
  });

  await t.test('the password alone (the default user, turned off): redis down', async (t) => {
    const gw = await startGateway(t, { overrides: { redis: { ...redis, sentinelPassword: SENTINEL_PASSWORD } } });
    const ready = await readyChecks(gw);
    // Degraded, not unready: readiness.requireRedis is off (test/redis/readiness-degraded.test.ts).
    assert.equal(ready.state, 'degraded', ready.shown);
    assert.equal(ready.checks.redis, 'down');
  });
});
