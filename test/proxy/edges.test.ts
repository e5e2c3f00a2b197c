/**
 * Small edges of the header policy: an empty Host gives no empty forwarding host, and the
 * client keeps the gateway's request id whatever the backend answers with. And refusals on a
 * proxied route answer a complete request like any other answer: the connection stays open.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startBackend, echo } from '../helpers/backend.js';
import { parseRawResponse, rawRequest } from '../helpers/gateway.js';
import { onlyRequest, startProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-http.js';

test('an HTTP/1.0 request without Host sends no empty X-Forwarded-Host or Forwarded host', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }], { proxy: { forwardedHeaders: 'both' } });
  const res = parseRawResponse(await rawRequest(gw.url, 'GET /pub/x HTTP/1.0\r\n\r\n'));
  assert.equal(res.status, 200);
  const got = onlyRequest(backend);
  assert.equal(got.headers['x-forwarded-host'], undefined);
  assert.deepEqual(got.headers.forwarded, ['for=127.0.0.1;proto=http']);
});

test("the client gets the gateway's X-Request-Id, not the backend's", async (t) => {
  const backend = await startBackend(t, (req, res, received) => {
    res.setHeader('X-Request-Id', 'backend-made-this-up');
    echo(req, res, received);
  });
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const res = await fetch(`${gw.url}/pub/x`, { headers: { 'x-request-id': 'caller-42' } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-request-id'), 'caller-42');
  assert.deepEqual(onlyRequest(backend).headers['x-request-id'], ['caller-42']);
});

test('TRACE is refused on a proxied route and never reaches the backend', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const res = parseRawResponse(await rawRequest(gw.url, 'TRACE /pub/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  assert.equal(res.status, 405);
  assert.equal(res.body.message.code, 'method_not_allowed');
  assert.match(res.headers, /\r\nallow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS/i);
  assert.equal(backend.received.length, 0);
});

test('refusals on a proxied route (malformed credentials, TRACE, no token) keep a keep-alive connection open', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/api', targets: [backend.url] }, { prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const connection = await RawConnection.open(gw.url);
  t.after(() => connection.destroy());
  const refusals: [string, number][] = [
    ['GET /api/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a b\r\n\r\n', 400],
    ['TRACE /pub/x HTTP/1.1\r\nHost: x\r\n\r\n', 405],
    ['GET /api/x HTTP/1.1\r\nHost: x\r\n\r\n', 401],
  ];
  for (const [request, status] of refusals) {
    connection.write(request);
    const res = await connection.response();
    assert.equal(res.status, status, request);
    assert.notEqual(res.get('connection')?.toLowerCase(), 'close', `${request}: the refusal keeps the connection`);
  }
  connection.write('GET /pub/x HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal((await connection.response()).status, 200, 'the same connection still serves');
  assert.equal(connection.ended, false);
  assert.equal(backend.received.length, 1);
});
