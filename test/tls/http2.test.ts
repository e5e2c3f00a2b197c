/**
 * HTTP/2 on the main listener (docs/tls.md#http2): h2 by ALPN over TLS beside HTTP/1.1 (and
 * WebSockets on it), h2c with prior knowledge beside HTTP/1.1 on a plain port, own endpoints
 * and proxied routes alike, one exchange per stream, and the limits a hostile peer meets: the
 * SETTINGS the gateway announces, an oversized header list, a SETTINGS frame with too many
 * entries, the rapid-reset attack (CVE-2023-44487) and a CONTINUATION flood (CVE-2024-27983),
 * each closing only the attacker's connection while another client is served.
 *
 * Clients are node:http2 (a real HTTP/2 stack) and, for the attacks, raw frames written on a
 * socket (test/helpers/h2-frames.ts), since no well-behaved client sends them.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { connect as connectHttp2, constants, createServer as createHttp2Server, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { test, type TestContext } from 'node:test';
import { connect as connectTls } from 'node:tls';
import { WebSocket } from 'ws';
import { startBackend, type Backend } from '../helpers/backend.js';
import { logged, startGateway, type TestGateway } from '../helpers/gateway.js';
import { serveStreams } from '../../src/http/http2-streams.js';
import { attack, frame, FRAME, FLAG, framesOf, headerBlock, PREFACE, settingsFrame, type Attack } from '../helpers/h2-frames.js';
import { makeTestCa } from '../helpers/tls.js';
import { startWsBackend } from '../helpers/ws-backend.js';

const ca = makeTestCa();
const main = ca.leaf('main', ['localhost', '127.0.0.1']);

interface H2Answer {
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * An HTTP/2 session to the gateway (over TLS with the test CA trusted, or h2c), once the
 * gateway's SETTINGS have arrived; closed with the test.
 */
async function session(t: TestContext, url: string): Promise<ClientHttp2Session> {
  const client = connectHttp2(url, { ca: ca.caPem });
  t.after(() => client.destroy());
  await new Promise<void>((resolve, reject) => {
    client.once('remoteSettings', () => resolve());
    client.once('error', reject);
  });
  return client;
}

/** One request on `client`; resolves with the answer's head and text. */
function h2(client: ClientHttp2Session, path: string, { method = 'GET', headers = {}, body }: { method?: string; headers?: Record<string, string | string[]>; body?: string } = {}): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const stream = client.request({ ':method': method, ':path': path, ...headers }, { endStream: body === undefined });
    let head: IncomingHttpHeaders = {};
    let text = '';
    stream.on('response', (answer) => { head = answer; });
    stream.setEncoding('utf8').on('data', (chunk: string) => { text += chunk; });
    stream.on('end', () => resolve({ headers: head, body: text }));
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

async function tlsGateway(t: TestContext, backend: Backend, more: Record<string, unknown> = {}): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      tls: { certFile: main.certFile, keyFile: main.keyFile },
      routes: [{ name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'public' }],
      ...more,
    },
  });
}

/** The access lines logged for `requestId`. */
function accessLines(gw: TestGateway, requestId: string): Record<string, unknown>[] {
  return logged(gw, 'request').filter((line) => line.requestId === requestId);
}

test('over TLS, ALPN picks h2: own endpoints and proxied routes are served on one connection, each stream logged once', async (t) => {
  const backend = await startBackend(t);
  const gw = await tlsGateway(t, backend);
  const client = await session(t, gw.url);
  assert.equal(client.alpnProtocol, 'h2', 'the gateway offers h2 first');

  const health = await h2(client, '/healthz');
  assert.equal(health.headers[':status'], 200);
  assert.match(String(health.headers['strict-transport-security']), /^max-age=\d+/, 'HSTS over h2 too');

  // A proxied POST: the body arrives whole, the request line from the pseudo-headers, the
  // Host from :authority, HTTP/2's split cookies as one line, the scheme as https.
  const posted = await h2(client, '/echo/items?x=1', { method: 'POST', headers: { 'content-type': 'text/plain', cookie: ['a=1', 'b=2'] }, body: 'hello over h2' });
  assert.equal(posted.headers[':status'], 200);
  const arrived = backend.received.at(-1)!;
  assert.equal(arrived.method, 'POST');
  assert.equal(arrived.url, '/echo/items?x=1');
  assert.equal(arrived.bodyBytes, 'hello over h2'.length);
  assert.deepEqual(arrived.headers.cookie, ['a=1; b=2'], 'one Cookie line for the HTTP/1.1 backend');
  assert.deepEqual(arrived.headers['x-forwarded-proto'], ['https']);
  assert.deepEqual(arrived.headers['x-forwarded-host'], [new URL(gw.url).host], 'the client\'s :authority');
  assert.ok(Object.keys(arrived.headers).every((name) => !name.startsWith(':')), 'no pseudo-header reaches the backend');

  // A refusal in the envelope: its Connection: close has no place in HTTP/2 and is left out;
  // the stream ends, the connection goes on.
  const refused = await h2(client, '/api/signin', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
  assert.equal(refused.headers[':status'], 400);
  assert.equal(JSON.parse(refused.body).success, false);
  assert.equal(refused.headers.connection, undefined);
  const again = await h2(client, '/nothing-here');
  assert.equal(again.headers[':status'], 404, 'the same connection still serves');
  assert.equal(client.closed, false);

  for (const answer of [health, posted, refused, again]) {
    const id = String(answer.headers['x-request-id']);
    assert.equal(accessLines(gw, id).length, 1, `one access line for ${id}`);
  }
});

test('over TLS, HTTP/1.1 clients and WebSockets are served on the same listener', async (t) => {
  const backend = await startBackend(t);
  const ws = await startWsBackend(t);
  const gw = await tlsGateway(t, backend, {
    routes: [
      { name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'public' },
      { name: 'live', prefix: '/live', targets: [ws.url], websocket: true, auth: 'public' },
    ],
  });
  const status = await new Promise<{ status: number; alpn: string | false | null }>((resolve, reject) => {
    const req = httpsRequest(`${gw.url}/echo/one`, { ca: ca.caPem, agent: false }, (res) => {
      res.resume();
      resolve({ status: res.statusCode!, alpn: (res.socket as import('node:tls').TLSSocket).alpnProtocol });
    });
    req.on('error', reject).end();
  });
  assert.deepEqual(status, { status: 200, alpn: false }, 'a client without ALPN gets HTTP/1.1');

  const client = new WebSocket(`${gw.url.replace('https', 'wss')}/live`, { ca: ca.caPem });
  t.after(() => client.terminate());
  await new Promise<void>((resolve, reject) => {
    client.once('open', () => resolve());
    client.once('error', reject);
  });
  const echoed = new Promise<string>((resolve) => client.once('message', (data) => resolve(String(data))));
  client.send('ping over wss');
  assert.equal(await echoed, 'ping over wss');
  assert.equal(ws.handshakes.length, 1);
});

test('http2.tls false: ALPN offers HTTP/1.1 only', async (t) => {
  const backend = await startBackend(t);
  const gw = await tlsGateway(t, backend, { http2: { tls: false } });
  const { port } = new URL(gw.url);
  const alpn = await new Promise<string | false | null>((resolve, reject) => {
    const socket = connectTls({ host: '127.0.0.1', port: Number(port), ca: ca.caPem, servername: 'localhost', ALPNProtocols: ['h2', 'http/1.1'] }, () => {
      resolve(socket.alpnProtocol);
      socket.destroy();
    });
    socket.once('error', reject);
  });
  assert.equal(alpn, 'http/1.1');
});

async function cleartextGateway(t: TestContext, backend: Backend, http2: Record<string, unknown> = { cleartext: true }): Promise<TestGateway> {
  return startGateway(t, { overrides: { http2, routes: [{ name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'public' }] } });
}

test('h2c with prior knowledge beside HTTP/1.1 on the plain listener (http2.cleartext)', async (t) => {
  const backend = await startBackend(t);
  const gw = await cleartextGateway(t, backend, { cleartext: true, maxConcurrentStreams: 7 });
  const client = await session(t, gw.url);
  assert.equal(client.remoteSettings.maxConcurrentStreams, 7, 'http2.maxConcurrentStreams is announced');
  assert.equal(client.remoteSettings.maxHeaderListSize, 16_384, 'the header list is bounded as HTTP/1.1\'s head');

  const answers = await Promise.all([h2(client, '/healthz'), h2(client, '/echo/a'), h2(client, '/echo/b', { method: 'PUT', body: 'x' })]);
  assert.deepEqual(answers.map((a) => a.headers[':status']), [200, 200, 200]);
  assert.deepEqual(backend.received.map((r) => r.headers['x-forwarded-proto']), [['http'], ['http']]);

  // HTTP/1.1 on the same port, as before: one request, a pipelined pair, a body.
  const plain = await fetch(`${gw.url}/echo/plain`, { method: 'POST', body: 'abc' });
  assert.equal(plain.status, 200);
  assert.equal((await plain.json() as { bodyBytes: number }).bodyBytes, 3);
  const first = await frameExchange(gw, Buffer.from('GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'));
  assert.equal(first.toString('latin1').match(/HTTP\/1\.1 200/g)?.length, 2, 'both pipelined requests answered');
});

test('without http2.cleartext, a prior-knowledge preface is not HTTP/2: refused as HTTP/1.1', async (t) => {
  const backend = await startBackend(t);
  const gw = await cleartextGateway(t, backend, {});
  const answer = await frameExchange(gw, Buffer.concat([PREFACE, settingsFrame([])]));
  assert.match(answer.toString('latin1'), /^HTTP\/1\.1 (400|505)/);
});

/** Writes `bytes` on a new plain connection and resolves with all it gets back until close. */
function frameExchange(gw: TestGateway, bytes: Buffer): Promise<Buffer> {
  const { port } = new URL(gw.url);
  return attack(Number(port), (socket) => socket.write(bytes)).then((result) => result.received);
}

/** Another client is served while (and after) an attack runs: the limit cost one connection only. */
async function assertOthersServed(t: TestContext, gw: TestGateway): Promise<void> {
  const other = await session(t, gw.url);
  const answer = await h2(other, '/healthz');
  assert.equal(answer.headers[':status'], 200, 'another connection is served');
}

async function closedWithGoaway(run: Promise<Attack>, what: string): Promise<Attack> {
  const result = await run;
  assert.ok(result.closedByServer, `${what}: the gateway closed the connection`);
  assert.ok(result.goaway !== undefined, `${what}: with a GOAWAY`);
  return result;
}

test('rapid reset (CVE-2023-44487): a flood of opened-and-cancelled streams closes that connection, at a bounded cost', async (t) => {
  const backend = await startBackend(t);
  const gw = await cleartextGateway(t, backend);
  const { port } = new URL(gw.url);
  const streams = 20_000;
  const run = attack(Number(port), (socket) => {
    socket.write(Buffer.concat([PREFACE, settingsFrame([])]));
    const batch: Buffer[] = [];
    for (let i = 0; i < streams; i++) {
      const id = 1 + 2 * i;
      batch.push(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, headerBlock([[':method', 'GET'], [':scheme', 'http'], [':authority', 'a'], [':path', '/echo/r']])));
      batch.push(frame(FRAME.RST_STREAM, 0, id, Buffer.from([0, 0, 0, constants.NGHTTP2_CANCEL])));
      if (batch.length >= 2000) socket.write(Buffer.concat(batch.splice(0)));
    }
    socket.write(Buffer.concat(batch));
  });
  const result = await closedWithGoaway(run, 'rapid reset');
  // The streams that reached the backend before the cut are far fewer than those sent.
  assert.ok(backend.received.length < streams / 4, `${backend.received.length} of ${streams} streams reached the backend`);
  await assertOthersServed(t, gw);
});

test('CONTINUATION flood (CVE-2024-27983): a header block that never ends closes that connection', async (t) => {
  const backend = await startBackend(t);
  const gw = await cleartextGateway(t, backend);
  const { port } = new URL(gw.url);
  const sent = { continuations: 0 };
  const most = 100_000;
  const run = attack(Number(port), (socket) => {
    socket.write(Buffer.concat([PREFACE, settingsFrame([]), frame(FRAME.HEADERS, FLAG.END_STREAM, 1, headerBlock([[':method', 'GET'], [':scheme', 'http'], [':authority', 'a'], [':path', '/echo/c']]))]));
    const piece = headerBlock([['x-filler', 'f'.repeat(200)]]);
    const write = () => {
      // Written as the socket drains, up to 100 000 frames (20 MB, more than the socket
      // buffers hold): the gateway must stop reading and close first.
      while (sent.continuations < most && !socket.destroyed) {
        sent.continuations++;
        if (!socket.write(frame(FRAME.CONTINUATION, 0, 1, piece))) return void socket.once('drain', write);
      }
    };
    write();
  }, 30_000);
  await closedWithGoaway(run, 'CONTINUATION flood');
  assert.ok(sent.continuations < most, `the connection was closed after ${sent.continuations} CONTINUATION frames, before the flood ended`);
  assert.equal(backend.received.length, 0, 'the unfinished request never reached a backend');
  await assertOthersServed(t, gw);
});

test('SETTINGS with more entries than allowed, and a header list over 16 KiB, are refused; others are served', async (t) => {
  const backend = await startBackend(t);
  const gw = await cleartextGateway(t, backend);
  const { port } = new URL(gw.url);

  const entries = Array.from({ length: 40 }, () => [constants.NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 10] as [number, number]);
  const flood = await closedWithGoaway(attack(Number(port), (socket) => socket.write(Buffer.concat([PREFACE, settingsFrame(entries)]))), 'SETTINGS entries');
  assert.equal(flood.goaway!.code, constants.NGHTTP2_ENHANCE_YOUR_CALM);

  // A well-behaved client, asked for a header list over the announced bound: refused on the
  // stream (or by the client itself, which read the bound), never served.
  const client = await session(t, gw.url);
  const big = await h2(client, '/echo/big', { headers: { 'x-big': 'b'.repeat(20_000) } }).then((a) => a.headers[':status'], (err: Error) => err.message);
  assert.notEqual(big, 200, 'an oversized header list is not served');
  assert.equal(backend.received.length, 0);
  await assertOthersServed(t, gw);
});

test('a stop lets an open HTTP/2 stream finish, tells the session GOAWAY, and does not wait for idle sessions', async (t) => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  const arrived = Promise.withResolvers<void>();
  const backend = await startBackend(t, (_req, res) => {
    arrived.resolve();
    void released.then(() => res.end('late but whole'));
  });
  const gw = await startGateway(t, {
    overrides: {
      tls: { certFile: main.certFile, keyFile: main.keyFile },
      server: { drainDelayMs: 0, shutdownTimeoutMs: 3_600_000 },
      routes: [{ name: 'slow', prefix: '/slow', targets: [backend.url], auth: 'public' }],
    },
  });
  const busy = await session(t, gw.url);
  const idle = await session(t, gw.url);
  const goaway = new Promise<number>((resolve) => busy.once('goaway', (code: number) => resolve(code)));
  const idleClosed = new Promise<void>((resolve) => idle.once('close', () => resolve()));
  const inFlight = h2(busy, '/slow/x');
  await arrived.promise;

  const closing = gw.close();
  assert.equal(await goaway, constants.NGHTTP2_NO_ERROR, 'GOAWAY, no error: the session is told to go elsewhere');
  await idleClosed;
  release();
  const answer = await inFlight;
  assert.deepEqual([answer.headers[':status'], answer.body], [200, 'late but whole']);
  await closing;
  assert.equal(logged(gw, 'shutdown deadline passed: cut the connections still open').length, 0, 'nothing waited for the deadline');
});

test('client certificates over h2: a route that requires one is served with it and refused (401) without, on the same listener', async (t) => {
  const backend = await startBackend(t);
  const zoe = ca.client('h2-zoe', '/CN=Zoe Over H2');
  const gw = await startGateway(t, {
    overrides: {
      tls: { certFile: main.certFile, keyFile: main.keyFile, clientCaFile: ca.caFile },
      routes: [{ name: 'strict', prefix: '/strict', targets: [backend.url], auth: 'public', clientCertificate: 'required' }],
    },
  });
  const withCert = connectHttp2(gw.url, { ca: ca.caPem, cert: readFileSync(zoe.certFile), key: readFileSync(zoe.keyFile) });
  t.after(() => withCert.destroy());
  const served = await h2(withCert, '/strict/a');
  assert.equal(served.headers[':status'], 200);
  assert.equal(withCert.alpnProtocol, 'h2');
  assert.deepEqual(backend.received.at(-1)!.headers['x-client-cert-sha256'], [zoe.fingerprint256.replaceAll(':', '').toLowerCase()]);

  const without = await session(t, gw.url);
  const refused = await h2(without, '/strict/a');
  assert.equal(refused.headers[':status'], 401);
  assert.equal(JSON.parse(refused.body).message.code, 'client_certificate_required');
  assert.equal(backend.received.length, 1, 'the refused stream never reached the backend');
});

test('streams past http2.maxConcurrentStreams are refused (REFUSED_STREAM) while the open ones go on', async (t) => {
  const backend = await startBackend(t);
  const gw = await cleartextGateway(t, backend, { cleartext: true, maxConcurrentStreams: 3 });
  const { port } = new URL(gw.url);
  // Four requests whose bodies never end: three stay open, the fourth is one too many. Then
  // a PING, answered after the frames before it: the wait ends at its ACK.
  const ping = frame(FRAME.PING, 0, 0, Buffer.from('h2-probe'));
  const result = await attack(Number(port), (socket) => {
    const opened = [1, 3, 5, 7].map((id) => frame(FRAME.HEADERS, FLAG.END_HEADERS, id, headerBlock([[':method', 'POST'], [':scheme', 'http'], [':authority', 'a'], [':path', '/echo/open']])));
    socket.write(Buffer.concat([PREFACE, settingsFrame([]), ...opened, ping]));
  }, 10_000, (received) => framesOf(received).some((f) => f.type === FRAME.PING && (f.flags & 1) === 1));
  const resets = framesOf(result.received).filter((f) => f.type === FRAME.RST_STREAM).map((f) => ({ stream: f.streamId, code: f.payload.readUInt32BE(0) }));
  assert.deepEqual(resets, [{ stream: 7, code: constants.NGHTTP2_REFUSED_STREAM }], 'only the fourth stream is refused');
  assert.equal(result.closedByServer, false, 'the connection stays open for the three');
  // The attacker has gone: its open streams went with it, so a stop has nothing to wait for.
  await gw.close();
  assert.equal(logged(gw, 'shutdown deadline passed: cut the connections still open').length, 0, 'the streams of a closed h2c connection ended with it');
});

test('an answer ends with its body\'s last DATA frame: no empty frame after it, own endpoints and proxied routes alike', async (t) => {
  const backend = await startBackend(t);
  const gw = await cleartextGateway(t, backend, { cleartext: true });
  const { port } = new URL(gw.url);
  const ended = (received: Buffer, id: number) => framesOf(received).some((f) => f.streamId === id && (f.flags & FLAG.END_STREAM) !== 0);
  const result = await attack(Number(port), (socket) => {
    const get = (id: number, path: string) => frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, headerBlock([[':method', 'GET'], [':scheme', 'http'], [':authority', 'a'], [':path', path]]));
    socket.write(Buffer.concat([PREFACE, settingsFrame([]), get(1, '/healthz'), get(3, '/echo/frames'), get(5, '/nowhere')]));
  }, 10_000, (received) => ended(received, 1) && ended(received, 3) && ended(received, 5));
  for (const id of [1, 3, 5]) {
    const data = framesOf(result.received).filter((f) => f.streamId === id && f.type === FRAME.DATA);
    assert.ok(data.length > 0, `stream ${id} has a body`);
    // The compatibility API's default (waitForTrailers) ends every stream one tick later with
    // an empty DATA frame: a frame, and a TLS record and write, more per answer.
    assert.deepEqual(data.map((f) => f.payload.length > 0), data.map(() => true), `stream ${id}: no empty DATA frame`);
    assert.equal(data.at(-1)!.flags & FLAG.END_STREAM, FLAG.END_STREAM, `stream ${id}: its last DATA frame ends it`);
  }
});

test('the HTTP/2 example of docs/tls.md is a configuration a gateway serves h2c with', async (t) => {
  const page = readFileSync(new URL('../../docs/tls.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('## HTTP/2'));
  const example = /```json\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(example !== undefined, 'docs/tls.md has the example');
  const backend = await startBackend(t);
  const gw = await startGateway(t, { overrides: { ...JSON.parse(example), routes: [{ name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'public' }] } });
  const client = await session(t, gw.url);
  assert.equal(client.remoteSettings.maxConcurrentStreams, 100);
  assert.equal((await h2(client, '/echo/doc')).headers[':status'], 200);
});

/** A request on `client` that resolves once the answer's head or a reset arrives, with the stream. */
function opened(client: ClientHttp2Session, path: string): ClientHttp2Stream {
  return client.request({ ':method': 'GET', ':path': path }, { endStream: true });
}

/** Everything a stream brings until it ends or is reset: the head, the body's bytes, and how it ended. */
function received(stream: ClientHttp2Stream): Promise<{ headers: IncomingHttpHeaders; bytes: number; digest: string; ended: boolean; rstCode: number }> {
  return new Promise((resolve) => {
    let headers: IncomingHttpHeaders = {};
    let bytes = 0;
    const hash = createHash('sha256');
    let ended = false;
    stream.on('response', (head) => { headers = head; });
    stream.on('data', (chunk: Buffer) => { bytes += chunk.length; hash.update(chunk); });
    stream.on('end', () => { ended = true; });
    stream.on('error', () => {});
    stream.on('close', () => resolve({ headers, bytes, digest: hash.digest('hex'), ended, rstCode: stream.rstCode ?? 0 }));
  });
}

test('bodiless streams for proxied routes are answered on the stream: a large answer whole, a cut one reset, refusals in the envelope', async (t) => {
  const big = randomBytes(3 * 1024 * 1024);
  const backend = await startBackend(t, (req, res) => {
    if (req.url === '/echo/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': big.length });
      res.end(big);
    } else if (req.url === '/echo/cut') {
      // Announces 1000 bytes, sends 10, then the connection goes.
      res.writeHead(200, { 'content-length': 1000 });
      res.write('0123456789', () => res.socket?.destroy());
    } else {
      res.writeHead(204, { 'x-backend': 'yes', connection: 'keep-alive' });
      res.end();
    }
  });
  const gw = await tlsGateway(t, backend, {
    routes: [
      { name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'public' },
      { name: 'down', prefix: '/down', targets: ['http://127.0.0.1:9'], auth: 'public' },
      { name: 'private', prefix: '/private', targets: [backend.url] },
    ],
  });
  const client = await session(t, gw.url);

  // 3 MiB through the client's flow-control window (64 KiB at first): the answer waits on the
  // stream's 'drain' and arrives byte for byte.
  const whole = await received(opened(client, '/echo/big'));
  assert.equal(whole.headers[':status'], 200);
  assert.equal(whole.ended, true);
  assert.equal(whole.bytes, big.length);
  assert.equal(whole.digest, createHash('sha256').update(big).digest('hex'));
  assert.match(String(whole.headers['strict-transport-security']), /^max-age=/, 'HSTS on a proxied answer');

  // A backend that breaks off mid-body: the client sees the stream reset, never a clean end.
  const cut = await received(opened(client, '/echo/cut'));
  assert.equal(cut.headers[':status'], 200);
  assert.equal(cut.ended, false, 'no END_STREAM on a short answer');
  assert.notEqual(cut.rstCode, constants.NGHTTP2_NO_ERROR, 'the stream is reset');
  const postedCut = client.request({ ':method': 'POST', ':path': '/echo/cut' });
  postedCut.end('x');
  const cutToo = await received(postedCut);
  assert.deepEqual([cutToo.ended, cutToo.rstCode !== constants.NGHTTP2_NO_ERROR], [false, true], 'the compatibility API\'s answers are cut alike');

  // No body, and nothing HTTP/2 forbids: the backend's Connection header is left out.
  const empty = await received(opened(client, '/echo/empty'));
  assert.equal(empty.headers[':status'], 204);
  assert.equal(empty.headers['x-backend'], 'yes');
  assert.equal(empty.headers.connection, undefined);
  assert.equal(empty.ended, true);

  // Refusals before the backend: the envelope, its id and HSTS, the challenge.
  const down = await h2(client, '/down/x');
  assert.equal(down.headers[':status'], 502);
  assert.equal(JSON.parse(down.body).success, false);
  assert.match(String(down.headers['strict-transport-security']), /^max-age=/);
  const denied = await h2(client, '/private/x');
  assert.equal(denied.headers[':status'], 401);
  assert.match(String(denied.headers['www-authenticate']), /^Bearer realm="gateway"/);
  assert.equal(JSON.parse(denied.body).message.code, 'missing_token');

  // Through the compatibility API: a HEAD, a body, and the gateway's own paths, as before.
  assert.equal((await h2(client, '/echo/empty', { method: 'HEAD' })).headers[':status'], 204);
  assert.equal((await h2(client, '/echo/posted', { method: 'POST', body: 'x' })).headers[':status'], 204);
  assert.equal((await h2(client, '/healthz')).headers[':status'], 200);
  assert.equal(client.closed, false, 'one connection served them all');
  for (const answer of [whole, cut, empty, down, denied]) {
    const lines = accessLines(gw, String(answer.headers['x-request-id']));
    assert.equal(lines.length, 1, 'one access line per stream');
    assert.equal(lines[0]!.status, answer.headers[':status']);
  }
});

test('a client that resets a proxied stream while the backend is silent: the backend request goes at once, the line says 499, the connection serves on', async (t) => {
  let arrived!: () => void;
  let aborted!: () => void;
  const backend = await startBackend(t, (req, res) => {
    if (!req.url!.startsWith('/echo/silent')) return void res.end('ok');
    res.on('close', () => aborted());
    arrived();
  });
  // The route's timeout far away: only the client's reset can end the backend request in time.
  const gw = await tlsGateway(t, backend, { routes: [{ name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'public', responseTimeoutMs: 120_000 }] });
  const client = await session(t, gw.url);
  // A GET (answered on the stream) and a POST (through the compatibility API) alike.
  for (const method of ['GET', 'POST']) {
    const waiting = new Promise<void>((resolve) => { arrived = resolve; });
    const backendSawClose = new Promise<void>((resolve) => { aborted = resolve; });
    const path = `/echo/silent-${method}`;
    const stream = client.request({ ':method': method, ':path': path }, { endStream: method === 'GET' });
    stream.on('error', () => {});
    if (method === 'POST') stream.end('body');
    await waiting;
    stream.close(constants.NGHTTP2_CANCEL);
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([backendSawClose, new Promise((_, reject) => { bound = setTimeout(reject, 10_000, new Error(`${method}: the backend request outlived its client`)); })]);
    clearTimeout(bound);
    const lines = logged(gw, 'request').filter((line) => line.path === path);
    assert.equal(lines.length, 1, method);
    assert.equal(lines[0]!.status, 499, `${method}: nginx's "client closed request"`);
  }
  const next = await h2(client, '/echo/after');
  assert.equal(next.headers[':status'], 200);
  assert.equal(next.body, 'ok');
});

test('serveStreams takes the place of the compatibility API\'s stream listener only where it finds it', () => {
  const withListener = createHttp2Server({}, () => {});
  assert.equal(serveStreams(withListener, () => false), true, 'this Node\'s compatibility API is the one expected');
  assert.equal(withListener.listenerCount('stream'), 1, 'in its place, not beside it');
  const without = createHttp2Server({});
  assert.equal(serveStreams(without, () => false), false, 'nothing to take the place of');
  assert.equal(without.listenerCount('stream'), 0);
});

test('on streams answered directly: CORS preflights and headers, and a route quota\'s RateLimit fields and its 429', async (t) => {
  const app = 'https://app.example';
  const backend = await startBackend(t, (_req, res) => {
    // A backend's own quota fields and CORS headers give way to the gateway's.
    res.writeHead(200, { 'content-type': 'text/plain', ratelimit: 'backend', 'access-control-allow-origin': '*' });
    res.end('ok');
  });
  const gw = await tlsGateway(t, backend, {
    cors: { allowedOrigins: [app] },
    limits: { mode: 'enforce', rules: [{ route: 'echo', perAddress: [{ limit: 2, seconds: 60 }] }] },
  });
  const client = await session(t, gw.url);

  const preflight = await h2(client, '/echo/items', { method: 'OPTIONS', headers: { origin: app, 'access-control-request-method': 'GET' } });
  assert.equal(preflight.headers[':status'], 204);
  assert.equal(preflight.headers['access-control-allow-origin'], app);
  assert.match(String(preflight.headers['access-control-allow-methods']), /GET/);
  assert.equal(backend.received.length, 0, 'a preflight is the gateway\'s to answer');

  const first = await h2(client, '/echo/items', { headers: { origin: app } });
  assert.equal(first.headers[':status'], 200);
  assert.equal(first.body, 'ok');
  assert.equal(first.headers['access-control-allow-origin'], app, 'the gateway\'s CORS, not the backend\'s *');
  assert.match(String(first.headers.ratelimit), /;r=1;/, 'the gateway\'s quota fields, not the backend\'s');
  assert.equal((await h2(client, '/echo/items')).headers[':status'], 200);
  const refused = await h2(client, '/echo/items', { headers: { origin: app } });
  assert.equal(refused.headers[':status'], 429);
  assert.ok(Number(refused.headers['retry-after']) > 0, 'Retry-After on the 429');
  assert.equal(refused.headers['access-control-allow-origin'], app, 'a browser may read the refusal');
  assert.equal(JSON.parse(refused.body).success, false);
  assert.equal(backend.received.length, 2, 'the refused call never reached the backend');
});
