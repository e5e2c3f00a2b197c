/**
 * The demo data's published API secrets on a production gateway whose keys come from Redis
 * (KEY_SOURCE=redis), as compose leaves it: `gatewayctl migrate` seeded Redis with the demo
 * data (ALLOW_DEMO_DATA=true on the seed), and the gateway, which never searches Redis at
 * start-up, must refuse the published secrets at sign-in unless told otherwise. Real processes
 * on a real redis-server; test/startup.test.ts holds the data-file side.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { postJson, sha256Hex, storedDigest } from '../helpers/gateway.js';
import { gatewayEnv, ROOT, runCommand, startGatewayProcess, tempDir, waitForLog, type LogLine } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const DEMO = { apiKey: 'ak_demo_alice', apiSecret: sha256Hex('sk_demo_alice_secret') };
const DEMO_OWNER = { email: 'alice@demo.example', password: 'alice demo passphrase' };
const demoRefusal = (line: LogLine) => line.level === 40 && /^refused API key /.test(String(line.msg));

test('a production gateway on KEY_SOURCE=redis refuses the demo secrets migrated into Redis unless ALLOW_DEMO_DATA=true', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const dir = tempDir(t);
  // The demo data plus one account of real keys, whose secret was made here and printed nowhere.
  const realSecret = randomBytes(32).toString('base64url');
  const data = JSON.parse(readFileSync(join(ROOT, 'config/demo-data.json'), 'utf8'));
  data.accounts.push({ id: 'acct_real', apiKeys: [{ id: 'key_real', apiKey: 'ak_real_1', secretDigest: storedDigest(realSecret) }] });
  const file = join(dir, 'data.json');
  writeFileSync(file, JSON.stringify(data));
  const empty = join(dir, 'empty.json');
  writeFileSync(empty, '{"accounts": []}');
  const shared = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: `demo${process.pid}`, NODE_ENV: 'production' };

  // As compose's seed service: migrate with the consent it needs under NODE_ENV=production.
  const seeded = await runCommand(t, ['src/cli/gatewayctl.ts', 'migrate'], { env: gatewayEnv({ ...shared, GATEWAY_DATA_FILE: file, ALLOW_DEMO_DATA: 'true' }) });
  assert.equal(seeded.code, 0, seeded.stderr);
  assert.match(seeded.stdout, /^Copied 2 owners and 3 accounts/m);

  const onRedis = { ...shared, GATEWAY_DATA_FILE: empty, KEY_SOURCE: 'redis', DIRECTORY_STORE: 'redis' };
  const allowed = await startGatewayProcess(t, { ...onRedis, ALLOW_DEMO_DATA: 'true' });
  const strict = await startGatewayProcess(t, onRedis);

  await t.test('without ALLOW_DEMO_DATA: the demo secret gets the 401 of a wrong secret, and the operator a warning naming the key once', async () => {
    const demo = await postJson(`${strict.url}/api/signin`, DEMO);
    const wrong = await postJson(`${strict.url}/api/signin`, { apiKey: DEMO.apiKey, apiSecret: sha256Hex('not the secret') });
    assert.equal(demo.status, 401, `a published demo secret signed in on a production gateway: ${JSON.stringify(demo.body)}`);
    assert.deepEqual(demo.body, wrong.body, 'the same answer as a wrong secret: nothing says it was a demo key');
    const started = strict.logs().find((line) => /refused/.test(String(line.msg)) && /KEY_SOURCE=redis/.test(String(line.msg)));
    assert.ok(started !== undefined, `the start-up log says demo secrets will be refused: ${strict.child.stdout()}`);

    const warning = await waitForLog(strict.child, demoRefusal);
    assert.equal(warning.accountId, 'acct_alice');
    assert.equal(warning.keyId, 'key_alice_1');
    assert.match(String(warning.msg), /ALLOW_DEMO_DATA/, 'it says what lets them in');
    assert.match(String(warning.msg), /accounts disable|migrate/, 'and how to replace them');
    const logs = strict.child.stdout();
    for (const secret of ['sk_demo_alice_secret', DEMO.apiSecret]) assert.ok(!logs.includes(secret), 'the secret, or what the client sent, is never logged');

    // Refused again, warned once (the second warning below is for another key).
    assert.equal((await postJson(`${strict.url}/api/signin`, DEMO)).status, 401);
    const bob = await postJson(`${strict.url}/api/signin`, { apiKey: 'ak_demo_bob', apiSecret: sha256Hex('sk_demo_bob_secret') });
    assert.equal(bob.status, 401);
    await waitForLog(strict.child, (line) => demoRefusal(line) && line.keyId === 'key_bob_1');
    assert.deepEqual(strict.logs().filter(demoRefusal).map((line) => line.keyId), ['key_alice_1', 'key_bob_1']);

    // A token reset with the demo secret is a sign-in too.
    const reset = await postJson(`${strict.url}/api/reset`, { ...DEMO, scope: 'account' });
    assert.equal(reset.status, 401, JSON.stringify(reset.body));
  });

  await t.test('without ALLOW_DEMO_DATA: a demo owner\'s published password gets the 401 of a wrong one, and a warning naming the owner', async () => {
    const demo = await postJson(`${strict.url}/owner/v1/session`, DEMO_OWNER);
    const wrong = await postJson(`${strict.url}/owner/v1/session`, { ...DEMO_OWNER, password: 'not the passphrase' });
    assert.equal(demo.status, 401, `a demo owner signed in on a production gateway: ${JSON.stringify(demo.body)}`);
    assert.deepEqual(demo.body, wrong.body);
    const warning = await waitForLog(strict.child, (line) => line.level === 40 && /^refused the sign-in of owner /.test(String(line.msg)));
    assert.equal(warning.ownerId, 'own_demo_alice');
    assert.ok(!strict.child.stdout().includes(DEMO_OWNER.password), 'the password is never logged');
  });

  await t.test('a real key in the same Redis signs in', async () => {
    const res = await postJson(`${strict.url}/api/signin`, { apiKey: 'ak_real_1', apiSecret: sha256Hex(realSecret) });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  await t.test('with ALLOW_DEMO_DATA=true the demo keys are served, and the start-up log warns so', async () => {
    const started = allowed.logs().find((line) => line.level === 40 && /ALLOW_DEMO_DATA=true/.test(String(line.msg)));
    assert.ok(started !== undefined, `a start-up warning: ${allowed.child.stdout()}`);
    const res = await postJson(`${allowed.url}/api/signin`, DEMO);
    assert.equal(res.status, 200, JSON.stringify(res.body));

    assert.equal((await postJson(`${allowed.url}/owner/v1/session`, DEMO_OWNER)).status, 200, 'and the demo owners');

    // A refresh token the demo key got there mints nothing where demo secrets are refused.
    const { refreshToken } = res.body.message as { refreshToken: string };
    const refreshed = await postJson(`${strict.url}/api/refresh`, { refreshToken });
    assert.equal(refreshed.status, 401, JSON.stringify(refreshed.body));
    assert.equal((await postJson(`${allowed.url}/api/refresh`, { refreshToken })).status, 200, 'while the allowing gateway still refreshes it');
  });
});
