/**
 * Redis over TLS with a private CA and a client certificate (redis.tlsCaFile, redis.tlsCertFile,
 * redis.tlsKeyFile), against redis-server's own TLS: TLS-only servers (`--port 0`) that require
 * a client certificate signed by the CA (`--tls-auth-clients yes`), certificates made by openssl
 * in the test (test/helpers/redis-tls.ts). Standalone (rediss://), Sentinel (the sentinels and
 * the master both TLS-only) and Cluster (`--tls-cluster yes`): the gateway is ready and signs
 * in. Without the client certificate, or trusting another CA, its redis check is down; the settings'
 * rules are checked at load.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { call, show, signIn, startGateway, untilReady, type TestGateway } from '../helpers/gateway.js';
import { redisSuite } from '../helpers/redis.js';
import { makeTlsFiles, type TlsFiles } from '../helpers/redis-tls.js';
import { startRedisCluster, startRedisSentinel, startRedisTls } from '../helpers/redis-topologies.js';

const ALL_UP = { redis: 'up', directory: 'up', signingKeys: 'up' };

function clientFiles(files: TlsFiles) {
  return { tlsCaFile: files.ca, tlsCertFile: files.clientCert, tlsKeyFile: files.clientKey };
}

async function assertServes(gw: TestGateway, what: string): Promise<void> {
  const ready = await untilReady(gw);
  assert.equal(ready.status, 200, `${what}: ${show(ready)}`);
  assert.deepEqual(ready.body.message.checks, ALL_UP, what);
  const pair = await signIn(gw);
  assert.equal(typeof pair.refreshToken, 'string', `${what}: signed in, the refresh token stored in Redis`);
}

async function assertRedisDown(gw: TestGateway, what: string): Promise<void> {
  const ready = await call(`${gw.url}/readyz`);
  // 200 `degraded`: readiness.requireRedis is off (test/redis/readiness-degraded.test.ts).
  assert.equal(ready.body.message.status, 'degraded', `${what}: ${show(ready)}`);
  assert.equal(ready.body.message.checks.redis, 'down', what);
}

test('Redis TLS: standalone rediss:// with a CA file and a client certificate', redisSuite(), async (t) => {
  const files = await makeTlsFiles(t);
  const redis = await startRedisTls(t, files);
  // Short, so that the gateways that cannot connect start without waiting long.
  const base = { url: redis.url, connectTimeoutMs: 500 };

  await t.test('with the CA and the client certificate: ready, signs in', async (t) => {
    const gw = await startGateway(t, { overrides: { redis: { ...base, ...clientFiles(files) } } });
    await assertServes(gw, 'standalone TLS');
  });

  await t.test('without a client certificate: the server refuses it, redis down', async (t) => {
    const gw = await startGateway(t, { overrides: { redis: { ...base, tlsCaFile: files.ca } } });
    await assertRedisDown(gw, 'no client certificate');
  });

  await t.test('trusting another CA: the server is refused, redis down', async (t) => {
    const gw = await startGateway(t, { overrides: { redis: { ...base, ...clientFiles(files), tlsCaFile: files.otherCa } } });
    await assertRedisDown(gw, 'another CA');
  });
});

test('Redis TLS: Sentinel, the sentinels and the master TLS-only', redisSuite(), async (t) => {
  const files = await makeTlsFiles(t);
  const sentinel = await startRedisSentinel(t, { name: 'gw-tls-master', tls: files });
  const gw = await startGateway(t, { overrides: { redis: { sentinels: sentinel.sentinels, sentinelName: sentinel.name, tls: true, ...clientFiles(files) } } });
  await assertServes(gw, 'Sentinel over TLS');
});

test('Redis TLS: Cluster with --tls-cluster', redisSuite(), async (t) => {
  const files = await makeTlsFiles(t);
  const cluster = await startRedisCluster(t, { tls: files });
  const gw = await startGateway(t, { overrides: { redis: { clusterNodes: cluster.nodes, tls: true, ...clientFiles(files) } } });
  await assertServes(gw, 'Cluster over TLS');
});

test('Redis TLS settings: certificate and key together, and only with TLS on', () => {
  const load = (redis: Record<string, unknown>) => () => loadConfig({ env: {}, overrides: { redis } });
  const refused = (redis: Record<string, unknown>, message: RegExp) => assert.throws(load(redis), (err: unknown) => err instanceof ConfigError && message.test(err.message), JSON.stringify(redis));
  refused({ url: 'rediss://127.0.0.1:6379', tlsCertFile: '/c.pem' }, /redis\.tlsKeyFile: give both redis\.tlsCertFile and redis\.tlsKeyFile/);
  refused({ url: 'redis://127.0.0.1:6379', tlsCaFile: '/ca.pem' }, /redis\.tlsCaFile: needs TLS to Redis/);
  refused({ clusterNodes: ['127.0.0.1:7000'], tlsCaFile: '/ca.pem' }, /redis\.tlsCaFile: needs TLS to Redis/);
  refused({ url: 'redis://127.0.0.1:6379', sentinelPassword: 'x' }, /redis\.sentinelPassword: only for sentinels/);
  const ok = loadConfig({ env: { REDIS_TLS_CA_FILE: 'certs/ca.pem' }, cwd: '/srv/gw', overrides: { redis: { url: 'rediss://127.0.0.1:6379' } } });
  assert.equal(ok.redis.tlsCaFile, '/srv/gw/certs/ca.pem', 'a relative path is taken from the working directory');
});
