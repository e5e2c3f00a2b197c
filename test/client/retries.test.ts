/**
 * The retry policy's arithmetic, against a scripted server on 127.0.0.1 (a real gateway cannot
 * be made to answer 503 twice and then 200 on cue): full-jitter exponential backoff, the jitter
 * added to a Retry-After, no wait started past the call's deadline (for an answer and for a
 * refused connection alike), and a stream body never sent twice. Math.random is pinned, and
 * the waits the client schedules are read from setTimeout, so nothing depends on the machine's
 * speed.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { GatewayClient, NetworkError, RateLimitError, ServerError } from '../../packages/client/src/index.js';
import { startBackend } from '../helpers/backend.js';
import { closedPort } from '../helpers/proxy.js';
import { recordingFetch } from './helpers.js';

const ROLES = { success: true, message: { pages: '1', items: [], total: 0 } };
const TIMEOUT_MS = 30_000;

/** Math.random answers `value` until the test ends. */
function pinRandom(t: TestContext, value: number): void {
  const random = Math.random;
  Math.random = () => value;
  t.after(() => { Math.random = random; });
}

/** Records the delay of every timer the client's transport sets (its waits), except the calls' own time limits. */
function recordWaits(t: TestContext): number[] {
  const waits: number[] = [];
  const original = globalThis.setTimeout;
  globalThis.setTimeout = ((fn: () => void, ms?: number) => {
    // Node's HTTP client and server set timers of their own.
    if (ms !== TIMEOUT_MS && (new Error().stack ?? '').includes('packages/client/src/transport.ts')) waits.push(ms ?? 0);
    return original(fn, ms);
  }) as typeof setTimeout;
  t.after(() => { globalThis.setTimeout = original; });
  return waits;
}

/** A "gateway" answering /api/roles with `answers` in turn (the last one for ever after). */
async function scripted(t: TestContext, answers: { status: number; headers?: Record<string, string> }[]) {
  const backend = await startBackend(t, (_req, res) => {
    const answer = answers[Math.min(backend.received.length - 1, answers.length - 1)]!;
    res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
    res.end(JSON.stringify(answer.status === 200 ? ROLES : { success: false, message: { code: answer.status === 429 ? 'rate_limited' : 'store_unavailable', description: 'no' } }));
  });
  const client = new GatewayClient({ baseUrl: backend.url, credentials: { settingsToken: 'gwst_test' }, timeoutMs: TIMEOUT_MS });
  return { backend, client };
}

test('backoff without Retry-After: full jitter, doubling per attempt (random 0.5 of 300 ms, then of 600 ms)', async (t) => {
  pinRandom(t, 0.5);
  const { backend, client } = await scripted(t, [{ status: 503 }, { status: 503 }, { status: 200 }]);
  const waits = recordWaits(t);
  assert.deepEqual(await client.roles(), ROLES.message);
  assert.deepEqual(waits, [150, 300]);
  assert.equal(backend.received.length, 3);
});

test('Retry-After: the wait is the server\'s plus up to a quarter of it (at most 1 s) of jitter', async (t) => {
  pinRandom(t, 0.5);
  const { backend, client } = await scripted(t, [{ status: 429, headers: { 'retry-after': '1' } }, { status: 200 }]);
  const waits = recordWaits(t);
  await client.roles();
  assert.deepEqual(waits, [1000 + 0.5 * 250]);
  assert.equal(backend.received.length, 2);
});

test('no wait is started past the deadline: a Retry-After longer than the time left answers the refusal at once', async (t) => {
  // Retry-After 30 s: under the 60 s cap, past a 10 s call (a limit the first answer fits in even on a loaded machine).
  const { backend, client } = await scripted(t, [{ status: 429, headers: { 'retry-after': '30' } }, { status: 200 }]);
  const err = await client.roles({}, { timeoutMs: 10_000 }).then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof RateLimitError, `the 429 itself, not a TimeoutError: ${String(err)}`);
  assert.equal(err.retryAfterMs, 30_000);
  assert.equal(backend.received.length, 1);
  const unavailable = await scripted(t, [{ status: 503, headers: { 'retry-after': '30' } }]);
  assert.ok(await unavailable.client.roles({}, { timeoutMs: 10_000 }).catch((e: unknown) => e) instanceof ServerError);
});

test('Retry-After as an HTTP date is read too: 40 s ahead does not fit in a 10 s call, so the 503 is the answer at once', async (t) => {
  const at = new Date(Date.now() + 40_000).toUTCString();
  const { backend, client } = await scripted(t, [{ status: 503, headers: { 'retry-after': at } }, { status: 200 }]);
  const err = await client.roles({}, { timeoutMs: 10_000 }).then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof ServerError, String(err));
  assert.ok(err.retryAfterMs !== undefined && err.retryAfterMs > 30_000 && err.retryAfterMs <= 40_000, String(err.retryAfterMs));
  assert.equal(backend.received.length, 1);
});

test('no wait is started past the deadline after a refused connection either: NetworkError, not TimeoutError', async (t) => {
  pinRandom(t, 0.5);
  const port = await closedPort();
  const { fetch, sent } = recordingFetch();
  const client = new GatewayClient({ baseUrl: `http://127.0.0.1:${port}`, credentials: { settingsToken: 'gwst_test' }, fetch, retry: { baseDelayMs: 20_000, maxDelayMs: 20_000 } });
  const err = await client.roles({}, { timeoutMs: 5000 }).then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof NetworkError, String(err));
  assert.equal(sent.length, 1, 'a backoff of 10 s does not fit in 5 s: not retried');
});

test('client.fetch: an idempotent PUT with a stream body is not retried on a 503 (the stream is spent), a replayable one is', async (t) => {
  const backend = await startBackend(t, (_req, res) => {
    res.writeHead(503, { 'retry-after': '0' });
    res.end('busy');
  });
  const client = new GatewayClient({ baseUrl: backend.url, credentials: { settingsToken: 'gwst_test' } });
  const stream = new ReadableStream<Uint8Array>({ start(c) { c.enqueue(new TextEncoder().encode('once')); c.close(); } });
  const res = await client.fetch('/up', { method: 'PUT', body: stream });
  assert.equal(res.status, 503);
  assert.equal(await res.text(), 'busy');
  assert.equal(backend.received.length, 1);
  const again = await client.fetch('/up', { method: 'PUT', body: 'twice' });
  assert.equal(again.status, 503);
  assert.equal(backend.received.length, 4, 'the string body: the first try and two retries');
});
