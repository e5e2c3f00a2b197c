/**
 * Two gateway processes with KEY_SOURCE=redis on one redis-server: a settings token created
 * through the owner API on A is accepted on A and B; revoked on A, it is refused on both
 * within a second, though each had it cached.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { call } from '../helpers/gateway.js';
import { startGatewayProcess, type GatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const ADMIN = `gwadm_${'Q'.repeat(43)}`;
const REACH_MS = 1000;

async function refusedWithin(gw: GatewayProcess, token: string, since: number, limitMs: number): Promise<number | undefined> {
  while (Date.now() - since < limitMs) {
    const res = await call(`${gw.url}/api/roles`, { token });
    if (res.status === 401) return Date.now() - since;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await sleep(20);
  }
  return undefined;
}

test('KEY_SOURCE=redis: a settings token revoked on A is refused on A and B within a second', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const env = { REDIS_URL: redis.url, KEY_SOURCE: 'redis', DIRECTORY_STORE: 'redis', OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([adminTokenDigest(ADMIN)]) };
  const [a, b] = await Promise.all([startGatewayProcess(t, env), startGatewayProcess(t, env)]);
  const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
  const account = await call(`${a.url}/owner/v1/accounts`, { method: 'POST', headers: admin, body: JSON.stringify({ id: 'acct_shared', name: 'Shared' }) });
  assert.equal(account.status, 201, JSON.stringify(account.body));
  const created = await call(`${a.url}/owner/v1/accounts/acct_shared/settings-tokens`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'ci' }) });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { token, settingsToken } = created.body.message;
  for (const gw of [a, b]) assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200, `accepted (and cached) on ${gw.url}`);

  const since = Date.now();
  const revoked = await call(`${a.url}/owner/v1/accounts/acct_shared/settings-tokens/${settingsToken.id}`, { method: 'DELETE', headers: admin });
  assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
  const [onA, onB] = await Promise.all([refusedWithin(a, token, since, REACH_MS * 3), refusedWithin(b, token, since, REACH_MS * 3)]);
  assert.ok(onA !== undefined && onA <= REACH_MS, `refused on A after ${onA} ms`);
  assert.ok(onB !== undefined && onB <= REACH_MS, `refused on B after ${onB} ms`);
  const seen = await call(`${b.url}/owner/v1/accounts/acct_shared/settings-tokens/${settingsToken.id}`, { headers: admin });
  assert.equal(seen.body.message.status, 'revoked', 'B reads the revoke from Redis');
});
