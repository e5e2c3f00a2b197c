/**
 * Secret-scanning reports across two gateway processes on one redis-server: what a report to A
 * ends (an API secret, a settings token, a refresh token), B refuses within a second, each token
 * having been seen alive by B first. The rest of the endpoint: test/http/leaks.test.ts.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { show } from '../helpers/gateway.js';
import { assertAlive, makeSecrets, newAccount, refresh, report, reportOf, roles, signInWith, startKeyServer } from '../helpers/leak-reporter.js';
import { makeAdminToken } from '../helpers/owner-api.js';
import { REACH_MS, within } from '../helpers/owner-flow.js';
import { startGatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

test('Redis, two instances: what a leak report to A ends, B refuses within a second', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const keys = await startKeyServer(t);
  const admin = makeAdminToken();
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const env = {
    REDIS_URL: redis.url,
    KEY_SOURCE: 'redis',
    SIGNING_KEYS: JSON.stringify([{ kid: 'leaks-1', alg: 'EdDSA', pem }]),
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([admin.digest]),
    LEAK_REPORT_KEYS_URL: keys.url,
  };
  const [a, b] = await Promise.all([startGatewayProcess(t, env), startGatewayProcess(t, env)]);
  await newAccount(a, admin.token, 'acct_leaks_redis');
  const s = await makeSecrets(a, admin.token, 'acct_leaks_redis');
  // B has seen each token alive (and cached what it caches) before the report.
  await assertAlive(b, s, 'on B before the report');
  const res = await report(a, reportOf([
    { token: s.apiSecret, type: 'gateway_api_secret' },
    { token: s.settingsToken, type: 'gateway_settings_token' },
    { token: s.refreshToken, type: 'gateway_refresh_token' },
  ]), { key: keys.privateKey });
  assert.equal(res.status, 200, show(res));
  assert.deepEqual(res.body.map((v: { label: string }) => v.label), ['true_positive', 'true_positive', 'true_positive']);
  await within(REACH_MS, 'the access token on B', () => roles(b, s.accessToken), 401);
  await within(REACH_MS, 'the settings token on B', () => roles(b, s.settingsToken), 401);
  await within(REACH_MS, 'the refresh token on B', () => refresh(b, s.refreshToken), 401);
  await within(REACH_MS, 'the API secret on B', () => signInWith(b, s.apiKey, s.apiSecret), 401);
});

