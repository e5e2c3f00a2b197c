/**
 * /readyz during a Redis stall (issue 26): every instance shares the one Redis, and calls with a
 * valid access token go on without it, so a load balancer routing on /readyz must not take every
 * instance out (a 5 s stall became 7 s of 503s on every proxied call). By default /readyz stays
 * 200 with status `degraded` and names the check in `degraded`; `readiness.requireRedis` makes
 * Redis part of readiness again (503 `unavailable`).
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, show, signIn, startGateway, untilReady, type TestGateway } from '../helpers/gateway.js';
import { redisSuite, startRedis, type TestRedis } from '../helpers/redis.js';

const ALL_UP = { redis: 'up', directory: 'up', signingKeys: 'up' };
const REDIS_DOWN = { redis: 'down', directory: 'up', signingKeys: 'up' };

async function gatewayOn(t: TestContext, redis: TestRedis, backendUrl: string, readiness: Record<string, unknown> = {}): Promise<TestGateway> {
  const gw = await startGateway(t, {
    overrides: {
      redis: { url: redis.url, commandTimeoutMs: 300, breakerFailures: 1000 },
      routes: [{ prefix: '/echo', targets: [backendUrl] }],
      readiness,
    },
  });
  assert.equal((await untilReady(gw)).body.message.status, 'ready', 'every check up before the stall');
  return gw;
}

/** Runs `during` while Redis is stopped (SIGSTOP), resuming it whatever happens. */
async function whileStalled<T>(redis: TestRedis, during: () => Promise<T>): Promise<T> {
  redis.pause();
  try {
    return await during();
  } finally {
    redis.resume();
  }
}

test('Redis stalled: /readyz stays 200, degraded, naming redis, while proxied calls with a valid token are served', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const backend = await startBackend(t);
  const gw = await gatewayOn(t, redis, backend.url);
  const { accessToken } = await signIn(gw);
  assert.equal((await call(`${gw.url}/echo/before`, { token: accessToken })).status, 200);

  await whileStalled(redis, async () => {
    const ready = await call(`${gw.url}/readyz`);
    assert.equal(ready.status, 200, show(ready));
    assert.deepEqual(ready.body, { success: true, message: { status: 'degraded', checks: REDIS_DOWN, degraded: ['redis'] } });
    const proxied = await call(`${gw.url}/echo/during`, { token: accessToken });
    assert.equal(proxied.status, 200, `a proxied call during the stall: ${show(proxied)}`);
  });

  const again = await untilReady(gw);
  assert.deepEqual(again.body, { success: true, message: { status: 'ready', checks: ALL_UP } }, 'Redis back: ready, nothing degraded');
});

test('readiness.requireRedis: a stalled Redis makes /readyz 503 unavailable', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const backend = await startBackend(t);
  const gw = await gatewayOn(t, redis, backend.url, { requireRedis: true });
  await whileStalled(redis, async () => {
    const ready = await call(`${gw.url}/readyz`);
    assert.equal(ready.status, 503, show(ready));
    assert.deepEqual(ready.body, { success: false, message: { status: 'unavailable', checks: REDIS_DOWN } });
  });
});

test('a directory kept in Redis is degraded with it: /readyz stays 200 naming both', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const backend = await startBackend(t);
  const gw = await startGateway(t, {
    overrides: { redis: { url: redis.url, commandTimeoutMs: 300, breakerFailures: 1000 }, directory: { store: 'redis' }, routes: [{ prefix: '/echo', targets: [backend.url] }] },
  });
  assert.equal((await untilReady(gw)).body.message.status, 'ready');
  const { accessToken } = await signIn(gw);
  await whileStalled(redis, async () => {
    // Nothing cached: the directory's read fails, and no copy may be served.
    const roles = await call(`${gw.url}/api/roles`, { token: accessToken });
    assert.ok(roles.status === 503 || roles.status === 504, `the directory read fails: ${show(roles)}`);
    const ready = await call(`${gw.url}/readyz`);
    assert.equal(ready.status, 200, show(ready));
    assert.deepEqual(ready.body, { success: true, message: { status: 'degraded', checks: { redis: 'down', directory: 'down', signingKeys: 'up' }, degraded: ['redis', 'directory'] } });
    assert.equal((await call(`${gw.url}/echo/during`, { token: accessToken })).status, 200, 'proxied calls still served');
  });
});
