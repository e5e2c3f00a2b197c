/**
 * Which route a request takes, and the path its backend gets: prefixes on segment boundaries,
 * the longest prefix first, prefixes without case, stripPrefix with and without a base path on
 * the target, and the gateway's own paths, which never reach a backend, not even a catch-all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, signIn } from '../helpers/gateway.js';
import { startProxy } from '../helpers/proxy.js';
import { rawExchange } from '../helpers/raw-http.js';

test('a prefix takes its own path, a trailing slash and deeper paths, never a longer segment', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);

  for (const path of ['/orders', '/orders/', '/orders/1', '/orders/1/lines/2', '/orders?x=1', '/orders/?x=1']) {
    const res = await call(`${gw.url}${path}`, { token: accessToken });
    assert.equal(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.url, path, `${path}: the backend got the path as sent`);
  }
  const reached = backend.received.length;

  for (const path of ['/ordersx', '/orders-archive', '/orders.json', '/order', '/', '/other/orders']) {
    const res = await call(`${gw.url}${path}`, { token: accessToken });
    assert.equal(res.status, 404, path);
    assert.equal(res.body.success, false, path);
    assert.equal(res.body.message.code, 'not_found', path);
  }
  assert.equal(backend.received.length, reached, 'no unrouted path reached the backend');
});

test('the longest prefix wins, whatever the order of the routes', async (t) => {
  const orders = await startBackend(t);
  const special = await startBackend(t);
  const rest = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/', targets: [rest.url], auth: 'public' },
    { prefix: '/orders', targets: [orders.url] },
    { prefix: '/orders/special', targets: [special.url] },
  ]);
  const { accessToken } = await signIn(gw);
  const cases: [string, typeof orders][] = [
    ['/orders/special', special], ['/orders/special/1', special], ['/orders/specialx', orders], ['/orders/1', orders],
    ['/orders', orders], ['/ordersx', rest], ['/', rest], ['/catalogue/1', rest],
  ];
  for (const [path, backend] of cases) {
    const before = backend.received.length;
    const res = await call(`${gw.url}${path}`, { token: accessToken });
    assert.equal(res.status, 200, path);
    assert.equal(backend.received.length, before + 1, `${path} went to the wrong backend`);
    assert.equal(backend.received.at(-1)!.url, path);
  }
  assert.equal(orders.received.length + special.received.length + rest.received.length, cases.length);
});

test('prefixes compare without case: /ORDERS/1 is the /orders route and needs its token', async (t) => {
  const orders = await startBackend(t);
  const open = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/', targets: [open.url], auth: 'public' },
    { prefix: '/orders', targets: [orders.url] },
    { prefix: '/Admin/Tools', targets: [orders.url] },
  ]);
  for (const path of ['/ORDERS/1', '/Orders', '/oRdErS/1?x=1', '/admin/tools', '/ADMIN/TOOLS/run']) {
    const res = await call(`${gw.url}${path}`);
    assert.equal(res.status, 401, `${path}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.message.code, 'missing_token', path);
  }
  assert.equal(orders.received.length, 0, 'the protected backend was reached without a token');
  assert.equal(open.received.length, 0, 'a protected path fell through to the public catch-all');

  const { accessToken } = await signIn(gw);
  const res = await call(`${gw.url}/ORDERS/1`, { token: accessToken });
  assert.equal(res.status, 200);
  assert.equal(res.body.url, '/ORDERS/1', 'the backend gets the path in the case sent');
  assert.equal(orders.received.length, 1);
});

test('stripPrefix removes the prefix and keeps the query; a target base path is put in front, and is sent as written for the prefix itself', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/api/v1', targets: [backend.url], stripPrefix: true, auth: 'public' },
    { prefix: '/based', targets: [`${backend.url}/base`], stripPrefix: true, auth: 'public' },
    { prefix: '/kept', targets: [`${backend.url}/base`], auth: 'public' },
    { prefix: '/plain', targets: [backend.url], auth: 'public' },
  ]);
  const query = '?a=1&b=x%2Fy&c=%20&d=a+b&e=&f=%3F&g=/..';
  const cases: [string, string][] = [
    [`/api/v1/orders/7${query}`, `/orders/7${query}`],
    ['/api/v1/orders/', '/orders/'],
    ['/api/v1', '/'],
    ['/api/v1/', '/'],
    ['/api/v1?x=1', '/?x=1'],
    ['/API/V1/orders', '/orders'],
    [`/based/orders/7${query}`, `/base/orders/7${query}`],
    ['/based/orders/', '/base/orders/'],
    // The prefix itself is the base path as written, as nginx's proxy_pass with a URI replaces
    // the location (it was sent as /base/).
    ['/based', '/base'],
    ['/based?x=1', '/base?x=1'],
    ['/based/', '/base/'],
    [`/kept/orders/7${query}`, `/base/kept/orders/7${query}`],
    [`/plain/orders/7${query}`, `/plain/orders/7${query}`],
  ];
  for (const [sent, expected] of cases) {
    const res = await call(`${gw.url}${sent}`);
    assert.equal(res.status, 200, sent);
    assert.equal(res.body.url, expected, `${sent} reached the backend as ${res.body.url}`);
  }
});

test('the gateway\'s own paths never reach a catch-all route, under any method', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/', targets: [backend.url], auth: 'public' }]);

  const roles = await call(`${gw.url}/api/roles`);
  assert.equal(roles.status, 401, 'GET /api/roles is the gateway\'s, with its bearer check');
  assert.equal(roles.body.message.code, 'missing_token');
  const { accessToken } = await signIn(gw);
  const own = await call(`${gw.url}/api/roles`, { token: accessToken });
  assert.equal(own.status, 200);
  assert.ok(Array.isArray(own.body.message.items), 'the gateway\'s roles answer');

  const health = await call(`${gw.url}/healthz`);
  assert.equal(health.status, 200);
  assert.equal(health.body.success, true);
  const jwks = await call(`${gw.url}/.well-known/jwks.json`);
  assert.equal(jwks.status, 200);
  assert.ok(Array.isArray(jwks.body.keys));

  const wrongMethods: [string, string, string][] = [
    ['POST', '/api/roles', 'GET'], ['DELETE', '/api/roles', 'GET'], ['PUT', '/healthz', 'GET'],
    ['GET', '/api/signin', 'POST'], ['PATCH', '/api/reset', 'POST'], ['POST', '/.well-known/jwks.json', 'GET'],
  ];
  for (const [method, path, allow] of wrongMethods) {
    const res = await call(`${gw.url}${path}`, { method, token: accessToken });
    assert.equal(res.status, 405, `${method} ${path}`);
    assert.equal(res.body.message.code, 'method_not_allowed', `${method} ${path}`);
    assert.match(res.headers.get('allow') ?? '', new RegExp(allow), `${method} ${path}`);
  }
  assert.equal(backend.received.length, 0, `the catch-all got: ${JSON.stringify(backend.received.map((r) => `${r.method} ${r.url}`))}`);

  // Everything else is the catch-all's.
  const other = await call(`${gw.url}/api/other`);
  assert.equal(other.status, 200);
  assert.equal(other.body.url, '/api/other');
  assert.equal(backend.received.length, 1);
});

test('an own path spelt in another case or with segment parameters or a trailing slash reaches no catch-all either', async (t) => {
  // The route table reads a path without case and without `;` parameters (proxy/routes.ts),
  // because backends do: a catch-all's backend reads these as the gateway's own paths.
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/', targets: [backend.url], auth: 'public' }]);
  const spellings = ['/API/roles', '/Api/Signin', '/HEALTHZ', '/.Well-Known/jwks.json', '/api/roles;x=1', '/api;x=1/roles', '/healthz;', '/READYZ;a=b'];
  for (const path of spellings) {
    const res = await rawExchange(gw.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.notEqual(res.status, 200, `${path} was answered by the catch-all`);
  }
  // With one trailing slash the router serves the path itself (as /healthz): the gateway answers.
  // Any other spelling is refused (404): only the exact one is the gateway's to serve.
  for (const [path, status] of [['/healthz/', 200], ['/api/roles/', 401], ['/.well-known/jwks.json/', 200], ['/API/ROLES/', 404]] as const) {
    const res = await rawExchange(gw.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.equal(res.status, status, `${path}: the gateway's own answer`);
  }
  assert.equal(backend.received.length, 0, `the catch-all got: ${JSON.stringify(backend.received.map((r) => `${r.method} ${r.url}`))}`);
});

test('the owner API\'s whole tree is the gateway\'s own: no spelling of a path under /owner reaches a catch-all route; /ownerx does', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/', targets: [backend.url], auth: 'public' }]);
  const spellings = ['/owner', '/owner/', '/owner/v1', '/owner/v1/accounts', '/owner/v1/accounts/acct_alice/keys', '/owner/v2/anything/at/all',
    '/OWNER/v1/accounts', '/Owner', '/owner;x=1/v1/session', '/owner/v1;a/accounts', '/owner//v1/session'];
  for (const path of spellings) {
    for (const method of ['GET', 'POST', 'DELETE']) {
      const res = await rawExchange(gw.url, `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
      assert.notEqual(res.status, 200, `${method} ${path} was answered by the catch-all`);
    }
  }
  const described = await rawExchange(gw.url, 'GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.equal(JSON.parse(described.body.toString()).openapi, '3.1.0', 'the gateway\'s own description');
  assert.equal(backend.received.length, 0, `the catch-all got: ${JSON.stringify(backend.received.map((r) => `${r.method} ${r.url}`))}`);
  for (const path of ['/ownerx', '/owners/1', '/x/owner/v1']) {
    const res = await rawExchange(gw.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.equal(res.status, 200, `${path} is a backend's`);
  }
  assert.equal(backend.received.length, 3);
});

test('unknown paths get the 404 envelope and reach no backend', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url], auth: 'public' }]);
  for (const [method, path] of [['GET', '/'], ['GET', '/nothing'], ['POST', '/nothing/here'], ['DELETE', '/x'], ['GET', '/api'], ['GET', '/order']]) {
    const res = await call(`${gw.url}${path}`, { method });
    assert.equal(res.status, 404, `${method} ${path}`);
    assert.deepEqual(Object.keys(res.body).sort(), ['message', 'success']);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message.code, 'not_found');
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.ok(res.headers.get('x-request-id'), 'a 404 has a request id');
  }
  assert.equal(backend.received.length, 0);
});

test('the query string reaches the backend byte for byte, stripped prefix or not', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/search', targets: [backend.url], auth: 'public' },
    { prefix: '/v2', targets: [`${backend.url}/base`], auth: 'public', stripPrefix: true },
  ]);
  // Every one of these is a valid query as sent on the request line (RFC 3986 query
  // characters, or ones Node's parser accepts); a backend that checks a signature over the
  // query (pre-signed URLs) needs the very same bytes.
  const queries = ["?q=O'Brien", '?q=%27quoted%27', '?sig=a%2Bb%3D%3D&x=1', '?a=b?c&d=/e/', '?list=(1,2)*!$', '?empty=&=x&&'];
  const changed: string[] = [];
  for (const query of queries) {
    for (const [prefix, upstream] of [['/search', '/search'], ['/v2', '/base']]) {
      const res = await rawExchange(gw.url, `GET ${prefix}/x${query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.equal(res.status, 200, `${prefix}/x${query}`);
      const got = backend.received.at(-1)!.url;
      if (got !== `${upstream}/x${query}`) changed.push(`${prefix}/x${query} -> ${got}`);
    }
  }
  assert.deepEqual(changed, [], 'queries changed on the way to the backend');
});

test('a raw "#" in the query is refused as in the path, not cut off on the way to the backend', async (t) => {
  // A request target has no fragment (RFC 9112 §3.2). The gateway refuses "#" in the path;
  // after the "?" it reads it as part of the query, while the backend got the query cut at it.
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/search', targets: [backend.url], auth: 'public' }]);
  const res = await rawExchange(gw.url, 'GET /search/x?q=a#b&admin=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  const reached = backend.received.map((r) => r.url);
  assert.ok(res.status === 400 || reached[0] === '/search/x?q=a#b&admin=1', `answered ${res.status}; the backend got ${JSON.stringify(reached)}`);
});
