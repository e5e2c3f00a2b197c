/**
 * Time limits, aborts and dead connections, each its own error class: a proxied route whose
 * backend answers late, a "gateway" that accepts connections and never answers, an
 * already-aborted signal (nothing is sent) and a port where nothing listens.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AbortError, GatewayClient, GatewayError, NetworkError, TimeoutError,
} from '../../packages/client/src/index.js';
import { startBackend } from '../helpers/backend.js';
import { DEMO, startGateway } from '../helpers/gateway.js';
import { closedPort, startTcpBackend } from '../helpers/proxy.js';
import { accessLines, recordingFetch, settle } from './helpers.js';

const alice = { apiKey: DEMO.alice.apiKey, apiSecret: DEMO.alice.secret };

function kind(err: unknown): string {
  assert.ok(err instanceof GatewayError, String(err));
  return `${err.constructor.name} ${err.code}`;
}

test('a proxied route answering late: timeoutMs gives TimeoutError, abort() mid-call gives AbortError with the reason', async (t) => {
  const arrived: (() => void)[] = [];
  const backend = await startBackend(t, (_req, res) => {
    arrived.shift()?.();
    const timer = setTimeout(() => res.end('late'), 1500);
    res.on('close', () => clearTimeout(timer));
  });
  const gw = await startGateway(t, { overrides: { routes: [{ prefix: '/slow', targets: [backend.url] }] } });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  await client.signIn();

  const timedOut = await client.fetch('/slow/a', { timeoutMs: 300 }).then(() => assert.fail('no answer in time'), (e: unknown) => e);
  assert.equal(kind(timedOut), 'TimeoutError timeout');

  // Aborted once the request is at the backend: mid-call, whatever the machine's load.
  const controller = new AbortController();
  const reason = new Error('the user left');
  arrived.push(() => controller.abort(reason));
  const aborted = await client.fetch('/slow/b', { signal: controller.signal }).then(() => assert.fail('aborted'), (e: unknown) => e);
  assert.equal(kind(aborted), 'AbortError aborted');
  assert.equal((aborted as AbortError).cause, reason);
  await settle();
  assert.ok(backend.received.length <= 2, 'neither was retried');
  assert.equal(backend.received.at(-1)?.url, '/slow/b');
});

test('a gateway that never answers: TimeoutError for a call with timeoutMs, AbortError for an aborted one', async (t) => {
  const arrived: (() => void)[] = [];
  const silent = await startTcpBackend(t, (socket) => socket.on('data', () => arrived.shift()?.()));
  const client = new GatewayClient({ baseUrl: silent.url, credentials: { settingsToken: 'gwst_x' } });
  const timedOut = await client.roles({}, { timeoutMs: 300 }).then(() => assert.fail('no answer'), (e: unknown) => e);
  assert.equal(kind(timedOut), 'TimeoutError timeout');
  assert.ok(!(timedOut instanceof AbortError) && !(timedOut instanceof NetworkError));

  const controller = new AbortController();
  // Aborted once its request is at the server: mid-call, whatever the machine's load.
  arrived.push(() => controller.abort('stop'));
  const aborted = await client.sign('0x52908400098527886E0F7030069857D2E4169EE7', { signal: controller.signal }).then(() => assert.fail('aborted'), (e: unknown) => e);
  assert.equal(kind(aborted), 'AbortError aborted');
  assert.equal((aborted as AbortError).cause, 'stop');
  const requests = silent.data.flat().map((chunk) => chunk.toString('latin1')).filter((text) => /^GET \/api\//.test(text));
  assert.ok(requests.length >= 1 && requests.length <= 2, `${requests.length} requests: a timeout and an abort are not retried`);

  // With key credentials the wait is the sign-in's: the caller's limit still holds.
  const signing = new GatewayClient({ baseUrl: silent.url, credentials: alice });
  assert.equal(kind(await signing.roles({}, { timeoutMs: 300 }).catch((e: unknown) => e)), 'TimeoutError timeout');
});

test('an already-aborted signal: AbortError, and nothing is sent', async (t) => {
  const gw = await startGateway(t, { overrides: { routes: [{ prefix: '/svc', targets: ['http://127.0.0.1:9'] }] } });
  const { fetch, sent } = recordingFetch();
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, fetch });
  const signal = AbortSignal.abort('never mind');
  for (const call of [() => client.roles({}, { signal }), () => client.signIn({ signal }), () => client.fetch('/svc/x', { signal }), () => client.reset({ signal })]) {
    const err = await call().then(() => assert.fail('aborted'), (e: unknown) => e);
    assert.equal(kind(err), 'AbortError aborted');
    assert.equal((err as AbortError).cause, 'never mind');
  }
  assert.equal(sent.length, 0);
  await settle();
  assert.equal(accessLines(gw, '/api/signin').length, 0);
});

test('a refused connection: NetworkError, distinct from the other two', async () => {
  const port = await closedPort();
  const { fetch, sent } = recordingFetch();
  const client = new GatewayClient({ baseUrl: `http://127.0.0.1:${port}`, credentials: alice, retry: { baseDelayMs: 10 }, fetch });
  const err = await client.roles().then(() => assert.fail('refused'), (e: unknown) => e);
  assert.equal(kind(err), 'NetworkError network_error');
  // The sign-in's own retries only: the call does not retry a renewal that already gave up.
  assert.deepEqual(sent.map((s) => `${s.method} ${new URL(s.url).pathname}`), Array(3).fill('POST /api/signin'));
  assert.ok(!(err instanceof TimeoutError) && !(err instanceof AbortError));
  assert.equal((err as NetworkError).status, undefined, 'no answer, no status');
  const fetched = await client.fetch('/svc/x').catch((e: unknown) => e);
  assert.equal(kind(fetched), 'NetworkError network_error');
});
