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
  const backend = await startBackend(t, (_req, res) => {
    const timer = setTimeout(() => res.end('late'), 1500);
    res.on('close', () => clearTimeout(timer));
  });
  const gw = await startGateway(t, { overrides: { routes: [{ prefix: '/slow', targets: [backend.url] }] } });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });

  const timedOut = await client.fetch('/slow/a', { timeoutMs: 300 }).then(() => assert.fail('no answer in time'), (e: unknown) => e);
  assert.equal(kind(timedOut), 'TimeoutError timeout');

  const controller = new AbortController();
  const reason = new Error('the user left');
  setTimeout(() => controller.abort(reason), 200);
  const aborted = await client.fetch('/slow/b', { signal: controller.signal }).then(() => assert.fail('aborted'), (e: unknown) => e);
  assert.equal(kind(aborted), 'AbortError aborted');
  assert.equal((aborted as AbortError).cause, reason);
  assert.equal(backend.received.length, 2, 'both reached the backend, neither was retried');
});

test('a gateway that never answers: TimeoutError for a call with timeoutMs, AbortError for an aborted one', async (t) => {
  const silent = await startTcpBackend(t, () => {});
  const client = new GatewayClient({ baseUrl: silent.url, credentials: { settingsToken: 'gwst_x' } });
  const timedOut = await client.roles({}, { timeoutMs: 300 }).then(() => assert.fail('no answer'), (e: unknown) => e);
  assert.equal(kind(timedOut), 'TimeoutError timeout');
  assert.ok(!(timedOut instanceof AbortError) && !(timedOut instanceof NetworkError));

  const controller = new AbortController();
  setTimeout(() => controller.abort('stop'), 200);
  const aborted = await client.sign('0x52908400098527886E0F7030069857D2E4169EE7', { signal: controller.signal }).then(() => assert.fail('aborted'), (e: unknown) => e);
  assert.equal(kind(aborted), 'AbortError aborted');
  assert.equal((aborted as AbortError).cause, 'stop');
  const requests = silent.data.flat().map((chunk) => chunk.toString('latin1')).filter((text) => /^GET \/api\//.test(text));
  assert.equal(requests.length, 2, 'one request per call: a timeout and an abort are not retried');

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
  const client = new GatewayClient({ baseUrl: `http://127.0.0.1:${port}`, credentials: alice, retry: { baseDelayMs: 10 } });
  const err = await client.roles().then(() => assert.fail('refused'), (e: unknown) => e);
  assert.equal(kind(err), 'NetworkError network_error');
  assert.ok(!(err instanceof TimeoutError) && !(err instanceof AbortError));
  assert.equal((err as NetworkError).status, undefined, 'no answer, no status');
  const fetched = await client.fetch('/svc/x').catch((e: unknown) => e);
  assert.equal(kind(fetched), 'NetworkError network_error');
});
