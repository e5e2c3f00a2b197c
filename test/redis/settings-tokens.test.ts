/**
 * API settings tokens on two gateway processes sharing one redis-server: an account reset made
 * on one instance stops the account's settings tokens on both within a second, though each
 * instance has the token cached (the reset notice, not the cache, is what reaches them).
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { mintSettingsToken, settingsTokenDigest, settingsTokenStart } from '../../src/domain/settings-token.js';
import { call, DEMO, postJson, sha256Hex } from '../helpers/gateway.js';
import { startGatewayProcess, tempDir, type GatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const REACH_MS = 1000;

/** Polls /api/roles with `token` until refused; the time it took from `since`, or undefined past the deadline. */
async function refusedWithin(gw: GatewayProcess, token: string, since: number, limitMs: number): Promise<number | undefined> {
  while (Date.now() - since < limitMs) {
    const res = await call(`${gw.url}/api/roles`, { token });
    if (res.status === 401) {
      assert.equal(res.body.message.code, 'invalid_token');
      return Date.now() - since;
    }
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await sleep(20);
  }
  return undefined;
}

test('two instances on one Redis: an account reset on A stops a settings token on A and B within a second', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const token = mintSettingsToken();
  const data = JSON.parse(readFileSync(new URL('../../config/demo-data.json', import.meta.url), 'utf8'));
  data.accounts.find((a: { id: string }) => a.id === 'acct_alice').settingsTokens = [{
    id: 'stk_shared', name: 'shared', digest: settingsTokenDigest(token), start: settingsTokenStart(token), scopes: [], createdAt: new Date(Date.now() - 60_000).toISOString(),
  }];
  const file = join(tempDir(t), 'data.json');
  writeFileSync(file, JSON.stringify(data));
  const env = { REDIS_URL: redis.url, GATEWAY_DATA_FILE: file };
  const [a, b] = await Promise.all([startGatewayProcess(t, env), startGatewayProcess(t, env)]);

  for (const gw of [a, b]) assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200, `accepted (and now cached) on ${gw.url}`);
  const since = Date.now();
  const reset = await postJson(`${a.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret), scope: 'account' });
  assert.equal(reset.status, 200, JSON.stringify(reset.body));
  const [onA, onB] = await Promise.all([refusedWithin(a, token, since, REACH_MS * 3), refusedWithin(b, token, since, REACH_MS * 3)]);
  assert.ok(onA !== undefined && onA <= REACH_MS, `refused on A after ${onA} ms`);
  assert.ok(onB !== undefined && onB <= REACH_MS, `refused on B after ${onB} ms`);
});
