/**
 * client.fetch on proxied routes of a real gateway with real backends: a request body streamed
 * chunk by chunk (the backend hashes what arrives), an answer streamed back unchanged, the
 * bearer token sent to the gateway's origin only and in place of the caller's, a backend's own
 * errors returned as Responses, and the 401 replay of a replayable body.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { ConfigurationError, GatewayClient } from '../../packages/client/src/index.js';
import { startBackend } from '../helpers/backend.js';
import { DEMO, postJson, sha256Hex, startGateway } from '../helpers/gateway.js';
import { accessLines, recordingFetch, settle } from './helpers.js';

const alice = { apiKey: DEMO.alice.apiKey, apiSecret: DEMO.alice.secret };

test('a streamed upload: several MB generated chunk by chunk reach the backend whole', async (t) => {
  const backend = await startBackend(t, (req, res) => {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => { hash.update(chunk); bytes += chunk.length; });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ digest: hash.digest('hex'), bytes, transferEncoding: req.headers['transfer-encoding'] ?? null }));
    });
  }, { readBody: false });
  const gw = await startGateway(t, { overrides: { routes: [{ prefix: '/upload', targets: [backend.url] }] } });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });

  const chunks = 128;
  const sent = createHash('sha256');
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled === chunks) return controller.close();
      const chunk = randomBytes(64 * 1024);
      sent.update(chunk);
      pulled++;
      controller.enqueue(new Uint8Array(chunk));
    },
  });
  const res = await client.fetch('/upload/blob', { method: 'PUT', body, headers: { 'content-type': 'application/octet-stream' } });
  assert.equal(res.status, 200);
  const answer = await res.json() as { digest: string; bytes: number; transferEncoding: string | null };
  assert.equal(answer.bytes, chunks * 64 * 1024);
  assert.equal(answer.digest, sent.digest('hex'));
  assert.equal(answer.transferEncoding, 'chunked', 'streamed, not buffered to a length first');
});

test('a streamed download passes through unchanged: status, headers, body', async (t) => {
  const payload = randomBytes(3 * 1024 * 1024);
  const backend = await startBackend(t, (_req, res) => {
    res.writeHead(206, { 'content-type': 'application/x-test', 'x-backend': 'yes', 'cache-control': 'no-store' });
    let at = 0;
    const next = () => {
      if (at >= payload.length) return res.end();
      const slice = payload.subarray(at, at + 100_000);
      at += slice.length;
      if (res.write(slice)) setImmediate(next);
      else res.once('drain', next);
    };
    next();
  });
  const gw = await startGateway(t, { overrides: { routes: [{ prefix: '/files', targets: [backend.url] }] } });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  const res = await client.fetch(new URL('/files/big', gw.url));
  assert.equal(res.status, 206);
  assert.equal(res.headers.get('content-type'), 'application/x-test');
  assert.equal(res.headers.get('x-backend'), 'yes');
  assert.equal(res.headers.get('cache-control'), 'no-store');
  const received = Buffer.from(await res.arrayBuffer());
  assert.equal(sha256Hex(received.toString('latin1')), sha256Hex(payload.toString('latin1')));
  assert.equal(received.length, payload.length);
});

test('client.fetch: another origin is refused, the caller\'s Authorization replaced, a backend\'s 4xx and 5xx returned', async (t) => {
  let answer = { status: 200, body: '{"ok":true}' };
  const backend = await startBackend(t, (_req, res, received) => {
    res.writeHead(answer.status, { 'content-type': 'application/json', 'x-seen-auth': received.headers.authorization?.[0] === undefined ? 'none' : 'yes' });
    res.end(answer.body);
  });
  const gw = await startGateway(t, { overrides: { routes: [{ prefix: '/svc', targets: [backend.url] }] } });
  const { fetch, sent } = recordingFetch();
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, fetch });

  for (const input of [backend.url + '/svc/x', new URL('/svc/x', backend.url), new Request(backend.url + '/svc/x')]) {
    const err = await client.fetch(input).then(() => assert.fail('refused'), (e: unknown) => e);
    assert.ok(err instanceof ConfigurationError, String(err));
  }
  assert.equal(sent.length, 0, 'nothing sent, not even a sign-in');

  const res = await client.fetch('/svc/orders/1?x=1', { headers: { authorization: 'Bearer someone-else', 'x-mine': 'kept' } });
  assert.equal(res.status, 200);
  const proxied = sent.at(-1)!;
  assert.equal(new URL(proxied.url).pathname + new URL(proxied.url).search, '/svc/orders/1?x=1');
  assert.equal(proxied.headers.get('authorization'), `Bearer ${await client.accessToken()}`);
  assert.equal(proxied.headers.get('x-mine'), 'kept');
  assert.equal(backend.received.at(-1)!.url, '/svc/orders/1?x=1');

  for (const status of [404, 422, 500, 503]) {
    answer = { status, body: `{"backend":${status}}` };
    const own = await client.fetch('/svc/thing', { method: 'POST', body: 'x' });
    assert.equal(own.status, status);
    assert.deepEqual(await own.json(), { backend: status }, 'the backend\'s own body');
  }
  await settle();
  assert.equal(accessLines(gw, '/svc/thing').length, 4, 'none retried: POST');
});

test('client.fetch replays a replayable body once after a 401 invalid_token; a stream body gets the 401 back', async (t) => {
  const backend = await startBackend(t, (req, res, received) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ bytes: received.bodyBytes }));
  });
  const gw = await startGateway(t, { overrides: { routes: [{ prefix: '/svc', targets: [backend.url] }] } });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  await client.signIn();
  const reset = async () => {
    const res = await postJson(`${gw.url}/api/reset`, { apiKey: alice.apiKey, apiSecret: sha256Hex(alice.apiSecret) });
    assert.equal(res.status, 200);
    gw.clock.advance(1000);
  };

  await reset();
  const replayed = await client.fetch(new Request(`${gw.url}/svc/a`, { method: 'POST', body: 'hello' }));
  assert.equal(replayed.status, 200);
  assert.deepEqual(await replayed.json(), { bytes: 5 }, 'the Request\'s body sent again whole');

  await reset();
  const stream = new ReadableStream<Uint8Array>({ start(c) { c.enqueue(new TextEncoder().encode('once')); c.close(); } });
  const refused = await client.fetch('/svc/b', { method: 'POST', body: stream });
  assert.equal(refused.status, 401, 'a stream cannot be sent again: the 401 is the answer');
  assert.match(refused.headers.get('www-authenticate') ?? '', /invalid_token/);
  const next = await client.fetch('/svc/c', { method: 'PUT', body: new Uint8Array([1, 2, 3]) });
  assert.equal(next.status, 200, 'the refused token was dropped: the next call renews');
  assert.deepEqual(await next.json(), { bytes: 3 });
  await settle();
  assert.equal(accessLines(gw, '/svc/a', 401).length, 1);
  assert.equal(accessLines(gw, '/svc/b', 401).length, 1);
  assert.equal(backend.received.length, 2);
});

test('where fetch cannot stream a request body (Firefox, Safari), a stream body is refused before anything is sent', async (t) => {
  const backend = await startBackend(t);
  const client = new GatewayClient({ baseUrl: backend.url, credentials: { settingsToken: 'gwst_test' } });
  const Platform = globalThis.Request;
  // Such a Request never reads `duplex` and sends the stream as the text "[object ReadableStream]".
  globalThis.Request = class extends Platform {
    constructor(input: Request | string | URL, init?: RequestInit) {
      super(input, init?.body instanceof ReadableStream ? { method: init.method, headers: init.headers, body: String(init.body) } : init);
    }
  };
  t.after(() => { globalThis.Request = Platform; });
  const body = new ReadableStream<Uint8Array>({ start(c) { c.enqueue(new Uint8Array([1])); c.close(); } });
  const err = await client.fetch('/up', { method: 'PUT', body }).then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof ConfigurationError, String(err));
  assert.equal(err.code, 'stream_body_unsupported');
  assert.equal(backend.received.length, 0);
});
