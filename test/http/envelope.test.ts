/**
 * Answers the gateway gives itself, whatever the route: 404 and 405 envelopes, the request id,
 * requests Node's HTTP parser refuses, and that no error answer leaks a stack trace. The rule
 * under test: never a 500, always the envelope.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { call, DEMO, parseRawResponse, rawRequest, signIn, startGateway, type JsonResponse } from '../helpers/gateway.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';

function assertEnvelopeError(res: JsonResponse, status: number, code: string, label: string): void {
  assert.equal(res.status, status, `${label}: ${JSON.stringify(res.body)}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, label);
  assert.equal(res.headers.get('cache-control'), 'no-store', label);
  assert.equal(res.body?.success, false, label);
  assert.deepEqual(Object.keys(res.body.message).sort(), ['code', 'description'], label);
  assert.equal(res.body.message.code, code, label);
  assert.equal(typeof res.body.message.description, 'string', label);
}

function allowedMethods(res: JsonResponse): string[] {
  return (res.headers.get('allow') ?? '').split(',').map((m) => m.trim()).filter((m) => m !== '');
}

/** A GET sent byte for byte, for paths fetch would normalise (dot segments, %2e). */
async function rawGet(url: string, target: string, token: string | undefined) {
  const authorization = token === undefined ? '' : `Authorization: Bearer ${token}\r\n`;
  const answer = await rawRequest(url, `GET ${target} HTTP/1.1\r\nHost: gateway.test\r\n${authorization}Connection: close\r\n\r\n`);
  return parseRawResponse(answer);
}

/**
 * Like rawRequest, but also tells whether the server ended the connection itself (a FIN before
 * our own bound ran out), which rawRequest cannot tell apart from its timeout.
 */
function sendUntilClosed(url: string, payload: string): Promise<{ raw: string; closedByServer: boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let closedByServer = false;
    // A bound for a server that never answers, not a timing assertion.
    const bound = setTimeout(() => socket.destroy(), 5000);
    socket.on('data', (c) => chunks.push(c));
    socket.on('end', () => { closedByServer = true; });
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(bound);
      resolve({ raw: Buffer.concat(chunks).toString('latin1'), closedByServer });
    });
    socket.write(payload);
  });
}

/** "at fn (/path/file.ts:12:3)" and the like: a stack frame or a source path. */
function assertNoStackTrace(text: string, label: string): void {
  assert.doesNotMatch(text, /\bat [^"]*\.[cm]?[jt]sx?:\d+/, label);
  assert.doesNotMatch(text, /node_modules|node:internal|\/work\/|file:\/\//, label);
  assert.doesNotMatch(text, /"stack"/, label);
}

test('gateway envelope answers', async (t) => {
  const gw = await startGateway(t);
  const { accessToken } = await signIn(gw, DEMO.alice);

  await t.test('unknown paths are the 404 not_found envelope', async () => {
    const paths = ['/', '/nope', '/api', '/api/', '/api/unknown', '/API/SIGNIN', '/API/ROLES', '/api/ROLES', '/Healthz',
      '/api/roles;x', '/api/roles.json', '/api/sign/x', '/api/roles/..', '/api/%72oles%3B'];
    for (const path of paths) {
      assertEnvelopeError(await call(`${gw.url}${path}`, { token: accessToken }), 404, 'not_found', `GET ${path}`);
    }
    // Case-sensitive routes: the wrong case is not the route under another method either.
    assertEnvelopeError(await call(`${gw.url}/API/SIGNIN`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }), 404, 'not_found', 'POST /API/SIGNIN');
    assertEnvelopeError(await call(`${gw.url}/nope`, { method: 'DELETE' }), 404, 'not_found', 'DELETE /nope');
  });

  await t.test('dot segments, escaped unreserved characters and doubled slashes are resolved before routing', async () => {
    const roles = await call(`${gw.url}/api/roles`, { token: accessToken });
    for (const target of ['/api/sign/../roles', '/api/%2e%2e/api/roles', '/api/%2E/roles', '/api/./roles', '/api/roles/.', '//api//roles', '/api/%72%6Fles', '/x/../api/roles']) {
      const res = await rawGet(gw.url, target, accessToken);
      assert.equal(res.status, 200, `${target}: ${JSON.stringify(res.body)}`);
      assert.deepEqual(res.body, roles.body, target);
    }
    // Resolved onto a protected route, the route's guard applies.
    const anonymous = await rawGet(gw.url, '/x/../api/roles', undefined);
    assert.equal(anonymous.status, 401);
  });

  await t.test('paths that backends read differently are refused 400 before any route', async () => {
    for (const target of ['/%2e%2e/api/roles', '/api/roles%2f..', '/api/roles%2F', '/api%5croles', '/api\\roles', '/api/%00', '/api/%E0%A4%A', '/%',
      '/api/..;/roles', '/api/.;x/roles', 'http://127.0.0.1/api/roles']) {
      const res = await rawGet(gw.url, target, accessToken);
      assert.equal(res.status, 400, `${target}: ${JSON.stringify(res.body)}`);
      assert.match(res.headers, /\r\ncontent-type: application\/json/i, target);
      assert.equal(res.body.message.code, 'invalid_request', target);
    }
  });

  await t.test('a trailing slash is answered as the route itself', async () => {
    const roles = await call(`${gw.url}/api/roles`, { token: accessToken });
    const rolesSlash = await call(`${gw.url}/api/roles/`, { token: accessToken });
    assert.equal(rolesSlash.status, 200);
    assert.deepEqual(rolesSlash.body, roles.body);
    const sign = await call(`${gw.url}/api/sign/?address=${ADDRESS}`, { token: accessToken });
    assert.equal(sign.status, 200);
    assert.equal(sign.body.message.did, ADDRESS);
    assert.deepEqual((await call(`${gw.url}/healthz/`)).body, { success: true, message: { status: 'ok' } });
    const signinSlash = await call(`${gw.url}/api/signin/`);
    assertEnvelopeError(signinSlash, 405, 'method_not_allowed', 'GET /api/signin/');
    assert.deepEqual(allowedMethods(signinSlash), ['POST']);
  });

  await t.test('a known path with another method is 405 with Allow', async () => {
    const cases: [string, string, string[]][] = [
      ['DELETE', '/healthz', ['GET', 'HEAD']],
      ['POST', '/readyz', ['GET', 'HEAD']],
      ['PUT', '/api/signin', ['POST']],
      ['GET', '/api/refresh', ['POST']],
      ['POST', '/api/roles', ['GET', 'HEAD']],
      ['PATCH', '/api/sign', ['GET', 'HEAD', 'POST']],
      ['POST', '/.well-known/jwks.json', ['GET', 'HEAD']],
      ['OPTIONS', '/api/roles', ['GET', 'HEAD']],
    ];
    for (const [method, path, allowed] of cases) {
      const res = await call(`${gw.url}${path}`, { method });
      assertEnvelopeError(res, 405, 'method_not_allowed', `${method} ${path}`);
      assert.deepEqual(allowedMethods(res).sort(), [...allowed].sort(), `${method} ${path}`);
    }
  });

  await t.test('X-Request-Id: a UUID when absent, each request its own', async () => {
    const [a, b] = await Promise.all([call(`${gw.url}/healthz`), call(`${gw.url}/healthz`)]);
    assert.match(a!.headers.get('x-request-id')!, UUID);
    assert.match(b!.headers.get('x-request-id')!, UUID);
    assert.notEqual(a!.headers.get('x-request-id'), b!.headers.get('x-request-id'));
  });

  await t.test('X-Request-Id: a plain incoming id is echoed, junk is replaced', async () => {
    for (const id of ['abc-123', 'req.42:a_b', 'A'.repeat(64)]) {
      const res = await call(`${gw.url}/healthz`, { headers: { 'x-request-id': id } });
      assert.equal(res.headers.get('x-request-id'), id);
    }
    for (const id of ['has space', 'x'.repeat(200), 'a\tb', 'a,b', '<script>', '{"json":1}', 'ünïcode', '']) {
      const res = await call(`${gw.url}/healthz`, { headers: { 'x-request-id': id } });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('x-request-id')!, UUID, JSON.stringify(id));
    }
  });

  await t.test('X-Request-Id is present on error answers too', async () => {
    const errors: [string, () => Promise<JsonResponse>][] = [
      ['404', () => call(`${gw.url}/nope`, { headers: { 'x-request-id': 'abc-123' } })],
      ['405', () => call(`${gw.url}/api/roles`, { method: 'POST', headers: { 'x-request-id': 'abc-123' } })],
      ['401', () => call(`${gw.url}/api/roles`, { headers: { 'x-request-id': 'abc-123' } })],
      ['400', () => call(`${gw.url}/api/roles?page=0`, { token: accessToken, headers: { 'x-request-id': 'abc-123' } })],
      ['413', () => call(`${gw.url}/api/sign?address=${ADDRESS}`, { method: 'POST', body: 'x'.repeat(8192), token: accessToken, headers: { 'x-request-id': 'abc-123' } })],
    ];
    for (const [label, send] of errors) {
      const res = await send();
      assert.equal(String(res.status), label);
      assert.equal(res.headers.get('x-request-id'), 'abc-123', label);
    }
    const generated = await call(`${gw.url}/nope`, { headers: { 'x-request-id': 'no spaces allowed' } });
    assert.equal(generated.status, 404);
    assert.match(generated.headers.get('x-request-id')!, UUID);
  });

  await t.test('malformed HTTP gets a 4xx envelope and the server closes the connection', async () => {
    const cases: [string, string, number, string][] = [
      ['garbage request line', 'GARBAGE\r\n\r\n', 400, 'invalid_request'],
      ['a control character in the target', 'GET /api/roles\x01 HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'invalid_request'],
      ['Content-Length and Transfer-Encoding: chunked',
        'POST /api/sign HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'invalid_request'],
      ['two different Content-Length headers', 'POST /api/sign HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!', 400, 'invalid_request'],
      ['a space in a header name', 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n', 400, 'invalid_request'],
      ['an invalid chunk size', 'POST /nope HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n', 400, 'invalid_request'],
      ['headers over 16 KiB', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`, 431, 'headers_too_large'],
      ['many headers over 16 KiB', `GET /healthz HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'b'.repeat(40)}\r\n`).join('')}\r\n`, 431, 'headers_too_large'],
    ];
    for (const [label, payload, status, code] of cases) {
      const { raw, closedByServer } = await sendUntilClosed(gw.url, payload);
      const res = parseRawResponse(raw);
      assert.equal(res.status, status, `${label}: ${raw.slice(0, 200)}`);
      assert.match(res.headers, /\r\ncontent-type: application\/json/i, label);
      assert.match(res.headers, /\r\nconnection: close/i, label);
      assert.equal(res.body.success, false, label);
      assert.equal(res.body.message.code, code, label);
      assert.ok(closedByServer, `${label}: the server closed the connection`);
      assertNoStackTrace(raw, label);
    }
  });

  await t.test('a bad percent-encoding in the query is a 4xx or a plain answer, never a 500', async () => {
    for (const query of ['page=%E0%A4%A', 'limit=%', 'page=%ZZ', 'limit=%F0%9F']) {
      assertEnvelopeError(await call(`${gw.url}/api/roles?${query}`, { token: accessToken }), 400, 'invalid_request', query);
    }
    assertEnvelopeError(await call(`${gw.url}/api/sign?address=%E0%A4%A`, { token: accessToken }), 400, 'invalid_request', 'address');
    // In a search term the bad sequence decodes to U+FFFD, which no role name contains.
    const search = await call(`${gw.url}/api/roles?name=%E0%A4%A`, { token: accessToken });
    assert.equal(search.status, 200);
    assert.equal(search.body.success, true);
    assert.equal(search.body.message.total, 0);
    const strayKey = await call(`${gw.url}/api/roles?%%%=1&page=1`, { token: accessToken });
    assert.equal(strayKey.status, 200);
    assert.equal(strayKey.body.success, true);
  });

  await t.test('HEAD /healthz answers 200 without a body', async () => {
    const res = await call(`${gw.url}/healthz`, { method: 'HEAD' });
    assert.equal(res.status, 200);
    assert.equal(res.body, undefined);
    assert.match(res.headers.get('content-type')!, /^application\/json/);
    assert.match(res.headers.get('x-request-id')!, UUID);
  });

  await t.test('GET /healthz and /readyz answer success envelopes', async () => {
    const health = await call(`${gw.url}/healthz`);
    assert.equal(health.status, 200);
    assert.match(health.headers.get('content-type')!, /^application\/json/);
    assert.deepEqual(health.body, { success: true, message: { status: 'ok' } });
    const ready = await call(`${gw.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.match(ready.headers.get('content-type')!, /^application\/json/);
    assert.equal(ready.body.success, true);
    assert.equal(ready.body.message.status, 'ready');
  });

  await t.test('no error answer carries a stack trace', async () => {
    const answers: [string, Promise<JsonResponse>][] = [
      ['404', call(`${gw.url}/nope`)],
      ['405', call(`${gw.url}/api/signin`)],
      ['401 missing token', call(`${gw.url}/api/roles`)],
      ['401 bad token', call(`${gw.url}/api/roles`, { token: 'not.a.jwt' })],
      ['400 malformed Authorization', call(`${gw.url}/api/roles`, { headers: { authorization: 'Bearer a b' } })],
      ['400 bad page', call(`${gw.url}/api/roles?page=abc`, { token: accessToken })],
      ['400 bad address', call(`${gw.url}/api/sign?address=0x12`, { token: accessToken })],
      ['400 bad JSON', call(`${gw.url}/api/signin`, { method: 'POST', body: '{"apiKey":', headers: { 'content-type': 'application/json' } })],
      ['413', call(`${gw.url}/api/sign?address=${ADDRESS}`, { method: 'POST', body: 'x'.repeat(8192), token: accessToken })],
    ];
    for (const [label, pending] of answers) {
      const res = await pending;
      assert.ok(res.status >= 400 && res.status < 500, `${label}: ${res.status}`);
      assert.equal(res.body.success, false, label);
      assert.deepEqual(Object.keys(res.body.message).sort(), ['code', 'description'], label);
      assertNoStackTrace(JSON.stringify(res.body), label);
    }
    const garbage = await rawRequest(gw.url, 'NOT HTTP AT ALL\r\n\r\n');
    assert.equal(parseRawResponse(garbage).status, 400);
    assertNoStackTrace(garbage, 'raw garbage');
  });
});
