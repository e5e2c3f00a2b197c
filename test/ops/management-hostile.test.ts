/**
 * The management listener (management.port) and the main port's refusal of its paths, tried
 * as a scanner would: every spelling of /metrics, /healthz and /readyz on the main port is
 * answered by the gateway (404 or 400) and never reaches a catch-all route's backend; the
 * management listener answers only its three paths, in the envelope otherwise, whatever the
 * method or the size of the head.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { startGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-http.js';

const SPELLINGS = (path: string) => [
  path, path.toUpperCase(), `${path}/`, `${path};x`, `${path};x/`, `/${path}`, `//${path.slice(1)}/`, `/.${path}`, `/x/..${path}`,
  `${path}?x=1`, `%2F${path.slice(1)}`, `/%2F${path.slice(1)}`, `${path.slice(0, 2)}%${path.charCodeAt(2).toString(16)}${path.slice(3)}`,
  `${path}%2F`, `${path}%00`, `${path}/.`, `${path}#x`, `/%2e${path}`, `${path.replace('/', '/./')}`,
];

test('with management.port, no spelling of the management paths on the main port reaches a catch-all backend', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGateway(t, {
    overrides: { management: { port: 0 }, routes: [{ name: 'all', prefix: '/', targets: [backend.url], auth: 'public' }] },
  });
  for (const path of ['/metrics', '/healthz', '/readyz']) {
    for (const spelling of SPELLINGS(path)) {
      const res = await rawExchange(gw.url, `GET ${spelling} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.ok(res.status === 404 || res.status === 400, `${spelling}: ${res.status} ${res.body.toString()}`);
      assert.equal(res.json().success, false, spelling);
    }
  }
  assert.deepEqual(backend.received.map((r) => r.url), [], 'the catch-all backend never heard of them');
});

test('the management listener answers its three paths, and the envelope for anything else, as the main port would', async (t) => {
  const gw = await startGateway(t, { overrides: { management: { port: 0 } } });
  const url = gw.managementUrl!;
  const cases: [string, number][] = [
    ['GET / HTTP/1.1', 404], ['GET /api/signin HTTP/1.1', 404], ['GET /METRICS HTTP/1.1', 404], ['GET /metricsx HTTP/1.1', 404],
    ['GET /owner/v1/accounts HTTP/1.1', 404], ['GET /.well-known/jwks.json HTTP/1.1', 404], ['POST /metrics HTTP/1.1', 405],
    ['DELETE /healthz HTTP/1.1', 405], ['PROPFIND /readyz HTTP/1.1', 405], ['GET /metrics/../api/signin HTTP/1.1', 404],
    // Not origin-form: refused on the main port, so here too (it named /metrics and was served).
    ['GET http://evil/metrics HTTP/1.1', 400], ['GET * HTTP/1.1', 400],
  ];
  for (const [line, status] of cases) {
    const res = await rawExchange(url, `${line}\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    assert.equal(res.status, status, line);
    assert.equal(res.json().success, false, line);
  }
  for (const path of ['/metrics', '/healthz', '/readyz']) assert.equal((await fetch(`${url}${path}`)).status, 200, path);
  // Heads Node's parser refuses (too large, malformed, TLS on a plain port) and CONNECT: the
  // envelope, as on the main port, and the listener still answers afterwards.
  const refused: [string, string, number][] = [
    ['a 80 KiB header', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(80 * 1024)}\r\n\r\n`, 431],
    ['a header line without a colon', 'GET /healthz HTTP/1.1\r\nHost x\r\n\r\n', 400],
    ['a TLS hello', '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03', 400],
    ['CONNECT', 'CONNECT evil:443 HTTP/1.1\r\nHost: evil:443\r\n\r\n', 405],
  ];
  for (const [what, bytes, status] of refused) {
    const res = await rawExchange(url, bytes);
    assert.equal(res.status, status, what);
    assert.equal(res.json().success, false, what);
  }
  assert.equal((await fetch(`${url}/healthz`)).status, 200);
});

test('with management.port, a WebSocket handshake for a management path on the main port reaches no catch-all WebSocket route', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGateway(t, {
    overrides: { management: { port: 0 }, routes: [{ name: 'all', prefix: '/', targets: [backend.url], auth: 'public', websocket: true }] },
  });
  for (const path of ['/metrics', '/HEALTHZ', '/readyz;x', '//metrics/']) {
    const res = await rawExchange(gw.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
    assert.equal(res.status, 404, path);
  }
  assert.deepEqual(backend.received.map((r) => r.url), []);
});
