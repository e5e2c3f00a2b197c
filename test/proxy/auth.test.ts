/**
 * The bearer check in front of proxied routes: nothing reaches a backend of a required route
 * before its token is verified (missing, forged, expired, tampered, revoked by a reset), a
 * public route needs none, and requiredScope is checked against the key's scopes.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { base64url, decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { startBackend } from '../helpers/backend.js';
import { call, DEMO, postJson, sha256Hex, signIn } from '../helpers/gateway.js';
import { withFlippedS } from '../helpers/jws.js';
import { newKey, onlyRequest, startProxy, writeDataFile } from '../helpers/proxy.js';
import { rawExchange } from '../helpers/raw-http.js';

test('a required route answers 401 before any byte reaches its backend', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);
  const claims = decodeJwt(accessToken);
  const header = decodeProtectedHeader(accessToken);
  const [h, p, s] = accessToken.split('.') as [string, string, string];
  const encode = (value: object) => base64url.encode(JSON.stringify(value));

  const { privateKey: stranger } = generateKeyPairSync('ed25519');
  const wrongKey = await new SignJWT({ ...claims }).setProtectedHeader({ ...header, alg: 'EdDSA' }).sign(stranger);
  const algNone = `${encode({ alg: 'none', typ: 'at+jwt', kid: header.kid })}.${p}.`;
  const tampered = `${h}.${encode({ ...claims, sub: DEMO.bob.accountId })}.${s}`;
  const tamperedScope = `${h}.${encode({ ...claims, scope: 'admin' })}.${s}`;

  const cases: [string, Record<string, string>, number, string][] = [
    ['no Authorization', {}, 401, 'missing_token'],
    ['another scheme', { authorization: 'Basic YWxpY2U6c2VjcmV0' }, 401, 'missing_token'],
    ['alg none', { authorization: `Bearer ${algNone}` }, 401, 'invalid_token'],
    ['signed by a stranger\'s key under the gateway\'s kid', { authorization: `Bearer ${wrongKey}` }, 401, 'invalid_token'],
    ['payload changed to another account', { authorization: `Bearer ${tampered}` }, 401, 'invalid_token'],
    ['payload given a scope', { authorization: `Bearer ${tamperedScope}` }, 401, 'invalid_token'],
    ['signature of another token', { authorization: `Bearer ${h}.${p}.${randomBytes(64).toString('base64url')}` }, 401, 'invalid_token'],
    ['a refresh token as bearer', { authorization: `Bearer ${(await signIn(gw)).refreshToken}` }, 401, 'invalid_token'],
    ['a malformed header', { authorization: 'Bearer' }, 400, 'invalid_request'],
  ];
  for (const method of ['GET', 'POST', 'DELETE']) {
    for (const [label, headers, status, code] of cases) {
      const body = method === 'POST' ? JSON.stringify({ order: 1 }) : undefined;
      const res = await call(`${gw.url}/orders/1`, { method, headers: { ...headers, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body }) });
      assert.equal(res.status, status, `${method} ${label}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.success, false, label);
      assert.equal(res.body.message.code, code, `${method} ${label}`);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="gateway"/, label);
    }
  }
  assert.equal(backend.received.length, 0, `the backend was reached: ${JSON.stringify(backend.received)}`);

  // An expired token: the gateway's clock moves past the 15-minute lifetime.
  const ok = await call(`${gw.url}/orders/1`, { token: accessToken });
  assert.equal(ok.status, 200, 'the same token works before it expires');
  gw.clock.advance(15 * 60_000 + 10_000);
  const expired = await call(`${gw.url}/orders/1`, { token: accessToken });
  assert.equal(expired.status, 401);
  assert.equal(expired.body.message.code, 'invalid_token');
  assert.equal(backend.received.length, 1, 'only the request with a live token reached the backend');
});

test('ES256 and ES384: the high-S twin of a valid token is refused on own and proxied routes alike', async (t) => {
  // ECDSA verifies (r, s) and (r, n − s) alike: without the low-S rule every token would have
  // a second string that passes, past anything keyed on the token's text.
  const backend = await startBackend(t);
  for (const [alg, namedCurve] of [['ES256', 'prime256v1'], ['ES384', 'secp384r1']] as const) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }], { signing: { keys: [{ kid: `${alg}-1`, alg, pem }] } });
    const tokens = [(await signIn(gw)).accessToken];
    for (let i = 1; i < 16; i++) tokens.push(await gw.services.signer.issueAccessToken({ accountId: DEMO.alice.accountId, keyId: DEMO.alice.keyId }));
    const before = backend.received.length;
    for (const [i, token] of tokens.entries()) {
      const twin = withFlippedS(token, alg);
      for (const path of ['/api/roles', '/orders/1']) {
        const ok = await call(`${gw.url}${path}`, { token });
        assert.equal(ok.status, 200, `${alg} token ${i} on ${path}: ${JSON.stringify(ok.body)}`);
        const res = await call(`${gw.url}${path}`, { token: twin });
        assert.equal(res.status, 401, `${alg} token ${i}'s twin on ${path}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.message.code, 'invalid_token', `${alg} token ${i}'s twin on ${path}`);
        assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="gateway", error="invalid_token"/);
      }
    }
    assert.equal(backend.received.length - before, tokens.length, 'only the original tokens reached the backend');
  }
});

test('a refused upload is answered without its body reaching the backend', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }]);
  const body = 'x'.repeat(100_000);
  const res = await rawExchange(gw.url, `POST /orders/upload HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  assert.equal(res.status, 401);
  assert.equal(res.json().message.code, 'missing_token');
  assert.equal(backend.received.length, 0);
  assert.equal(backend.connections(), 0, 'no connection was even opened to the backend');
});

test('a public route needs no token and tells its backend no identity', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/catalogue', targets: [backend.url], auth: 'public' }]);
  const res = await call(`${gw.url}/catalogue/items?page=2`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.url, '/catalogue/items?page=2');
  const got = onlyRequest(backend);
  for (const name of ['x-account-id', 'x-key-id', 'x-token-id', 'x-gateway-assertion', 'authorization']) {
    assert.equal(got.headers[name], undefined, `${name} sent on a public route`);
  }
  assert.deepEqual(got.headers['x-request-id'], [res.headers.get('x-request-id')], 'the request id is sent on a public route too');

  // A token, even a forged one, changes nothing on a public route: it is neither checked nor passed on.
  const forged = await call(`${gw.url}/catalogue/items`, { headers: { authorization: 'Bearer abc.def.ghi' } });
  assert.equal(forged.status, 200);
  assert.equal(backend.received[1]!.headers.authorization, undefined);
  assert.equal(backend.received[1]!.headers['x-account-id'], undefined);
});

test('requiredScope: a key without the scope gets 403 insufficient_scope, a key with it gets through', async (t) => {
  const reader = newKey('reader', 'acct_shop', ['orders:read', 'catalogue:read']);
  const plain = newKey('plain', 'acct_shop');
  const writer = newKey('writer', 'acct_other', ['orders:write']);
  const file = writeDataFile(t, [reader, plain, writer]);
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/orders', targets: [backend.url], requiredScope: 'orders:read' },
    { prefix: '/anyone', targets: [backend.url] },
  ], { data: { file } });

  for (const key of [plain, writer]) {
    const { accessToken } = await signIn(gw, key);
    const res = await call(`${gw.url}/orders/1`, { token: accessToken });
    assert.equal(res.status, 403, `${key.id}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message.code, 'insufficient_scope');
    const challenge = res.headers.get('www-authenticate') ?? '';
    assert.match(challenge, /^Bearer realm="gateway"/);
    assert.match(challenge, /error="insufficient_scope"/);
    assert.match(challenge, /scope="orders:read"/);
    // The same token opens a route that requires no scope.
    assert.equal((await call(`${gw.url}/anyone`, { token: accessToken })).status, 200, key.id);
  }
  assert.deepEqual(backend.received.map((r) => r.url), ['/anyone', '/anyone'], 'a refused scope reached the backend');

  const { accessToken } = await signIn(gw, reader);
  const res = await call(`${gw.url}/orders/1`, { token: accessToken });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const got = backend.received.at(-1)!;
  assert.equal(got.url, '/orders/1');
  assert.deepEqual(got.headers['x-account-id'], ['acct_shop']);
  assert.deepEqual(got.headers['x-key-id'], ['reader']);
});

test('after a token reset the proxied route answers 401 to the old token', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);
  assert.equal((await call(`${gw.url}/orders/1`, { token: accessToken })).status, 200);
  gw.clock.advance(1000);

  const reset = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
  assert.equal(reset.status, 200, JSON.stringify(reset.body));
  const res = await call(`${gw.url}/orders/1`, { token: accessToken });
  assert.equal(res.status, 401);
  assert.equal(res.body.message.code, 'invalid_token');
  assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
  assert.equal(backend.received.length, 1, 'the revoked token reached the backend');

  gw.clock.advance(1);
  const fresh = await signIn(gw);
  assert.equal((await call(`${gw.url}/orders/1`, { token: fresh.accessToken })).status, 200, 'a token issued after the reset works');
  assert.equal(backend.received.length, 2);
});
