/**
 * Acceptance of issue 14 on Redis: two gateway processes on one real redis-server, keys and the
 * directory in Redis (KEY_SOURCE=redis, DIRECTORY_STORE=redis), one shared signing key. Changes
 * made through A are seen through B: the role in /api/roles, a settings token's revoke and the
 * account reset within a second (helpers/owner-flow.ts). Then both are stopped and a fresh one
 * on the same Redis still has every owner, key, settings token, role, sign record and audit event.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { makeAdminToken } from '../helpers/owner-api.js';
import { checkPersisted, REACH_MS, runOwnerFlow } from '../helpers/owner-flow.js';
import { exitWithin, startGatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const LIMIT_MS = 120_000;

test('Redis, two instances: the owner flow across them, then a restart keeps all of it', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const admin = makeAdminToken();
  const backend = await startBackend(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const env = {
    REDIS_URL: redis.url,
    KEY_SOURCE: 'redis',
    DIRECTORY_STORE: 'redis',
    SIGNING_KEYS: JSON.stringify([{ kid: 'owner-flow-1', alg: 'EdDSA', pem }]),
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([admin.digest]),
    ROUTES: JSON.stringify([{ name: 'echo', prefix: '/echo', targets: [backend.url] }]),
  };
  const start = () => startGatewayProcess(t, env, { limitMs: LIMIT_MS });
  const [a, b] = await Promise.all([start(), start()]);
  // Redis publishes every change: the role reaches B as fast as a revoke does.
  const state = await runOwnerFlow({ a: { name: 'A', url: a.url }, b: { name: 'B', url: b.url }, adminToken: admin.token, backend, roleReachMs: REACH_MS });

  for (const gw of [a, b]) {
    assert.ok(gw.child.process.kill('SIGTERM'));
    assert.deepEqual(await exitWithin(gw.child), { code: 0, signal: null });
  }
  const c = await start();
  await checkPersisted({ name: 'a new instance', url: c.url }, state);
});
