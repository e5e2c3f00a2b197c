/**
 * Redis coming back empty drops every credential an instance cached from it, at once (issue 26):
 * an API settings token (cached for owner.settingsTokenCacheTtlMs, 60 s), a key record
 * (redis.keyCacheTtlMs) and the verified access tokens. Before, the instance that had used a
 * settings token accepted it for a minute more, though its account no longer existed.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { ManualClock } from '../helpers/clock.js';
import { until } from '../helpers/directory.js';
import { call, postJson, sha256Hex, show, startGateway, type TestGateway } from '../helpers/gateway.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const ADMIN = `gwadm_${'Q'.repeat(43)}`;
const LOST = "redis lost the gateway's data (its epoch record was gone or replaced): access tokens issued before the new epoch are refused";

function gatewayOn(t: TestContext, redisUrl: string, clock: ManualClock, redis: Record<string, unknown>): Promise<TestGateway> {
  return startGateway(t, {
    clock,
    overrides: {
      redis: { url: redisUrl, ...redis },
      data: { keySource: 'redis' },
      directory: { store: 'redis' },
      owner: { adminTokenDigests: [adminTokenDigest(ADMIN)] },
    },
  });
}

async function owner(gw: TestGateway, path: string, body: unknown) {
  const res = await call(`${gw.url}/owner/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 201, `${path}: ${show(res)}`);
  return res.body.message;
}

const lossNoticed = (gw: TestGateway) => gw.logs.some((line) => (JSON.parse(line) as { msg?: unknown }).msg === LOST);

/** A gateway on a fresh Redis with account `acct_lost`, its epoch checked every 100 ms, copies kept for a minute. */
async function setUp(t: TestContext) {
  const redis = await startRedis(t);
  const raw = new Redis(redis.url);
  t.after(() => raw.disconnect());
  const clock = new ManualClock(Date.now());
  const gw = await gatewayOn(t, redis.url, clock, { resetCacheTtlMs: 100, keyCacheTtlMs: 60_000 });
  await owner(gw, '/accounts', { id: 'acct_lost', name: 'Lost' });
  const flushAll = async () => {
    // The epoch made again after the loss starts later than the lost one: that start is its identity.
    clock.advance(1000);
    await raw.flushall();
    await until('the instance notices the loss', async () => lossNoticed(gw));
  };
  return { gw, flushAll };
}

test('FLUSHALL: a settings token cached before is refused at once', redisSuite(), async (t) => {
  const { gw, flushAll } = await setUp(t);
  const { token } = await owner(gw, '/accounts/acct_lost/settings-tokens', { name: 'ci' });
  assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200, 'the settings token is accepted, and cached');

  await flushAll();
  const res = await call(`${gw.url}/api/roles`, { token });
  assert.equal(res.status, 401, `the settings token of an account Redis no longer holds: ${show(res)}`);
  assert.equal(res.body.message.code, 'invalid_token');
});

test('FLUSHALL: the key record and the verified access tokens cached before are dropped at once', redisSuite(), async (t) => {
  // No settings token here: its last-use write re-announces the account's keys, which drops the key cache by itself.
  const { gw, flushAll } = await setUp(t);
  const { key, apiSecret } = await owner(gw, '/accounts/acct_lost/keys', { name: 'bot' });
  const signInLost = () => postJson(`${gw.url}/api/signin`, { apiKey: key.apiKey, apiSecret: sha256Hex(apiSecret) });
  const signedIn = await signInLost();
  assert.equal(signedIn.status, 200, `the key signs in, its record cached: ${show(signedIn)}`);
  assert.equal((await call(`${gw.url}/api/roles`, { token: signedIn.body.message.accessToken })).status, 200, 'its access token verified, and cached');
  assert.ok(gw.services.signer.verifiedTokenStats().entries > 0);

  await flushAll();
  const again = await signInLost();
  assert.equal(again.status, 401, `a key Redis no longer holds does not sign in: ${show(again)}`);
  assert.equal(gw.services.signer.verifiedTokenStats().entries, 0, 'no verified access token kept');
});

test('redis-server restarted empty: the settings token cached before is refused once the reconnection finds the loss', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  // Only the reconnection can notice: the periodic check is a minute away.
  const clock = new ManualClock(Date.now());
  const gw = await gatewayOn(t, redis.url, clock, { resetCacheTtlMs: 60_000, breakerCooldownMs: 200 });
  await owner(gw, '/accounts', { id: 'acct_lost', name: 'Lost' });
  const { token } = await owner(gw, '/accounts/acct_lost/settings-tokens', { name: 'ci' });
  assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200, 'accepted, and cached');

  clock.advance(1000);
  await redis.restart();
  await until('the instance notices the loss', async () => lossNoticed(gw));
  const res = await call(`${gw.url}/api/roles`, { token });
  assert.equal(res.status, 401, show(res));
  assert.equal(res.body.message.code, 'invalid_token');
});
