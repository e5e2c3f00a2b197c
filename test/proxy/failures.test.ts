/**
 * Backends that fail, and clients that leave. Before the response head: the envelope, 502
 * bad_gateway when the backend refused, reset or broke the exchange, 504 gateway_timeout when
 * it stayed silent past the route's timeout, both with the request id. After the head: the
 * client sees a cut connection, never a short body that looks complete. A client that goes
 * away releases its backend request. The gateway stays healthy through all of it.
 */
import assert from 'node:assert/strict';
import { request as httpRequest, type ServerResponse } from 'node:http';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, logLines, signIn, type JsonResponse } from '../helpers/gateway.js';
import { closedPort, eventually, signal, startProxy, startTcpBackend, within } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-http.js';

const HANG_GUARD_MS = 5000;

function assertGatewayError(res: JsonResponse, status: number, code: string, label: string): void {
  assert.equal(res.status, status, `${label}: ${JSON.stringify(res.body)}`);
  assert.deepEqual(Object.keys(res.body).sort(), ['message', 'success'], label);
  assert.equal(res.body.success, false, label);
  assert.equal(res.body.message.code, code, label);
  assert.equal(res.body.message.requestId, res.headers.get('x-request-id'), `${label}: the envelope names the request`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, label);
}

test('a backend that cannot be reached, resets, or does not speak HTTP: 502 bad_gateway', async (t) => {
  const hangUp = await startTcpBackend(t, (socket) => socket.destroy());
  const hangUpAfterRequest = await startTcpBackend(t, (socket) => socket.once('data', () => socket.destroy()));
  const halfClose = await startTcpBackend(t, (socket) => socket.once('data', () => socket.end()));
  const garbage = await startTcpBackend(t, (socket) => socket.once('data', () => socket.end('SSH-2.0-OpenSSH_9.6\r\n\r\n')));
  const cutHead = await startTcpBackend(t, (socket) => socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\nContent-Le')));
  // Answers whose length the gateway and the client could read differently.
  const lengthAndChunked = await startTcpBackend(t, (socket) => socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')));
  const twoLengths = await startTcpBackend(t, (socket) => socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!')));
  const closed = `http://127.0.0.1:${await closedPort()}`;
  const routes = {
    closed, hangUp: hangUp.url, hangUpAfterRequest: hangUpAfterRequest.url, halfClose: halfClose.url, garbage: garbage.url, cutHead: cutHead.url,
    lengthAndChunked: lengthAndChunked.url, twoLengths: twoLengths.url,
  };
  const gw = await startProxy(t, Object.entries(routes).map(([name, target]) => ({ prefix: `/${name}`, targets: [target] })));
  const { accessToken } = await signIn(gw);

  for (const name of Object.keys(routes)) {
    for (const method of ['GET', 'POST']) {
      const res = await within(call(`${gw.url}/${name}/1`, { method, token: accessToken, ...(method === 'POST' ? { body: '{"a":1}' } : {}) }), HANG_GUARD_MS, name);
      assertGatewayError(res, 502, 'bad_gateway', `${method} ${name}`);
    }
  }
  const failures = logLines(gw).filter((line) => line.msg === 'backend failed');
  assert.ok(failures.some((line) => line.code === 'ECONNREFUSED' && line.target === closed), 'the refused connection is logged with its code and target');
  assert.ok(!gw.logs.join('\n').includes(accessToken), 'a token is in the log');
  assert.equal((await call(`${gw.url}/healthz`)).status, 200);
});

test('a kept-alive connection the backend closed as it was reused: a GET goes again on a new connection, uncounted; a POST is not repeated', async (t) => {
  // Each connection answers its first request and keeps alive; a second request on it is met
  // with a reset, as when the backend's idle timeout closes it just as the gateway reuses it.
  const backend = await startTcpBackend(t, (socket) => {
    let requests = 0;
    socket.on('data', () => {
      requests += 1;
      if (requests === 1) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
      else socket.resetAndDestroy();
    });
  });
  const gw = await startProxy(t, [{ prefix: '/app', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);
  const get = () => within(call(`${gw.url}/app/1`, { token: accessToken }), HANG_GUARD_MS, 'GET');
  assert.equal((await get()).status, 200);
  assert.equal((await get()).status, 200, 'the reused connection was reset: sent again on a new one');
  assert.equal(backend.connections(), 2);
  assert.deepEqual(logLines(gw).filter((line) => line.msg === 'backend failed'), [], 'not counted against the target');
  // A POST (here without a body) is not repeated: the backend may have acted on it.
  const post = () => within(call(`${gw.url}/app/1`, { method: 'POST', token: accessToken }), HANG_GUARD_MS, 'POST');
  assert.equal((await post()).status, 200);
  assertGatewayError(await post(), 502, 'bad_gateway', 'POST on a reset reused connection');
  assert.equal(backend.connections(), 3);
  assert.equal(logLines(gw).filter((line) => line.msg === 'backend failed').length, 1);
});

test('a backend that switches protocols on a request that asked for no switch: 502 bad_gateway, not a hang', async (t) => {
  // The gateway never forwards Upgrade on a plain request, so a 101 is a broken backend. Node's
  // client drops such a connection without an error or a response: nothing then answers the
  // client, the route's timeouts included (they watch the dropped socket), and no line is logged.
  const switching = await startTcpBackend(t, (socket) => socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n')));
  const gw = await startProxy(t, [
    { prefix: '/plain', targets: [switching.url], responseTimeoutMs: 500 },
    { prefix: '/ws', targets: [switching.url], websocket: true, responseTimeoutMs: 500 },
  ]);
  const { accessToken } = await signIn(gw);
  for (const path of ['/plain/1', '/ws/1']) {
    const res = await within(call(`${gw.url}${path}`, { token: accessToken }), HANG_GUARD_MS, path);
    assertGatewayError(res, 502, 'bad_gateway', path);
  }
  await eventually(() => logLines(gw).filter((line) => line.msg === 'request' && line.status === 502).length === 2, 'both requests logged');
});

test('a backend that answers an upload early: the client gets that answer, not 502', async (t) => {
  // A backend refusing an upload from its head alone (413, or 401 from its own auth) answers
  // at once and discards the rest of the body. Talking to such a backend directly, a client
  // gets the 413; through the gateway it must too, although the upload is still arriving when
  // the answer comes back. (A backend that closes the connection with the body unread makes
  // the gateway's next write fail before the answer is read: a 502, see docs/proxying.md.)
  const backend = await startBackend(t, (req, res) => {
    res.writeHead(413, { 'content-type': 'text/plain' }).end('upload too large');
    req.resume();
  }, { readBody: false });
  const gw = await startProxy(t, [{ prefix: '/files', targets: [backend.url], auth: 'public' }]);
  const upload = (url: string, size: number) => within(new Promise<string>((resolve) => {
    const req = httpRequest(url, { method: 'PUT', headers: { 'content-length': String(size) } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => { body += c; }).on('end', () => resolve(`${res.statusCode} ${body}`));
    });
    req.on('error', (err) => resolve(`client error ${err.message}`));
    const piece = Buffer.alloc(64 * 1024);
    let sent = 0;
    const write = () => {
      while (sent < size) {
        sent += piece.length;
        if (!req.write(piece)) return void req.once('drain', write);
      }
      req.end();
    };
    write();
  }), HANG_GUARD_MS, 'the upload answer');

  for (const size of [1024 * 1024, 4 * 1024 * 1024]) {
    assert.equal(await upload(`${backend.url}/files/x`, size), '413 upload too large', 'directly, the client gets the backend\'s answer');
    const through = [];
    for (let i = 0; i < 3; i++) through.push(await upload(`${gw.url}/files/x`, size));
    assert.deepEqual(through, Array(3).fill('413 upload too large'), `${size} bytes through the gateway`);
  }
});

test('a backend silent past responseTimeoutMs: 504 gateway_timeout, and its late answer goes nowhere', async (t) => {
  const held: ServerResponse[] = [];
  const backend = await startBackend(t, (req, res) => {
    if (req.url === '/slow/never') held.push(res);
    else if (req.url === '/slow/late') setTimeout(() => res.end('late answer'), 600);
    else res.end(`answer to ${req.url}`);
  });
  // /next shares /slow's one pooled connection (pools are per backend origin) but not its short
  // timeout, so a busy machine cannot turn its prompt answers into 504s.
  const gw = await startProxy(t, [
    { prefix: '/slow', targets: [backend.url], responseTimeoutMs: 200, auth: 'public' },
    { prefix: '/next', targets: [backend.url], auth: 'public' },
  ], { proxy: { maxSocketsPerTarget: 1 } });

  const never = await within(call(`${gw.url}/slow/never`), HANG_GUARD_MS, 'a silent backend');
  assertGatewayError(never, 504, 'gateway_timeout', 'never');
  assert.equal(held.length, 1);
  await within(new Promise((resolve) => (held[0]!.destroyed ? resolve(undefined) : held[0]!.once('close', resolve))), HANG_GUARD_MS, 'the timed-out backend request being closed');
  const late = await within(call(`${gw.url}/slow/late`), HANG_GUARD_MS, 'a late backend');
  assertGatewayError(late, 504, 'gateway_timeout', 'late');
  // The late answer must not be taken as the answer to the next request on that connection.
  await new Promise((resolve) => setTimeout(resolve, 700));
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${gw.url}/next/${i}`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), `answer to /next/${i}`);
  }
});

test('a request that waited for the pool\'s one connection is timed from when it is sent', async (t) => {
  const held: string[] = [];
  const backend = await startBackend(t, (req) => {
    held.push(req.url ?? '');
  });
  const gw = await startProxy(t, [{ prefix: '/q', targets: [backend.url], responseTimeoutMs: 300, auth: 'public' }], { proxy: { maxSocketsPerTarget: 1 } });
  // Both at once: the second waits until the first times out and its connection is closed.
  const [first, second] = await within(Promise.all([call(`${gw.url}/q/1`), call(`${gw.url}/q/2`)]), HANG_GUARD_MS, 'both requests');
  assertGatewayError(first, 504, 'gateway_timeout', 'the first');
  assertGatewayError(second, 504, 'gateway_timeout', 'the second, silent once sent');
  assert.deepEqual(held.sort(), ['/q/1', '/q/2']);
});

test('a backend that fails after its response head: the client sees a cut, never a short complete body', async (t) => {
  const backend = await startBackend(t, (req, res) => {
    if (req.url === '/broken/sized') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '100000' });
      res.write(Buffer.alloc(1000, 1));
      setTimeout(() => res.socket!.destroy(), 50);
    } else if (req.url === '/broken/chunked') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first part, ');
      setTimeout(() => res.socket!.destroy(), 50);
    } else if (req.url === '/broken/stalled') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('a start and then nothing');
    } else {
      res.end('fine');
    }
  });
  const gw = await startProxy(t, [{ prefix: '/broken', targets: [backend.url], auth: 'public', idleTimeoutMs: 300 }]);
  for (const path of ['/broken/sized', '/broken/chunked', '/broken/stalled']) {
    const res = await within(fetch(`${gw.url}${path}`), HANG_GUARD_MS, path);
    assert.equal(res.status, 200, `${path}: the head had gone out already`);
    await assert.rejects(within(res.arrayBuffer(), HANG_GUARD_MS, `${path} body`), /terminated|aborted|other side closed|socket/i, `${path}: the body read must fail`);

    // The same byte by byte: the connection closes before the body is complete.
    const connection = await RawConnection.open(gw.url);
    connection.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await assert.rejects(connection.response({ timeoutMs: HANG_GUARD_MS }), /closed mid-response/, path);
  }
  const after = await call(`${gw.url}/broken/ok`);
  assert.equal(after.status, 200, 'the gateway stays healthy');
  assert.equal((await call(`${gw.url}/healthz`)).status, 200);
});

test('a client that disconnects while the backend holds the response releases the backend request', async (t) => {
  /** Per backend request: its request stream closed, and its response closed (finished or not). */
  const closes = new Map<string, { req: ReturnType<typeof signal<void>>; res: ReturnType<typeof signal<{ ended: boolean }>> }>();
  const backend = await startBackend(t, (req, res) => {
    if (req.url === '/held/ok') return void res.end('ok');
    const record = { req: signal(), res: signal<{ ended: boolean }>() };
    closes.set(req.url!, record);
    req.once('close', () => record.req.resolve());
    res.once('close', () => record.res.resolve({ ended: res.writableEnded }));
    if (req.url === '/held/streaming') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first chunk\n');
    }
  }, { readBody: false });
  const gw = await startProxy(t, [{ prefix: '/held', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);
  const head = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${accessToken}\r\n\r\n`;
  const released = async (path: string) => {
    const record = closes.get(path)!;
    await within(record.req.promise, HANG_GUARD_MS, `${path}: the backend request closing`);
    const { ended } = await within(record.res.promise, HANG_GUARD_MS, `${path}: the backend response closing`);
    assert.equal(ended, false, `${path}: the backend's response was cut, not finished`);
  };

  // Before the response head.
  let connection = await RawConnection.open(gw.url);
  connection.write(head('/held/waiting'));
  await eventually(() => closes.has('/held/waiting'), 'the request reaching the backend', HANG_GUARD_MS);
  connection.destroy();
  await released('/held/waiting');

  // While the response streams.
  connection = await RawConnection.open(gw.url);
  const firstChunk = signal();
  connection.socket.on('data', (chunk: Buffer) => { if (chunk.includes('first chunk')) firstChunk.resolve(); });
  connection.write(head('/held/streaming'));
  await within(firstChunk.promise, HANG_GUARD_MS, 'the first chunk reaching the client');
  connection.destroy();
  await released('/held/streaming');

  // Mid-upload: the body stops partway and the client leaves.
  const upload = httpRequest(`${gw.url}/held/upload`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}`, 'content-length': '1000000' } });
  upload.on('error', () => {});
  upload.write(Buffer.alloc(10_000));
  await eventually(() => closes.has('/held/upload'), 'the upload reaching the backend', HANG_GUARD_MS);
  upload.destroy();
  await released('/held/upload');

  assert.equal((await call(`${gw.url}/held/ok`, { token: accessToken })).status, 200, 'the gateway stays healthy');
  const blamed = logLines(gw).filter((line) => line.msg === 'backend failed');
  assert.deepEqual(blamed, [], 'a client leaving was logged as a backend failure');
});
