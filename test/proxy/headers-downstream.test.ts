/**
 * What the client gets back: the backend's status, headers and body as the backend wrote
 * them, except hop-by-hop headers and headers the backend named in Connection; repeated
 * Set-Cookie lines stay separate lines. Answers are read byte by byte (raw-http.ts), so a
 * header the gateway forwarded cannot hide behind a client library's folding.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { signIn } from '../helpers/gateway.js';
import { startProxy, startRawHttpBackend } from '../helpers/proxy.js';
import { RawConnection, rawExchange } from '../helpers/raw-http.js';

function response(status: string, lines: string[], body = ''): string {
  return `HTTP/1.1 ${status}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n${body}`;
}

test('hop-by-hop headers of the backend, and those it names in Connection, do not reach the client', async (t) => {
  const backend = await startRawHttpBackend(t, () => response('200 OK', [
    'Connection: keep-alive, X-Hop, x-other-hop', 'X-Hop: 1', 'X-Other-Hop: 2', 'Keep-Alive: timeout=99, max=7',
    'Proxy-Authenticate: Basic realm="inner"', 'Proxy-Connection: keep-alive', 'Trailer: X-Checksum', 'Upgrade: h2c',
    'X-Kept: yes', 'Content-Type: text/plain', 'Content-Length: 5',
  ], 'hello'));
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const connection = await RawConnection.open(gw.url);
  t.after(() => connection.destroy());
  for (let i = 0; i < 2; i++) {
    connection.write('GET /pub/hop HTTP/1.1\r\nHost: x\r\n\r\n');
    const res = await connection.response();
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), 'hello');
    const names = res.headers.map(([name]) => name.toLowerCase());
    for (const name of ['x-hop', 'x-other-hop', 'proxy-authenticate', 'proxy-connection', 'trailer', 'upgrade']) {
      assert.ok(!names.includes(name), `${name} reached the client`);
    }
    assert.ok(!res.all('keep-alive').includes('timeout=99, max=7'), `the backend's Keep-Alive reached the client: ${res.all('keep-alive')}`);
    for (const value of res.all('connection')) assert.doesNotMatch(value, /hop/i, 'the backend\'s Connection reached the client');
    assert.equal(res.get('x-kept'), 'yes');
    assert.equal(res.get('content-type'), 'text/plain');
  }
  assert.equal(connection.ended, false, 'the client connection is still open');
});

test('a backend that closes its connection does not close the client\'s', async (t) => {
  const backend = await startRawHttpBackend(t, () => response('200 OK', ['Connection: close', 'Content-Length: 2'], 'ok'));
  backend.server.on('connection', (socket) => socket.on('data', () => setImmediate(() => socket.end())));
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const connection = await RawConnection.open(gw.url);
  t.after(() => connection.destroy());
  for (let i = 0; i < 3; i++) {
    connection.write(`GET /pub/${i} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const res = await connection.response();
    assert.equal(res.status, 200, `request ${i}`);
    assert.equal(res.body.toString(), 'ok');
    for (const value of res.all('connection')) assert.doesNotMatch(value, /close/i, `request ${i}: the backend's close reached the client`);
  }
  assert.equal(backend.connections(), 3, 'each request needed a new backend connection');
});

test('repeated Set-Cookie headers arrive as separate headers, in order, unchanged', async (t) => {
  const cookies = ['a=1; Path=/; HttpOnly', 'b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Secure', 'c=3, d=4'];
  const backend = await startRawHttpBackend(t, () => response('200 OK', [
    ...cookies.map((c, i) => `${i === 1 ? 'set-cookie' : 'Set-Cookie'}: ${c}`), 'X-Multi: 1', 'X-Multi: 2', 'Content-Length: 0',
  ]));
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const res = await rawExchange(gw.url, 'GET /pub HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal(res.status, 200);
  assert.deepEqual(res.all('set-cookie'), cookies);
  assert.equal(res.all('x-multi').join(', '), '1, 2');

  const viaFetch = await fetch(`${gw.url}/pub`);
  assert.deepEqual(viaFetch.headers.getSetCookie(), cookies);
});

test('status, headers and body of the backend pass unchanged, errors included', async (t) => {
  const blob = Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 7) % 256));
  const gzipped = gzipSync('compressed by the backend '.repeat(100));
  const backend = await startBackend(t, (req, res) => {
    const path = req.url!.replace(/^\/orders/, '');
    switch (path) {
      case '/created':
        res.writeHead(201, { location: '/orders/42', 'content-type': 'application/json' }).end('{"id":42}');
        break;
      case '/empty':
        res.writeHead(204, { 'x-note': 'nothing' }).end();
        break;
      case '/cached':
        if (req.headers['if-none-match'] === '"v1"') res.writeHead(304, { etag: '"v1"', 'cache-control': 'max-age=60' }).end();
        else res.writeHead(200, { etag: '"v1"', 'cache-control': 'max-age=60', 'content-type': 'text/plain' }).end('v1');
        break;
      case '/missing':
        res.writeHead(404, { 'content-type': 'application/problem+json' }).end('{"title":"no such order"}');
        break;
      case '/broken':
        res.writeHead(500, { 'content-type': 'text/plain; charset=iso-8859-1' }).end('backend broke');
        break;
      case '/unavailable':
        res.writeHead(503, { 'retry-after': '7', 'content-type': 'text/plain' }).end('later');
        break;
      case '/teapot':
        res.writeHead(418, 'Short And Stout', { 'content-type': 'text/plain' }).end('tea');
        break;
      case '/moved':
        res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end();
        break;
      case '/unauthorised':
        res.writeHead(401, { 'www-authenticate': 'Basic realm="backend"', 'content-type': 'text/plain' }).end('backend says no');
        break;
      case '/blob':
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': blob.length }).end(blob);
        break;
      case '/gzipped':
        res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip', vary: 'Accept-Encoding' }).end(gzipped);
        break;
      case '/streamed':
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.write(blob.subarray(0, 1000));
        res.end(blob.subarray(1000));
        break;
      default:
        res.writeHead(200, { 'content-length': '1234', 'content-type': 'text/plain' }).end(req.method === 'HEAD' ? undefined : 'x'.repeat(1234));
    }
  });
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);
  const get = (path: string, { method = 'GET', lines = [] as string[] } = {}) => rawExchange(gw.url,
    `${method} /orders${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${accessToken}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`, { head: method === 'HEAD' });

  const created = await get('/created');
  assert.equal(created.status, 201);
  assert.equal(created.get('location'), '/orders/42');
  assert.equal(created.body.toString(), '{"id":42}');

  const empty = await get('/empty');
  assert.equal(empty.status, 204);
  assert.equal(empty.get('x-note'), 'nothing');
  assert.equal(empty.body.length, 0);

  const fresh = await get('/cached');
  assert.equal(fresh.status, 200);
  assert.equal(fresh.get('cache-control'), 'max-age=60', 'the gateway\'s no-store replaced the backend\'s caching');
  const notModified = await get('/cached', { lines: ['If-None-Match: "v1"'] });
  assert.equal(notModified.status, 304);
  assert.equal(notModified.get('etag'), '"v1"');
  assert.equal(notModified.get('cache-control'), 'max-age=60');

  for (const [path, status, type, text] of [
    ['/missing', 404, 'application/problem+json', '{"title":"no such order"}'],
    ['/broken', 500, 'text/plain; charset=iso-8859-1', 'backend broke'],
    ['/unavailable', 503, 'text/plain', 'later'],
    ['/teapot', 418, 'text/plain', 'tea'],
    ['/unauthorised', 401, 'text/plain', 'backend says no'],
  ] as const) {
    const res = await get(path);
    assert.equal(res.status, status, path);
    assert.equal(res.get('content-type'), type, path);
    assert.equal(res.body.toString('latin1'), text, `${path}: the backend's body was replaced`);
  }
  assert.equal((await get('/unavailable')).get('retry-after'), '7');
  assert.equal((await get('/unauthorised')).get('www-authenticate'), 'Basic realm="backend"');

  const moved = await get('/moved');
  assert.equal(moved.status, 302);
  assert.equal(moved.get('location'), 'http://127.0.0.1:1/elsewhere', 'redirects are not rewritten');

  for (const path of ['/blob', '/streamed']) {
    const res = await get(path);
    assert.equal(res.status, 200, path);
    assert.equal(createHash('sha256').update(res.body).digest('hex'), createHash('sha256').update(blob).digest('hex'), path);
    assert.ok(res.get('x-request-id'), `${path}: a proxied answer has a request id`);
  }
  assert.equal((await get('/blob')).get('content-length'), String(blob.length), 'a sized answer stays sized');

  // An encoded body is the backend's business: neither decoded nor re-encoded on the way.
  const encoded = await get('/gzipped', { lines: ['Accept-Encoding: gzip'] });
  assert.equal(encoded.get('content-encoding'), 'gzip');
  assert.equal(encoded.get('vary'), 'Accept-Encoding');
  assert.ok(encoded.body.equals(gzipped), 'the gzipped body changed on the way');
  assert.deepEqual(backend.received.at(-1)!.headers['accept-encoding'], ['gzip']);

  const head = await get('/sized', { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.get('content-length'), '1234');
  assert.equal(head.body.length, 0);
  // The connection carried no stray body: a pipelined HEAD and GET both parse.
  const connection = await RawConnection.open(gw.url);
  t.after(() => connection.destroy());
  connection.write(`HEAD /orders/sized HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${accessToken}\r\n\r\nGET /orders/created HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${accessToken}\r\n\r\n`);
  assert.equal((await connection.response({ head: true })).status, 200);
  assert.equal((await connection.response()).status, 201);
});
