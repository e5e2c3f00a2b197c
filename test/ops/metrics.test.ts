/**
 * The gateway's Prometheus metrics, read from /metrics of real gateways in front of real
 * backends: requests by route, method and status class; upstream answers, failures, timeouts
 * and ejections by target; sign-ins, refreshes, reuse, resets and token checks by outcome; the
 * directory cache; and no label that carries a caller's path, account or token.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, DEMO, postJson, sha256Hex, signIn, startGateway } from '../helpers/gateway.js';
import { parseMetrics, scrape, sumOf, valueOf } from '../helpers/metrics.js';
import { closedPort, startProxy, startTcpBackend } from '../helpers/proxy.js';

const REQUESTS = 'gateway_request_duration_seconds_count';

test('requests are counted by route, method and status class, with latency buckets from sub-millisecond to a minute', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ name: 'orders', prefix: '/orders', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);

  for (let i = 0; i < 3; i++) assert.equal((await call(`${gw.url}/orders/${i}?secret=q${i}`, { token: accessToken })).status, 200);
  assert.equal((await call(`${gw.url}/orders/1`, { method: 'POST', token: accessToken, body: 'x' })).status, 200);
  assert.equal((await call(`${gw.url}/orders/1`)).status, 401);
  // A method outside the known set is counted as "other", never under its own name.
  assert.equal((await call(`${gw.url}/orders/1`, { method: 'PROPFIND', token: accessToken })).status, 200);
  assert.equal((await call(`${gw.url}/nowhere/at/all`)).status, 404);

  const { text, samples } = await scrape(gw.url);
  assert.equal(valueOf(samples, REQUESTS, { route: 'orders', method: 'GET', status_class: '2xx' }), 3);
  assert.equal(valueOf(samples, REQUESTS, { route: 'orders', method: 'POST', status_class: '2xx' }), 1);
  assert.equal(valueOf(samples, REQUESTS, { route: 'orders', method: 'GET', status_class: '4xx' }), 1);
  assert.equal(valueOf(samples, REQUESTS, { route: 'orders', method: 'other', status_class: '2xx' }), 1);
  // The gateway's own routes under their pattern; a path nothing matched under one name.
  assert.equal(valueOf(samples, REQUESTS, { route: '/api/signin', method: 'POST', status_class: '2xx' }), 1);
  assert.equal(valueOf(samples, REQUESTS, { route: '(unmatched)', method: 'GET', status_class: '4xx' }), 1);

  const buckets = samples.filter((s) => s.name === 'gateway_request_duration_seconds_bucket' && s.labels.route === 'orders' && s.labels.method === 'GET' && s.labels.status_class === '2xx');
  assert.deepEqual(buckets.map((s) => s.labels.le), ['0.0005', '0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '30', '60', '+Inf']);
  assert.equal(buckets.at(-1)!.value, 3);

  // The backend's answers, by target: one per request that reached it.
  const target = new URL(backend.url).origin;
  assert.equal(valueOf(samples, 'gateway_upstream_response_seconds_count', { target }), backend.received.length);
  assert.equal(backend.received.length, 5);
  assert.ok(valueOf(samples, 'gateway_upstream_response_seconds_sum', { target }) > 0);

  // Nothing a caller chose: no path, query, token or account in any label.
  for (const leak of ['/orders/1', 'secret=', accessToken, DEMO.alice.accountId, '/nowhere', 'PROPFIND']) assert.ok(!text.includes(leak), `the metrics name ${leak}`);
  // Process and event-loop metrics (prom-client's defaults) under the same prefix.
  assert.ok(samples.some((s) => s.name === 'gateway_nodejs_eventloop_lag_p99_seconds'));
  assert.ok(samples.some((s) => s.name === 'gateway_process_resident_memory_bytes'));
  // Without Redis, no Redis gauge (rather than one saying it is down).
  assert.ok(!text.includes('gateway_redis_connected'));
});

test('sign-ins, refreshes, reuse detections, resets and token checks are counted by outcome', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ name: 'orders', prefix: '/orders', targets: [backend.url] }]);
  const wrong = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex('not the secret') });
  assert.equal(wrong.status, 401);
  const first = await signIn(gw);
  const bob = await signIn(gw, DEMO.bob);

  // A rotation, then the rotated token presented again after the grace window: reuse.
  const rotated = await postJson(`${gw.url}/api/refresh`, { refreshToken: first.refreshToken });
  assert.equal(rotated.status, 200);
  gw.clock.advance(11_000);
  assert.equal((await postJson(`${gw.url}/api/refresh`, { refreshToken: first.refreshToken })).status, 401);
  assert.equal((await postJson(`${gw.url}/api/refresh`, { refreshToken: 'not-a-token' })).status, 401);

  const bobReset = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.bob.apiKey, apiSecret: sha256Hex(DEMO.bob.secret) });
  assert.equal(bobReset.status, 200);
  gw.clock.advance(1000);

  const fresh = rotated.body.message.accessToken as string;
  assert.equal((await call(`${gw.url}/orders/1`, { token: fresh })).status, 200);
  assert.equal((await call(`${gw.url}/orders/1`)).status, 401);
  assert.equal((await call(`${gw.url}/orders/1`, { token: `${fresh.slice(0, -4)}AAAA` })).status, 401);
  assert.equal((await call(`${gw.url}/orders/1`, { token: bob.accessToken })).status, 401);
  gw.clock.advance(16 * 60_000);
  assert.equal((await call(`${gw.url}/orders/1`, { token: fresh })).status, 401);

  const { samples } = await scrape(gw.url);
  assert.equal(valueOf(samples, 'gateway_signins_total', { outcome: 'issued' }), 2);
  assert.equal(valueOf(samples, 'gateway_signins_total', { outcome: 'bad_credentials' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_refreshes_total', { outcome: 'issued' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_refreshes_total', { outcome: 'reused' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_refreshes_total', { outcome: 'invalid' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_resets_total', { outcome: 'reset' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_validations_total', { outcome: 'valid' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_validations_total', { outcome: 'missing' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_validations_total', { outcome: 'invalid' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_validations_total', { outcome: 'revoked' }), 1);
  assert.equal(valueOf(samples, 'gateway_token_validations_total', { outcome: 'expired' }), 1);
});

test('upstream failures are counted by target and kind, and ejections by target', async (t) => {
  const refused = `http://127.0.0.1:${await closedPort()}`;
  // Answers nothing, ever: the route's response timeout decides.
  const silent = createServer(() => {});
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    silent.closeAllConnections();
    silent.close();
  });
  const silentOrigin = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  // Reads the request, then drops the connection without a word.
  const rude = await startTcpBackend(t, (socket) => socket.once('data', () => socket.resetAndDestroy()));
  const gw = await startProxy(t, [
    { name: 'down', prefix: '/down', targets: [refused], auth: 'public', ejectAfterFailures: 2 },
    { name: 'slow', prefix: '/slow', targets: [silentOrigin], auth: 'public', responseTimeoutMs: 200 },
    { name: 'rude', prefix: '/rude', targets: [rude.url], auth: 'public', ejectAfterFailures: 5 },
  ]);

  assert.equal((await call(`${gw.url}/down/1`)).status, 502);
  assert.equal((await call(`${gw.url}/down/2`)).status, 502);
  assert.equal((await call(`${gw.url}/slow/1`)).status, 504);
  assert.equal((await call(`${gw.url}/rude/1`)).status, 502);

  const { samples } = await scrape(gw.url);
  assert.equal(valueOf(samples, 'gateway_upstream_errors_total', { target: refused, kind: 'connect' }), 2);
  assert.equal(valueOf(samples, 'gateway_upstream_ejections_total', { target: refused }), 1);
  assert.equal(valueOf(samples, 'gateway_upstream_errors_total', { target: silentOrigin, kind: 'timeout' }), 1);
  assert.equal(valueOf(samples, 'gateway_upstream_ejections_total', { target: silentOrigin }), 0);
  assert.equal(valueOf(samples, 'gateway_upstream_errors_total', { target: rude.url, kind: 'reset' }), 1);
  assert.equal(valueOf(samples, REQUESTS, { route: 'down', method: 'GET', status_class: '5xx' }), 2);
  assert.equal(valueOf(samples, REQUESTS, { route: 'slow', method: 'GET', status_class: '5xx' }), 1);
  // No answer came, so no answer time.
  assert.equal(sumOf(samples, 'gateway_upstream_response_seconds_count'), 0);
});

test('the directory cache counts hits, misses, stale answers and store errors', async (t) => {
  let failing = false;
  const upstream = createServer((_req, res) => {
    const body = failing ? { success: false } : { success: true, message: { pages: '1', items: [], total: 0 } };
    res.writeHead(failing ? 500 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    upstream.closeAllConnections();
    upstream.close();
  });
  const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const gw = await startGateway(t, {
    overrides: {
      directory: {
        store: 'http',
        http: { signUrl: `${base}/sign?account={accountId}&address={address}`, rolesUrl: `${base}/roles?account={accountId}`, token: 'service-token-for-tests', timeoutMs: 2000 },
        cache: { ttlMs: 60_000, staleWhileRevalidateMs: 1000, maxStaleMs: 600_000 },
      },
    },
  });
  const { accessToken } = await signIn(gw);
  const roles = () => call(`${gw.url}/api/roles`, { token: accessToken });

  assert.equal((await roles()).status, 200);
  assert.equal((await roles()).status, 200);
  failing = true;
  gw.clock.advance(120_000);
  assert.equal((await roles()).status, 200, 'the old copy is served while the store fails');

  const { samples } = await scrape(gw.url);
  assert.equal(valueOf(samples, 'gateway_directory_cache_reads_total', { result: 'hit' }), 1);
  assert.equal(valueOf(samples, 'gateway_directory_cache_reads_total', { result: 'miss' }), 2);
  assert.equal(valueOf(samples, 'gateway_directory_cache_reads_total', { result: 'stale' }), 1);
  assert.equal(valueOf(samples, 'gateway_directory_store_errors_total'), 1);
  assert.equal(valueOf(samples, 'gateway_store_breaker_open', { store: 'directory' }), 0);
});

test('with management.port, metrics and health are served only on the management listener', async (t) => {
  const gw = await startGateway(t, { overrides: { management: { port: 0 } } });
  assert.ok(gw.managementUrl !== undefined && gw.managementUrl !== gw.url);
  for (const path of ['/metrics', '/healthz', '/readyz']) {
    const main = await call(`${gw.url}${path}`);
    assert.equal(main.status, 404, `${path} on the main port: ${JSON.stringify(main.body)}`);
    assert.equal(main.body.message.code, 'not_found');
    assert.equal((await fetch(`${gw.managementUrl}${path}`)).status, 200, `${path} on the management port`);
  }
  // The management listener serves nothing else.
  const signin = await postJson(`${gw.managementUrl}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
  assert.equal(signin.status, 404);
  assert.equal(signin.body.success, false);
  await signIn(gw);

  const { samples } = await scrape(gw.managementUrl);
  assert.equal(valueOf(samples, REQUESTS, { route: '/api/signin', method: 'POST', status_class: '2xx' }), 1);
  // The main port's refusals of the management paths are requests like any other.
  assert.equal(sumOf(samples, REQUESTS, { route: '/metrics' }), 1);
});

test('metrics.enabled false: no /metrics, and the request path records nothing', async (t) => {
  const gw = await startGateway(t, { overrides: { metrics: { enabled: false } } });
  assert.equal((await call(`${gw.url}/metrics`)).status, 404);
  await signIn(gw);
  const text = await gw.services.metrics.registry.metrics();
  assert.equal(sumOf(parseMetrics(text), REQUESTS), 0);
});

test('metrics.accountLabelMaxAccounts counts requests per account for at most that many accounts', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ name: 'orders', prefix: '/orders', targets: [backend.url] }], { metrics: { accountLabelMaxAccounts: 1 } });
  const alice = await signIn(gw);
  const bob = await signIn(gw, DEMO.bob);
  for (let i = 0; i < 2; i++) assert.equal((await call(`${gw.url}/orders/1`, { token: alice.accessToken })).status, 200);
  assert.equal((await call(`${gw.url}/orders/1`, { token: bob.accessToken })).status, 200);

  const { samples } = await scrape(gw.url);
  assert.equal(valueOf(samples, 'gateway_account_requests_total', { account: DEMO.alice.accountId, status_class: '2xx' }), 2);
  assert.equal(valueOf(samples, 'gateway_account_requests_total', { account: '(other)', status_class: '2xx' }), 1);
  assert.ok(!samples.some((s) => s.labels.account === DEMO.bob.accountId), 'the second account is past the bound');
});

test('without metrics.accountLabelMaxAccounts, no account label exists', async (t) => {
  const gw = await startGateway(t);
  const { accessToken } = await signIn(gw);
  assert.equal((await call(`${gw.url}/api/roles`, { token: accessToken })).status, 200);
  const { text } = await scrape(gw.url);
  assert.ok(!text.includes('gateway_account_requests_total'));
  assert.ok(!text.includes(DEMO.alice.accountId));
});
