/**
 * WORKERS=2: one scrape answers for the whole process group, whichever worker Prometheus
 * reaches (the primary gathers every worker's registry), on the main port and on the
 * management listener alike.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { get } from 'node:http';
import { test } from 'node:test';
import { parseMetrics, valueOf } from '../helpers/metrics.js';
import { LISTENING, startGatewayProcess, waitForLog } from '../helpers/process.js';
import { freePort, redisSuite, startRedis } from '../helpers/redis.js';

/** One request on its own connection, so the primary hands each to the next worker. */
function getFresh(url: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => { text += chunk; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    }).on('error', reject);
  });
}

async function startWorkers(t: Parameters<typeof startGatewayProcess>[0], env: Record<string, string> = {}) {
  const redis = await startRedis(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const gw = await startGatewayProcess(t, {
    WORKERS: '2', REDIS_URL: redis.url, SIGNING_KEYS: JSON.stringify([{ kid: 'metrics-1', alg: 'EdDSA', pem }]), LOG_LEVEL: 'info', ...env,
  });
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => LISTENING(line) && line.worker === worker, 20_000);
  return gw;
}

test('with two workers, every scrape counts both workers\' requests', redisSuite(), async (t) => {
  const gw = await startWorkers(t);
  for (let i = 0; i < 10; i++) assert.equal((await getFresh(`${gw.url}/api/roles`)).status, 401);
  // Both workers answered some of them (the access log names the worker).
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === 'request' && line.path === '/api/roles' && line.worker === worker, 5000);

  for (let i = 0; i < 4; i++) {
    const res = await getFresh(`${gw.url}/metrics`);
    assert.equal(res.status, 200, res.text);
    const samples = parseMetrics(res.text);
    assert.equal(valueOf(samples, 'gateway_request_duration_seconds_count', { route: '/api/roles', method: 'GET', status_class: '4xx' }), 10, `scrape ${i}`);
    assert.equal(valueOf(samples, 'gateway_token_validations_total', { outcome: 'missing' }), 10, `scrape ${i}`);
    // A state gauge is the group's worst worker's, not a sum.
    assert.equal(valueOf(samples, 'gateway_redis_connected'), 1, `scrape ${i}`);
    assert.equal(valueOf(samples, 'gateway_store_breaker_open', { store: 'redis' }), 0, `scrape ${i}`);
  }
  // Both workers answered scrapes (waitForLog fails the test otherwise): each gave the group's counts.
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === 'request' && line.path === '/metrics' && line.worker === worker, 5000);
});

test('with two workers and management.port, the management listener answers for the group', redisSuite(), async (t) => {
  const managementPort = await freePort();
  const gw = await startWorkers(t, { MANAGEMENT_PORT: String(managementPort) });
  const management = `http://127.0.0.1:${managementPort}`;
  for (let i = 0; i < 6; i++) assert.equal((await getFresh(`${gw.url}/api/roles`)).status, 401);
  assert.equal((await getFresh(`${gw.url}/metrics`)).status, 404);
  for (let i = 0; i < 3; i++) {
    const res = await getFresh(`${management}/metrics`);
    assert.equal(res.status, 200, res.text);
    assert.equal(valueOf(parseMetrics(res.text), 'gateway_request_duration_seconds_count', { route: '/api/roles', method: 'GET', status_class: '4xx' }), 6, `scrape ${i}`);
  }
  assert.equal((await getFresh(`${management}/readyz`)).status, 200);
});
