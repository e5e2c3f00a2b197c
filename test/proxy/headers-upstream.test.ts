/**
 * What a backend learns from the request headers: identity headers set from the verified
 * token and never from the client, Authorization only where the route forwards it, no
 * hop-by-hop header and nothing named in Connection, forwarding headers replaced unless the
 * peer is a trusted proxy, Host as the route says, and the signed identity assertion.
 * Requests are written byte by byte where the case and repetition of names matter.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { startBackend, type Received } from '../helpers/backend.js';
import { call, DEMO, signIn } from '../helpers/gateway.js';
import { startProxy } from '../helpers/proxy.js';
import { rawExchange } from '../helpers/raw-http.js';

const IDENTITY = ['x-account-id', 'x-key-id', 'x-token-id', 'x-request-id', 'x-gateway-assertion'];

/** Raw request lines: a GET of `path` with these header lines. */
function rawGet(path: string, lines: string[], host = 'shop.example:8443'): string {
  return `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`;
}

function identityOf(received: Received): Record<string, string[]> {
  return Object.fromEntries(IDENTITY.filter((name) => received.headers[name] !== undefined).map((name) => [name, received.headers[name]!]));
}

test('identity headers come from the token, one of each, and client copies are removed in any case and number', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/orders', targets: [backend.url] },
    { prefix: '/req-only', targets: [backend.url], identity: ['request'] },
    { prefix: '/nothing', targets: [backend.url], identity: [] },
    { prefix: '/pub', targets: [backend.url], auth: 'public' },
  ]);
  const { accessToken } = await signIn(gw);
  const jti = decodeJwt(accessToken).jti!;

  const plain = await call(`${gw.url}/orders/1`, { token: accessToken });
  assert.equal(plain.status, 200);
  assert.deepEqual(identityOf(backend.received.at(-1)!), {
    'x-account-id': [DEMO.alice.accountId], 'x-key-id': [DEMO.alice.keyId], 'x-token-id': [jti], 'x-request-id': [plain.headers.get('x-request-id')!],
  });

  const forged = [
    'x-account-id: evil', 'X-ACCOUNT-ID: evil2', 'X-Account-Id: acct_bob', 'X-Key-Id: key_bob_1', 'x-key-ID: evil',
    'x-token-id: evil', 'X-TOKEN-ID: evil2', 'X-Gateway-Assertion: eyJhbGciOiJub25lIn0.e30.', 'x-gateway-assertion: evil',
    'x-request-id: a', 'X-REQUEST-ID: b',
  ];
  const expected: Record<string, (requestId: string) => Record<string, string[]>> = {
    '/orders/1': (id) => ({ 'x-account-id': [DEMO.alice.accountId], 'x-key-id': [DEMO.alice.keyId], 'x-token-id': [jti], 'x-request-id': [id] }),
    '/req-only/1': (id) => ({ 'x-request-id': [id] }),
    '/nothing/1': () => ({}),
    '/pub/1': (id) => ({ 'x-request-id': [id] }),
  };
  for (const [path, want] of Object.entries(expected)) {
    const res = await rawExchange(gw.url, rawGet(path, [`Authorization: Bearer ${accessToken}`, ...forged, 'Connection: close']));
    assert.equal(res.status, 200, path);
    const requestId = res.get('x-request-id')!;
    assert.ok(requestId !== 'a' && requestId !== 'b' && !requestId.includes(','), `${path}: the repeated client ids became ${requestId}`);
    assert.deepEqual(identityOf(backend.received.at(-1)!), want(requestId), path);
  }
});

test('a plain client request id is the request id the backend gets, once', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const res = await rawExchange(gw.url, rawGet('/pub', ['X-Request-Id: trace-42', 'Connection: close']));
  assert.equal(res.get('x-request-id'), 'trace-42');
  assert.deepEqual(backend.received.at(-1)!.headers['x-request-id'], ['trace-42']);
  const injected = await rawExchange(gw.url, rawGet('/pub', ['X-Request-Id: a b\tc', 'Connection: close']));
  const id = injected.get('x-request-id')!;
  assert.notEqual(id, 'a b\tc');
  assert.deepEqual(backend.received.at(-1)!.headers['x-request-id'], [id]);
});

test('renamed identity headers: the configured names are set and stripped', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }], {
    proxy: { identityHeaders: { account: 'X-Tenant', key: 'X-Client', token: 'X-Jti', request: 'X-Trace', assertion: 'X-Signed' } },
  });
  const { accessToken } = await signIn(gw);
  const res = await rawExchange(gw.url, rawGet('/orders', [`Authorization: Bearer ${accessToken}`, 'x-tenant: evil', 'X-TENANT: evil2', 'X-Client: evil', 'x-jti: evil', 'X-Trace: evil', 'X-Signed: evil', 'Connection: close']));
  assert.equal(res.status, 200);
  const got = backend.received.at(-1)!.headers;
  assert.deepEqual(got['x-tenant'], [DEMO.alice.accountId]);
  assert.deepEqual(got['x-client'], [DEMO.alice.keyId]);
  assert.deepEqual(got['x-jti'], [decodeJwt(accessToken).jti]);
  assert.deepEqual(got['x-trace'], [res.get('x-request-id')]);
  assert.equal(got['x-signed'], undefined);
});

test('Authorization is removed unless the route forwards it', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/orders', targets: [backend.url] },
    { prefix: '/passthrough', targets: [backend.url], forwardAuthorization: true },
    { prefix: '/pub', targets: [backend.url], auth: 'public' },
    { prefix: '/pub-passthrough', targets: [backend.url], auth: 'public', forwardAuthorization: true },
  ]);
  const { accessToken } = await signIn(gw);
  const cases: [string, string[] | undefined][] = [
    ['/orders', undefined], ['/passthrough', [`Bearer ${accessToken}`]], ['/pub', undefined], ['/pub-passthrough', [`Bearer ${accessToken}`]],
  ];
  for (const [path, want] of cases) {
    const res = await rawExchange(gw.url, rawGet(path, [`authorization: Bearer ${accessToken}`, 'Connection: close']));
    assert.equal(res.status, 200, path);
    assert.deepEqual(backend.received.at(-1)!.headers.authorization, want, path);
  }
});

test('hop-by-hop headers and every header named in Connection stay at the gateway', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const res = await rawExchange(gw.url, rawGet('/pub/1', [
    'Connection: keep-alive, X-Internal', 'connection: x-other-internal', 'Keep-Alive: timeout=99, max=7', 'TE: trailers', 'Trailer: X-Checksum',
    'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAAQAAP__', 'Proxy-Authorization: Basic dXNlcjpwYXNz', 'Proxy-Connection: keep-alive',
    'X-Internal: 1', 'X-Other-Internal: 2', 'X-Normal: kept', 'X-Normal: twice',
  ]));
  assert.equal(res.status, 200, res.body.toString());
  const got = backend.received.at(-1)!;
  for (const name of ['keep-alive', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-connection', 'x-internal', 'x-other-internal']) {
    assert.equal(got.headers[name], undefined, `${name} reached the backend: ${got.headers[name]}`);
  }
  // The gateway's own connection to the backend is kept alive, whatever the client said.
  assert.deepEqual(got.headers.connection ?? ['keep-alive'], ['keep-alive']);
  assert.deepEqual(got.headers['x-normal'], ['kept', 'twice']);
  // HTTP2-Settings was named only by the Upgrade offer, not in Connection: an ordinary header.

  const closing = await rawExchange(gw.url, rawGet('/pub/2', ['Connection: close']));
  assert.equal(closing.status, 200);
  assert.deepEqual(backend.received.at(-1)!.headers.connection ?? ['keep-alive'], ['keep-alive'], 'the client\'s close reached the backend');
});

test('a WebSocket handshake on a plain route is served as an ordinary request, without Upgrade', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const res = await rawExchange(gw.url, rawGet('/pub/socket', ['Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==']));
  assert.equal(res.status, 200);
  const got = backend.received.at(-1)!;
  assert.equal(got.headers.upgrade, undefined);
  assert.deepEqual(got.headers.connection ?? ['keep-alive'], ['keep-alive']);
});

test('Expect: 100-continue is answered by the gateway and not forwarded; the body arrives whole', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const body = 'x'.repeat(5000);
  const res = await rawExchange(gw.url, `POST /pub/upload HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  assert.equal(res.status, 200);
  const got = backend.received.at(-1)!;
  assert.equal(got.headers.expect, undefined);
  assert.equal(got.bodyBytes, body.length);
  assert.deepEqual(got.headers['content-length'], [String(body.length)]);
});

test('the body and its framing pass unchanged: a length stays a length, chunked stays chunked', async (t) => {
  const digests: string[] = [];
  const backend = await startBackend(t, (req, res) => {
    res.end();
  }, { readBody: true });
  backend.server.prependListener('request', (req) => {
    const hash = createHash('sha256');
    req.on('data', (c: Buffer) => hash.update(c));
    req.on('end', () => digests.push(hash.digest('hex')));
  });
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const body = Buffer.from(Array.from({ length: 10_000 }, (_, i) => i % 251));
  const digest = createHash('sha256').update(body).digest('hex');

  const sized = await rawExchange(gw.url, Buffer.concat([Buffer.from(`PUT /pub/a HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`), body]));
  assert.equal(sized.status, 200);
  let got = backend.received.at(-1)!;
  assert.deepEqual(got.headers['content-length'], [String(body.length)]);
  assert.equal(got.headers['transfer-encoding'], undefined);
  assert.equal(digests.at(-1), digest);

  const chunks = [body.subarray(0, 3000), body.subarray(3000, 3001), body.subarray(3001)];
  const chunked = Buffer.concat([Buffer.from('POST /pub/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'),
    ...chunks.flatMap((c) => [Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')]), Buffer.from('0\r\n\r\n')]);
  const res = await rawExchange(gw.url, chunked);
  assert.equal(res.status, 200);
  got = backend.received.at(-1)!;
  assert.deepEqual(got.headers['transfer-encoding'], ['chunked']);
  assert.equal(got.headers['content-length'], undefined);
  assert.equal(digests.at(-1), digest);

  const empty = await rawExchange(gw.url, 'POST /pub/c HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  assert.equal(empty.status, 200);
  assert.deepEqual(backend.received.at(-1)!.headers['content-length'], ['0']);
});

test('forwarding headers: set by the gateway; a client\'s own are replaced', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }]);
  const res = await call(`${gw.url}/pub/1`);
  assert.equal(res.status, 200);
  let got = backend.received.at(-1)!.headers;
  assert.deepEqual(got['x-forwarded-for'], ['127.0.0.1']);
  assert.deepEqual(got['x-forwarded-proto'], ['http']);
  assert.deepEqual(got['x-forwarded-host'], [new URL(gw.url).host]);
  assert.equal(got.forwarded, undefined, 'Forwarded is not sent by default');

  const spoofed = await rawExchange(gw.url, rawGet('/pub/2', [
    'X-Forwarded-For: 6.6.6.6', 'x-forwarded-for: 7.7.7.7', 'X-Forwarded-Proto: https', 'X-Forwarded-Host: evil.example',
    'Forwarded: for=6.6.6.6;proto=https;host=evil.example', 'X-Real-IP: 6.6.6.6', 'X-Forwarded-Port: 443', 'Connection: close',
  ]));
  assert.equal(spoofed.status, 200);
  got = backend.received.at(-1)!.headers;
  assert.deepEqual(got['x-forwarded-for'], ['127.0.0.1']);
  assert.deepEqual(got['x-forwarded-proto'], ['http']);
  assert.deepEqual(got['x-forwarded-host'], ['shop.example:8443']);
  assert.equal(got.forwarded, undefined);
  assert.equal(got['x-real-ip'], undefined);
  assert.equal(got['x-forwarded-port'], undefined);
});

test('forwarding headers from a trusted proxy are kept and extended', async (t) => {
  const backend = await startBackend(t);
  for (const trusted of ['127.0.0.1', '127.0.0.0/8']) {
    const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }], {
      proxy: { trustedProxies: [trusted], forwardedHeaders: 'both' },
    });
    const res = await rawExchange(gw.url, rawGet('/pub', [
      'X-Forwarded-For: 203.0.113.7', 'X-Forwarded-For: 10.0.0.2', 'X-Forwarded-Proto: https', 'X-Forwarded-Host: shop.example',
      'Forwarded: for=203.0.113.7;proto=https', 'Connection: close',
    ], 'internal.lb:8080'));
    assert.equal(res.status, 200, trusted);
    const got = backend.received.at(-1)!.headers;
    assert.deepEqual(got['x-forwarded-for'], ['203.0.113.7, 10.0.0.2, 127.0.0.1'], trusted);
    assert.deepEqual(got['x-forwarded-proto'], ['https'], trusted);
    assert.deepEqual(got['x-forwarded-host'], ['shop.example'], trusted);
    assert.deepEqual(got.forwarded, ['for=203.0.113.7;proto=https, for=127.0.0.1;host="internal.lb:8080";proto=http'], trusted);

    const bare = await rawExchange(gw.url, rawGet('/pub', ['Connection: close'], 'internal.lb'));
    assert.equal(bare.status, 200);
    const first = backend.received.at(-1)!.headers;
    assert.deepEqual(first['x-forwarded-for'], ['127.0.0.1']);
    assert.deepEqual(first.forwarded, ['for=127.0.0.1;host=internal.lb;proto=http']);
  }

  // Another trusted address does not make 127.0.0.1 trusted.
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }], { proxy: { trustedProxies: ['10.0.0.0/8', '::1'] } });
  await rawExchange(gw.url, rawGet('/pub', ['X-Forwarded-For: 203.0.113.7', 'Connection: close']));
  assert.deepEqual(backend.received.at(-1)!.headers['x-forwarded-for'], ['127.0.0.1']);
});

test('forwardedHeaders "forwarded" sends only RFC 7239 Forwarded', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/pub', targets: [backend.url], auth: 'public' }], { proxy: { forwardedHeaders: 'forwarded' } });
  const res = await call(`${gw.url}/pub`);
  assert.equal(res.status, 200);
  let got = backend.received.at(-1)!.headers;
  assert.deepEqual(got.forwarded, [`for=127.0.0.1;host="${new URL(gw.url).host}";proto=http`]);
  for (const name of ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host']) assert.equal(got[name], undefined, name);

  await rawExchange(gw.url, rawGet('/pub', ['Forwarded: for=6.6.6.6', 'X-Forwarded-For: 6.6.6.6', 'Connection: close'], 'shop.example'));
  got = backend.received.at(-1)!.headers;
  assert.deepEqual(got.forwarded, ['for=127.0.0.1;host=shop.example;proto=http']);
  assert.equal(got['x-forwarded-for'], undefined);
});

test('Host is the target\'s by default and the client\'s with host: "preserve"', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/target', targets: [backend.url], auth: 'public' },
    { prefix: '/preserve', targets: [backend.url], auth: 'public', host: 'preserve' },
    { prefix: '/based', targets: [`${backend.url}/base`], auth: 'public' },
  ]);
  const cases: [string, string][] = [['/target', `127.0.0.1:${backend.port}`], ['/preserve', 'shop.example:8443'], ['/based', `127.0.0.1:${backend.port}`]];
  for (const [path, host] of cases) {
    const res = await rawExchange(gw.url, rawGet(path, ['Connection: close']));
    assert.equal(res.status, 200, path);
    assert.deepEqual(backend.received.at(-1)!.headers.host, [host], path);
  }
});

test('the signed identity assertion verifies against the gateway\'s JWKS', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/orders', targets: [backend.url], assertion: true, name: 'orders-api' },
    { prefix: '/unnamed', targets: [backend.url], assertion: true },
    { prefix: '/plain', targets: [backend.url] },
  ]);
  const { accessToken } = await signIn(gw);
  const jwks = createRemoteJWKSet(new URL(`${gw.url}/.well-known/jwks.json`));

  for (const [path, audience] of [['/orders/1', 'orders-api'], ['/unnamed', '/unnamed']] as const) {
    const res = await rawExchange(gw.url, rawGet(path, [`Authorization: Bearer ${accessToken}`, 'X-Gateway-Assertion: forged', 'Connection: close']));
    assert.equal(res.status, 200, path);
    const values = backend.received.at(-1)!.headers['x-gateway-assertion'];
    assert.equal(values?.length, 1, `${path}: ${JSON.stringify(values)}`);
    const assertion = values![0]!;
    const { payload, protectedHeader } = await jwtVerify(assertion, jwks, {
      typ: 'gateway-assertion+jwt', audience, issuer: 'auth-gateway', currentDate: new Date(gw.clock.now()),
    });
    assert.equal(protectedHeader.typ, 'gateway-assertion+jwt');
    assert.equal(protectedHeader.kid, decodeProtectedHeader(accessToken).kid);
    assert.equal(payload.sub, DEMO.alice.accountId);
    assert.equal(payload.client_id, DEMO.alice.keyId);
    assert.equal(payload.token_jti, decodeJwt(accessToken).jti);
    assert.equal(payload.request_id, res.get('x-request-id'));
    assert.equal(payload.exp! - payload.iat!, 60);
    await assert.rejects(jwtVerify(assertion, jwks, { audience: 'another-route', currentDate: new Date(gw.clock.now()) }), 'the assertion is bound to its route');

    // An assertion is no access token: a backend cannot replay it at the gateway.
    const replay = await call(`${gw.url}/plain`, { token: assertion });
    assert.equal(replay.status, 401);
    assert.equal(replay.body.message.code, 'invalid_token');
  }
  const plain = await rawExchange(gw.url, rawGet('/plain', [`Authorization: Bearer ${accessToken}`, 'X-Gateway-Assertion: forged', 'Connection: close']));
  assert.equal(plain.status, 200);
  assert.equal(backend.received.at(-1)!.headers['x-gateway-assertion'], undefined, 'a client\'s assertion went to a route without one');
});
