/**
 * WORKERS=2: one gateway process forks two workers that share one port and one real
 * redis-server. Connections spread over both, state issued by one is honoured by the other,
 * and SIGTERM to the primary stops them all. Without Redis, several workers are refused at
 * start-up (each would hold its own refresh tokens).
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { get, request } from 'node:http';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DEMO, postJson, sha256Hex } from '../helpers/gateway.js';
import { LISTENING, exitWithin, runCommand, gatewayEnv, startGatewayProcess, tempDir, waitForLog } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

/** One request on its own connection, so the primary hands each to the next worker. */
function getFresh(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

/** An owner sign-in on its own connection (so each goes to the next worker): status and device cookie. */
function signInFresh(url: string, body: { email: string; password: string }, cookie?: string): Promise<{ status: number; device: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/owner/v1/session`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...(cookie !== undefined ? { cookie } : {}) } }, (res) => {
      res.resume();
      const device = (res.headers['set-cookie'] ?? []).find((c) => c.startsWith('gw_device='))?.split(';')[0];
      res.on('end', () => resolve({ status: res.statusCode ?? 0, device }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test('several workers share one port and one Redis', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  // The counters' Redis calls get 5 s, not the product's 100 ms: on a busy machine a slower
  // answer would make one worker count in its own memory for a moment, and the throttling
  // below would then be counted apart by the two workers.
  const config = join(tempDir(t), 'config.json');
  writeFileSync(config, JSON.stringify({ limits: { storeTimeoutMs: 5000 } }));
  const gw = await startGatewayProcess(t, {
    WORKERS: '2', REDIS_URL: redis.url, SIGNING_KEYS: JSON.stringify([{ kid: 'workers-1', alg: 'EdDSA', pem }]), LOG_LEVEL: 'info', RATE_LIMITS: 'enforce', GATEWAY_CONFIG: config,
  });
  // startGatewayProcess returns at the first worker's line; the second may still be starting.
  await waitForLog(gw.child, (line) => LISTENING(line) && line.worker === 2, 20_000);
  await waitForLog(gw.child, (line) => LISTENING(line) && line.worker === 1, 20_000);

  await t.test('connections reach both workers', async () => {
    for (let i = 0; i < 20; i++) assert.equal(await getFresh(`${gw.url}/healthz`), 200);
    // Access-log lines come through a pipe and may trail the answers: wait for each worker's.
    for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === 'request' && line.worker === worker, 5000);
  });

  await t.test('a token pair issued by one worker refreshes on whichever answers next', async () => {
    const signedIn = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
    assert.equal(signedIn.status, 200);
    let refreshToken = signedIn.body.message.refreshToken as string;
    for (let i = 0; i < 4; i++) {
      const refreshed = await postJson(`${gw.url}/api/refresh`, { refreshToken });
      assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
      refreshToken = refreshed.body.message.refreshToken;
    }
  });

  await t.test('a device cookie set by one worker is known to the other (one key for all, made by the primary)', async () => {
    const owner = { email: 'alice@demo.example', password: 'alice demo passphrase' };
    const { status, device } = await signInFresh(gw.url, owner);
    assert.equal(status, 200);
    assert.ok(device !== undefined, 'a device cookie is set');
    // Lock this address out for clients without a device cookie (5 failures a minute)...
    let wrong = 0;
    for (let i = 0; i < 20; i++) {
      if ((await signInFresh(gw.url, { ...owner, password: 'a wrong passphrase, long enough' })).status !== 401) break;
      wrong++;
    }
    assert.equal(wrong, 5, 'the address is throttled after 5 failures');
    // ...then the device signs in on one worker after the other: each must know its cookie.
    for (let i = 0; i < 6; i++) assert.equal((await signInFresh(gw.url, owner, device)).status, 200, `device sign-in #${i + 1}`);
  });

  await t.test('SIGTERM to the primary stops every worker and exits 0', async () => {
    gw.child.process.kill('SIGTERM');
    const exit = await exitWithin(gw.child, 15_000);
    assert.equal(exit.code, 0, gw.child.stderr());
    const stops = gw.logs().filter((line) => line.msg === 'shutting down' && line.worker !== undefined);
    assert.equal(stops.length, 2, 'each worker shut down');
  });
});

test('WORKERS=0 starts one worker per core this process may use', redisSuite(), async (t) => {
  // availableParallelism() counts the CPUs of the affinity mask and the cgroup CPU quota
  // (libuv), which the child inherits: what a container's limits give the gateway.
  const cores = availableParallelism();
  const redis = await startRedis(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const gw = await startGatewayProcess(t, {
    WORKERS: '0', REDIS_URL: redis.url, SIGNING_KEYS: JSON.stringify([{ kid: 'workers-0', alg: 'EdDSA', pem }]), LOG_LEVEL: 'info',
  });
  if (cores > 1) {
    for (let worker = 1; worker <= cores; worker++) await waitForLog(gw.child, (line) => LISTENING(line) && line.worker === worker, 20_000);
    assert.ok(gw.logs().some((line) => line.workers === cores && /started \d+ workers/.test(String(line.msg))), 'the primary names the count');
  } else {
    // One core: one process, no cluster.
    assert.ok(gw.logs().every((line) => line.worker === undefined));
  }
  assert.equal(await getFresh(`${gw.url}/healthz`), 200);
});

test('WORKERS unset: one worker per core with Redis and signing keys; one process without Redis', redisSuite(), async (t) => {
  const cores = availableParallelism();
  const redis = await startRedis(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const gw = await startGatewayProcess(t, {
    WORKERS: undefined, REDIS_URL: redis.url, SIGNING_KEYS: JSON.stringify([{ kid: 'workers-default', alg: 'EdDSA', pem }]), LOG_LEVEL: 'info',
  });
  if (cores > 1) {
    for (let worker = 1; worker <= cores; worker++) await waitForLog(gw.child, (line) => LISTENING(line) && line.worker === worker, 20_000);
    assert.ok(gw.logs().some((line) => line.workers === cores && /started \d+ workers/.test(String(line.msg))), 'the primary names the count');
  } else {
    assert.ok(gw.logs().every((line) => line.worker === undefined), 'one core: one process, no cluster');
  }
  assert.equal(await getFresh(`${gw.url}/healthz`), 200);
  // The embedded default (no Redis): one process whatever the cores, as state lives in it.
  const alone = await startGatewayProcess(t, { WORKERS: undefined, LOG_LEVEL: 'info' });
  assert.equal(await getFresh(`${alone.url}/healthz`), 200);
  assert.ok(alone.logs().every((line) => line.worker === undefined && !/started \d+ workers/.test(String(line.msg))));
});

test('several workers without Redis are refused at start-up', async (t) => {
  const result = await runCommand(t, ['src/main.ts'], { env: gatewayEnv({ WORKERS: '2', PORT: '0' }) });
  assert.equal(result.code, 1);
  assert.match(result.stderr, /workers \(from env WORKERS\): several workers need Redis/);
});
