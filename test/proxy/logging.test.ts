/**
 * The access log of proxied requests: one line per request with the status the client got
 * (the backend's, or the gateway's envelope), the route and the account; never the query
 * string, a token, or a header value. A backend failure adds one warn line naming the target.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { startBackend } from '../helpers/backend.js';
import { call, logLines, signIn, type TestGateway } from '../helpers/gateway.js';
import { closedPort, eventually, startProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-http.js';
import { startWsBackend } from '../helpers/ws-backend.js';

function requestLine(gw: TestGateway, requestId: string): Record<string, unknown> {
  const found = logLines(gw).filter((line) => line.msg === 'request' && line.requestId === requestId);
  assert.equal(found.length, 1, `access log lines for ${requestId}: ${JSON.stringify(found)}`);
  return found[0]!;
}

test('a proxied request is logged once, with the status the client got, its route and account, and nothing secret', async (t) => {
  const backend = await startBackend(t, (_req, res) => {
    res.writeHead(201, { 'set-cookie': 'session=backend-secret' }).end('created');
  });
  const down = `http://127.0.0.1:${await closedPort()}`;
  const gw = await startProxy(t, [
    { prefix: '/orders', targets: [backend.url], name: 'orders-api', forwardAuthorization: true },
    { prefix: '/down', targets: [down] },
  ]);
  const { accessToken } = await signIn(gw);

  const created = await call(`${gw.url}/orders/1?card=4111111111111111`, { token: accessToken, method: 'POST', body: 'x', headers: { 'x-api-secret': 'header-secret' } });
  assert.equal(created.status, 201);
  const line = requestLine(gw, created.headers.get('x-request-id')!);
  assert.equal(line.status, 201);
  assert.equal(line.path, '/orders/1');
  assert.equal(line.method, 'POST');
  assert.equal(line.route, 'orders-api');
  assert.equal(line.accountId, 'acct_alice');

  const failed = await call(`${gw.url}/down/1?card=4111111111111111`, { token: accessToken });
  assert.equal(failed.status, 502);
  const failedLine = requestLine(gw, failed.headers.get('x-request-id')!);
  assert.equal(failedLine.status, 502);
  assert.equal(failedLine.route, '/down');
  const warn = logLines(gw).filter((l) => l.msg === 'backend failed' && l.requestId === failed.headers.get('x-request-id'));
  assert.equal(warn.length, 1);
  assert.equal(warn[0]!.target, down);
  assert.equal(warn[0]!.code, 'ECONNREFUSED');

  const text = gw.logs.join('\n');
  for (const secret of [accessToken, '4111111111111111', 'header-secret', 'backend-secret']) {
    assert.ok(!text.includes(secret), `${secret.slice(0, 12)}… is in the log`);
  }
});

test('a client that leaves before the answer is not logged as 404 not found', async (t) => {
  const arrived: string[] = [];
  const backend = await startBackend(t, (req) => void arrived.push(req.url!));
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url], name: 'orders-api' }]);
  const { accessToken } = await signIn(gw);
  const connection = await RawConnection.open(gw.url);
  connection.write(`GET /orders/held HTTP/1.1\r\nHost: x\r\nX-Request-Id: client-left\r\nAuthorization: Bearer ${accessToken}\r\n\r\n`);
  await eventually(() => arrived.includes('/orders/held'), 'the request reaching the backend', 5000);
  connection.destroy();
  await eventually(() => logLines(gw).some((l) => l.msg === 'request' && l.requestId === 'client-left'), 'the access log line', 5000);
  const left = requestLine(gw, 'client-left');
  assert.equal(left.route, 'orders-api');
  assert.notEqual(left.status, 404, 'a request routed to a backend, whose client left, is logged as 404 not found');
});

test('the gateway\'s own lines log the path it matched, never the caller\'s unmatched text', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url], auth: 'public' }]);
  const logged = async (method: string, path: string, status: number) => {
    const res = await call(`${gw.url}${path}`, { method });
    assert.equal(res.status, status, `${method} ${path}`);
    return requestLine(gw, res.headers.get('x-request-id')!).path;
  };

  // Matched: the normalised path, as the router and the route saw it.
  assert.equal(await logged('GET', '//healthz', 200), '/healthz');
  assert.equal(await logged('GET', '/api/./roles', 401), '/api/roles');
  assert.equal(await logged('PUT', '/%68ealthz', 405), '/healthz');
  assert.equal(await logged('GET', '/orders/%2e/1/', 200), '/orders/1/');
  // Unmatched (404) or refused before any route (400): a fixed placeholder.
  assert.equal(await logged('GET', '/api/%2e%2e/secret-token-in-path', 404), '(unmatched)');
  assert.equal(await logged('GET', '/nothing/eyJhbGciOiJFZERTQSJ9.e30.c2VjcmV0', 404), '(unmatched)');
  assert.equal(await logged('GET', '/api/%2fsecret-token-encoded', 400), '(unmatched)');
  for (const secret of ['secret-token', 'eyJhbGciOiJFZERTQSJ9', 'c2VjcmV0']) {
    assert.ok(!gw.logs.join('\n').includes(secret), `${secret} is in the log`);
  }
});

test('a client that leaves while the gateway reads its body or waits on the directory is logged 499', async (t) => {
  // A directory upstream that holds every request until the test lets it go.
  const held: (() => void)[] = [];
  const directory = await startBackend(t, (_req, res) => {
    held.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success: true, message: { pages: '1', items: [], total: 0 } })));
  });
  t.after(() => { for (const release of held) release(); });
  const gw = await startProxy(t, [], {
    directory: { store: 'http', http: { signUrl: `${directory.url}/sign/{accountId}/{address}`, rolesUrl: `${directory.url}/roles/{accountId}`, token: 't0ken-for-tests', timeoutMs: 10_000 } },
  });
  const { accessToken } = await signIn(gw);

  const roles = await RawConnection.open(gw.url);
  roles.write(`GET /api/roles HTTP/1.1\r\nHost: x\r\nX-Request-Id: left-roles\r\nAuthorization: Bearer ${accessToken}\r\n\r\n`);
  await eventually(() => held.length === 1, 'the roles call reaching the directory');
  roles.socket.end();
  // Only once the directory answers does the handler finish: the line must still say 499.
  await new Promise((resolve) => setTimeout(resolve, 100));
  held.shift()!();
  await eventually(() => logLines(gw).some((l) => l.msg === 'request' && l.requestId === 'left-roles'), 'the roles line');
  assert.equal(requestLine(gw, 'left-roles').status, 499);

  const signin = await RawConnection.open(gw.url);
  signin.write('POST /api/signin HTTP/1.1\r\nHost: x\r\nX-Request-Id: left-signin\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"apiKey":');
  await new Promise((resolve) => setTimeout(resolve, 100));
  signin.destroy();
  await eventually(() => logLines(gw).some((l) => l.msg === 'request' && l.requestId === 'left-signin'), 'the sign-in line');
  assert.equal(requestLine(gw, 'left-signin').status, 499);
});

test('a client that leaves while its proxied request or WebSocket handshake is being admitted: nothing reaches a backend, and the lines say 499', async (t) => {
  // An issuer whose key set is held until the test lets it go: admission waits on it.
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  const held: (() => void)[] = [];
  const keys = await startBackend(t, (_req, res) => {
    held.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  });
  t.after(() => { for (const release of held) release(); });
  const backend = await startBackend(t);
  const wsBackend = await startWsBackend(t);
  const issuer = 'https://issuer.example';
  const gw = await startProxy(t, [
    { prefix: '/partners', targets: [backend.url], issuers: [issuer] },
    { prefix: '/live', targets: [wsBackend.url], issuers: [issuer], websocket: true },
  ], { trustedIssuers: [{ issuer, audience: 'partners', jwksUri: `${keys.url}/jwks` }] });
  const token = await new SignJWT({ scope: 'read' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuer(issuer).setAudience('partners').setSubject('partner-1').setIssuedAt().setExpirationTime('5m').setJti('t-1').sign(privateKey);

  // The gateway's side of each client connection, to know when it has seen them close.
  const closedAtGateway: Promise<void>[] = [];
  gw.running!.server.on('connection', (socket: Socket) => closedAtGateway.push(new Promise((resolve) => socket.once('close', () => resolve()))));
  const plain = await RawConnection.open(gw.url);
  plain.write(`GET /partners/orders HTTP/1.1\r\nHost: x\r\nX-Request-Id: left-admission\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  const upgrade = await RawConnection.open(gw.url);
  upgrade.write(`GET /live/feed HTTP/1.1\r\nHost: x\r\nX-Request-Id: left-handshake\r\nAuthorization: Bearer ${token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  await eventually(() => held.length >= 1, 'the key set asked for');
  // Reset, not closed: a handshake's socket is not read while it waits, so only a reset (or a
  // write) can tell the gateway its client is gone.
  plain.socket.resetAndDestroy();
  upgrade.socket.resetAndDestroy();
  await eventually(() => closedAtGateway.length === 2, 'both connections accepted');
  await Promise.all(closedAtGateway);
  while (held.length > 0) held.shift()!();
  for (const id of ['left-admission', 'left-handshake']) {
    await eventually(() => logLines(gw).some((l) => l.msg === 'request' && l.requestId === id), `the access line of ${id}`);
    assert.equal(requestLine(gw, id).status, 499, id);
  }
  // Then a request that does go through, on the same key set.
  assert.equal((await call(`${gw.url}/partners/after`, { token })).status, 200);
  assert.deepEqual(backend.received.map((r) => r.url), ['/partners/after'], 'the left request never reached the backend');
  assert.equal(wsBackend.handshakes.length, 0, 'the left handshake never reached the WebSocket backend');
});
