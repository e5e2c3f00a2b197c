import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEMO, parseRawResponse, rawRequest, sha256Hex, startGateway } from '../helpers/gateway.js';

const body = JSON.stringify({ apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
const chunked = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;

test('ambiguous framing and targets are refused in the envelope before any route', async (t) => {
  const gw = await startGateway(t);
  const signIn = (head: string, payload = chunked) => `POST /api/signin ${head}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${payload}`;
  const cases: [string, string, number, string][] = [
    ['a coding before chunked', signIn('HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked'), 501, 'unsupported_transfer_coding'],
    ['an unknown coding before chunked', signIn('HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo, chunked'), 501, 'unsupported_transfer_coding'],
    ['identity before chunked', signIn('HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked'), 501, 'unsupported_transfer_coding'],
    ['Transfer-Encoding in HTTP/1.0', signIn('HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked'), 400, 'invalid_request'],
    ['no Host in HTTP/1.1', 'GET /healthz HTTP/1.1\r\n\r\n', 400, 'invalid_request'],
    ['two Host headers', 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 400, 'invalid_request'],
    ['a Host that is no host[:port]', 'GET /healthz HTTP/1.1\r\nHost: evil.com:99999/@x\r\n\r\n', 400, 'invalid_request'],
    ['a Host with a path', 'GET /healthz HTTP/1.1\r\nHost: a/b\r\n\r\n', 400, 'invalid_request'],
    ['an Expect other than 100-continue', `POST /api/refresh HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`, 417, 'expectation_failed'],
    ['CONNECT', 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n', 405, 'method_not_allowed'],
  ];
  for (const [label, payload, status, code] of cases) {
    const res = parseRawResponse(await rawRequest(gw.url, payload));
    assert.equal(res.status, status, label);
    assert.equal(res.body.success, false, label);
    assert.equal(res.body.message.code, code, label);
    assert.doesNotMatch(res.body.message.description, /failed to answer/, `${label}: the sentence is the caller's to read`);
    assert.match(res.headers, /\r\nx-request-id: \S+/i, label);
    if (status === 405) assert.match(res.headers, /\r\nallow: GET, /i, `${label}: a 405 says what is allowed`);
  }

  const expect = parseRawResponse(await rawRequest(gw.url, 'POST /api/refresh HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nX-Request-Id: caller-417\r\nContent-Length: 2\r\n\r\n{}'));
  assert.equal(expect.status, 417);
  assert.match(expect.headers, /\r\nx-request-id: caller-417\r\n/i, 'a refused Expect keeps the caller\'s request id, like every other answer');
  assert.match(expect.headers, /\r\nconnection: close\r\n/i);
});

test('plain chunked bodies, HTTP/1.0 without Host, and IPv6 or port Hosts are served', async (t) => {
  const gw = await startGateway(t);
  const cases = [
    `POST /api/signin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${chunked}`,
    'GET /healthz HTTP/1.0\r\n\r\n',
    'GET /healthz HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n',
    'GET /healthz HTTP/1.1\r\nHost: gateway.example.com:443\r\nConnection: close\r\n\r\n',
  ];
  for (const payload of cases) {
    const res = parseRawResponse(await rawRequest(gw.url, payload));
    assert.equal(res.status, 200, payload);
    assert.equal(res.body.success, true, payload);
  }
});

test('an access token is accepted in its one canonical spelling only', async (t) => {
  const gw = await startGateway(t);
  const res = await fetch(`${gw.url}/api/signin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const { accessToken } = ((await res.json()) as { message: { accessToken: string } }).message;
  const last = accessToken.at(-1)!;
  // An Ed25519 signature is 64 bytes: its last base64url character carries 2 bits and 4 spare ones.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const sameBits = [...alphabet].filter((c) => c !== last && (alphabet.indexOf(c) >> 4) === (alphabet.indexOf(last) >> 4));
  assert.equal(sameBits.length, 15);
  const call = (token: string) => fetch(`${gw.url}/api/roles`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal((await call(accessToken)).status, 200);
  for (const variant of [...sameBits.map((c) => accessToken.slice(0, -1) + c), `${accessToken}==`]) {
    const answer = await call(variant);
    assert.equal(answer.status, 401, variant.slice(-4));
    assert.equal(((await answer.json()) as { message: { code: string } }).message.code, 'invalid_token');
  }
});

test('a refused transfer coding ends the connection, even with its body read', async (t) => {
  const gw = await startGateway(t);
  // Keep-alive asked for: the gateway must close anyway, since it cannot tell where the next
  // request would start. rawRequest resolves when the server closes (or after its bound).
  for (const head of ['HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked', 'HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked']) {
    const started = Date.now();
    const raw = await rawRequest(gw.url, `POST /api/signin ${head}\r\nContent-Type: application/json\r\n\r\n${chunked}`, 5000);
    const res = parseRawResponse(raw);
    assert.ok(res.status === 501 || res.status === 400, head);
    assert.match(res.headers, /\r\nconnection: close/i, head);
    assert.ok(Date.now() - started < 4000, `${head}: closed by the gateway, not by the client's bound`);
  }
});
