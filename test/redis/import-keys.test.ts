/**
 * `keys:import` under NODE_ENV=production: copying the data file's keys into Redis is the
 * other way demo keys could reach a production gateway (KEY_SOURCE=redis, where start-up does
 * not look at the data file's keys), so it refuses the published demo keys as start-up does.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { storedDigest } from '../helpers/gateway.js';
import { gatewayEnv, runCommand, tempDir } from '../helpers/process.js';
import { rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';

test('keys:import under NODE_ENV=production', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const prefix = `imp${randomBytes(4).toString('hex')}`;
  const client = await rawRedisClient(t, redis);
  const importKeys = (t: TestContext, env: Record<string, string>, args: string[] = []) =>
    runCommand(t, ['src/cli/import-keys.ts', ...args], { env: gatewayEnv({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: prefix, NODE_ENV: 'production', ...env }) });
  const storedKeys = async () => (await client.keys(`${prefix}:apikey:*`)).sort();

  await t.test('the demo data is refused, and nothing is written', async (t) => {
    const res = await importKeys(t, {});
    assert.equal(res.code, 1, res.stderr);
    for (const hint of ['GATEWAY_DATA_FILE', 'keys:create', 'ALLOW_DEMO_DATA']) assert.ok(res.stderr.includes(hint), `stderr names ${hint}:\n${res.stderr}`);
    assert.deepEqual(await storedKeys(), []);
  });

  await t.test('a data file of real keys is imported', async (t) => {
    const file = join(tempDir(t), 'data.json');
    const digest = storedDigest(randomBytes(32).toString('base64url'));
    writeFileSync(file, JSON.stringify({ accounts: [{ id: 'acct_real', apiKeys: [{ id: 'key_real', apiKey: 'ak_real_1', secretDigest: digest }] }] }));
    const res = await importKeys(t, {}, ['--file', file]);
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(await storedKeys(), [`${prefix}:apikey:ak_real_1`]);
  });

  await t.test('ALLOW_DEMO_DATA=true imports the demo keys, with a warning', async (t) => {
    const res = await importKeys(t, { ALLOW_DEMO_DATA: 'true' });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /ALLOW_DEMO_DATA=true/);
    assert.ok((await storedKeys()).includes(`${prefix}:apikey:ak_demo_alice`));
  });
});
