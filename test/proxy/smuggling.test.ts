/**
 * Request smuggling: the gateway and the backend must never disagree about where a request
 * ends. Ambiguous framing is refused before any route (and so before any backend); a chunked
 * DELETE or OPTIONS keeps its chunked framing upstream, so its body can never be read as a
 * second request on a pooled backend connection; a malformed body ends the backend connection
 * instead of leaving it half-read in the pool.
 *
 * Every gateway here has one pooled connection per backend (maxSocketsPerTarget: 1), so a
 * follow-up request travels on the very connection a smuggled request would be waiting on.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { startBackend, type Backend } from '../helpers/backend.js';
import { call, signIn, type TestGateway } from '../helpers/gateway.js';
import { startProxy } from '../helpers/proxy.js';
import { RawConnection, rawExchange } from '../helpers/raw-http.js';

interface Fixture {
  gw: TestGateway;
  backend: Backend;
  token: string;
}

/** One backend behind a public /pub and a protected /orders route. */
async function fixture(t: TestContext): Promise<Fixture> {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/pub', targets: [backend.url], auth: 'public' },
    { prefix: '/orders', targets: [backend.url] },
  ], { proxy: { maxSocketsPerTarget: 1 } });
  const { accessToken } = await signIn(gw);
  return { gw, backend, token: accessToken };
}

function requestLines(backend: Backend): string[] {
  return backend.received.map((r) => `${r.method} ${r.url}`);
}

const SMUGGLED = 'GET /orders/smuggled HTTP/1.1\r\nHost: x\r\n\r\n';

test('ambiguous framing is refused before any backend is contacted', async (t) => {
  const { gw, backend, token } = await fixture(t);
  const cases: [string, string, number][] = [
    ['Content-Length and Transfer-Encoding', 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
    ['Transfer-Encoding and Content-Length', 'Transfer-Encoding: chunked\r\nContent-Length: 44\r\n\r\n0\r\n\r\n', 400],
    ['Transfer-Encoding and Content-Length: 0', 'Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n5\r\nhello\r\n0\r\n\r\n', 400],
    ['two equal Content-Lengths', 'Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello', 400],
    ['two different Content-Lengths', 'Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!', 400],
    ['a Content-Length list', 'Content-Length: 5, 5\r\n\r\nhello', 400],
    ['a signed Content-Length', 'Content-Length: +5\r\n\r\nhello', 400],
    ['gzip, chunked', 'Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n', 501],
    ['identity, chunked', 'Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n', 501],
  ];
  for (const [label, rest, status] of cases) {
    for (const [path, auth] of [['/pub/1', ''], ['/orders/1', `Authorization: Bearer ${token}\r\n`]]) {
      const connection = await RawConnection.open(gw.url);
      connection.write(`POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}${rest}`);
      const res = await connection.response();
      assert.equal(res.status, status, `${label} on ${path}: ${res.body.toString()}`);
      assert.equal(res.json().success, false, label);
      assert.equal(res.json().message.code, status === 501 ? 'unsupported_transfer_coding' : 'invalid_request', label);
      // What Node's parser refuses ends the connection; a 501 may keep it (its body was read).
      if (status === 400) await connection.closed;
      connection.destroy();
    }
  }
  // Smuggling-shaped spellings Node's parser refuses outright; the answer may be 400 or 501.
  const odd = [
    'Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n',
    'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    'Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n',
    'Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n',
    'Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n',
    'Content-Length: 0x5\r\n\r\nhello',
  ];
  for (const rest of odd) {
    const res = await rawExchange(gw.url, `POST /pub/1 HTTP/1.1\r\nHost: x\r\n${rest}`);
    assert.ok(res.status === 400 || res.status === 501, `${JSON.stringify(rest)} answered ${res.status}`);
  }
  assert.deepEqual(requestLines(backend), [], 'a refused request reached the backend');
  assert.equal(backend.connections(), 0);
});

for (const method of ['DELETE', 'OPTIONS']) {
  test(`a chunked ${method} stays chunked: its body is never a second request on the pooled connection`, async (t) => {
    const { gw, backend, token } = await fixture(t);
    const payload = `${Buffer.byteLength(SMUGGLED).toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`;
    for (const [path, auth] of [['/pub/1', ''], ['/orders/1', `Authorization: Bearer ${token}\r\n`]] as const) {
      const res = await rawExchange(gw.url, `${method} ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${payload}`);
      assert.equal(res.status, 200, `${method} ${path}: ${res.body.toString()}`);
      // A follow-up request on the same (only) backend connection: one with a body, as the
      // chunked one, since bodiless requests go on a pool of their own (proxy/flight.ts).
      const next = await call(`${gw.url}/orders/2`, { token, method: 'POST', body: 'ok' });
      assert.equal(next.status, 200);
      assert.equal(next.body.url, '/orders/2', 'the follow-up got the answer meant for a smuggled request');
    }
    assert.deepEqual(requestLines(backend), [`${method} /pub/1`, 'POST /orders/2', `${method} /orders/1`, 'POST /orders/2']);
    for (const got of backend.received.filter((r) => r.method === method)) {
      assert.deepEqual(got.headers['transfer-encoding'], ['chunked'], `${method} ${got.url}`);
      assert.equal(got.headers['content-length'], undefined, `${method} ${got.url}`);
      assert.equal(got.bodyBytes, Buffer.byteLength(SMUGGLED), `${method} ${got.url}: its body`);
    }
    assert.equal(backend.connections(), 1, 'the requests shared one pooled connection');
  });
}

test('a body announced by Content-Length is a body, whatever it looks like', async (t) => {
  const { gw, backend, token } = await fixture(t);
  for (const method of ['POST', 'DELETE', 'OPTIONS', 'GET']) {
    const res = await rawExchange(gw.url, `${method} /pub/upload HTTP/1.1\r\nHost: x\r\nContent-Length: ${Buffer.byteLength(SMUGGLED)}\r\n\r\n${SMUGGLED}`);
    assert.equal(res.status, 200, method);
    assert.equal((await call(`${gw.url}/orders/2`, { token })).body.url, '/orders/2');
  }
  assert.deepEqual(requestLines(backend).filter((line) => line.includes('smuggled')), []);
  for (const got of backend.received.filter((r) => r.url === '/pub/upload')) {
    assert.equal(got.bodyBytes, Buffer.byteLength(SMUGGLED), got.method);
    assert.deepEqual(got.headers['content-length'], [String(Buffer.byteLength(SMUGGLED))], got.method);
  }
});

test('pipelined requests are authenticated one by one', async (t) => {
  const { gw, backend, token } = await fixture(t);
  const connection = await RawConnection.open(gw.url);
  t.after(() => connection.destroy());
  connection.write(`GET /orders/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\nGET /orders/2 HTTP/1.1\r\nHost: x\r\n\r\nGET /pub/3 HTTP/1.1\r\nHost: x\r\n\r\n`);
  assert.equal((await connection.response()).status, 200);
  const second = await connection.response();
  assert.equal(second.status, 401);
  assert.equal(second.json().message.code, 'missing_token');
  assert.equal((await connection.response()).status, 200);
  // Node serves pipelined requests concurrently (answers in order), so arrival order may vary.
  assert.deepEqual(requestLines(backend).sort(), ['GET /orders/1', 'GET /pub/3']);
});

test('a malformed chunked body cuts the backend connection instead of leaving it half-read', async (t) => {
  const { gw, backend, token } = await fixture(t);
  // The chunk claims 5 bytes and is followed by a whole request instead of its CRLF.
  const connection = await RawConnection.open(gw.url);
  connection.write(`POST /pub/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello${SMUGGLED}0\r\n\r\n`);
  await connection.closed;
  for (let i = 0; i < 3; i++) {
    const res = await call(`${gw.url}/orders/${i}`, { token });
    assert.equal(res.status, 200);
    assert.equal(res.body.url, `/orders/${i}`);
  }
  assert.deepEqual(requestLines(backend).filter((line) => line.includes('smuggled')), []);
  assert.deepEqual(requestLines(backend).filter((line) => line.startsWith('GET /orders/')), ['GET /orders/0', 'GET /orders/1', 'GET /orders/2']);
});
