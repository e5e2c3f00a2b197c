/**
 * Path spellings against proxied routes: a public /public route and a protected /orders route,
 * each with its own backend. No spelling of /orders reaches its backend without a token;
 * refused spellings (encoded slash, dot segments with parameters, climbing above the root,
 * backslash, absolute-form) are 400 before any route; and the backend gets the normalised
 * path, so it reads the request as the gateway did.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { startBackend, type Backend } from '../helpers/backend.js';
import { signIn, type TestGateway } from '../helpers/gateway.js';
import { startProxy } from '../helpers/proxy.js';
import { rawExchange, type RawResponse } from '../helpers/raw-http.js';

interface Fixture {
  gw: TestGateway;
  pub: Backend;
  orders: Backend;
  token: string;
}

async function fixture(t: TestContext): Promise<Fixture> {
  const pub = await startBackend(t);
  const orders = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/public', targets: [pub.url], auth: 'public' },
    { prefix: '/orders', targets: [orders.url] },
  ]);
  const { accessToken } = await signIn(gw);
  return { gw, pub, orders, token: accessToken };
}

/** The path as written on the request line (fetch would normalise it first). */
function get(gw: TestGateway, target: string, token?: string): Promise<RawResponse> {
  const auth = token === undefined ? '' : `Authorization: Bearer ${token}\r\n`;
  return rawExchange(gw.url, `GET ${target} HTTP/1.1\r\nHost: gateway.test\r\n${auth}Connection: close\r\n\r\n`);
}

/** Spellings that mean /orders/1 once normalised. */
const ORDERS_SPELLINGS: [string, string][] = [
  ['/public/../orders/1', '/orders/1'],
  ['/public/%2e%2e/orders/1', '/orders/1'],
  ['/public/%2E%2E/orders/1', '/orders/1'],
  ['/public/.%2e/orders/1', '/orders/1'],
  ['/public/x/../../orders/1', '/orders/1'],
  ['/public/./../orders/1', '/orders/1'],
  ['//orders/1', '/orders/1'],
  ['///orders//1', '/orders/1'],
  ['/./orders/1', '/orders/1'],
  ['/%6Frders/1', '/orders/1'],
  ['/%4Frders/1', '/Orders/1'],
  ['/ORDERS/1', '/ORDERS/1'],
  ['/public/..//orders/1?x=/../public', '/orders/1?x=/../public'],
];

test('no spelling of a protected path reaches its backend without a token', async (t) => {
  const fx = await fixture(t);
  for (const [spelling] of ORDERS_SPELLINGS) {
    const res = await get(fx.gw, spelling);
    assert.equal(res.status, 401, `${spelling}: ${res.body.toString()}`);
    assert.equal(res.json().message.code, 'missing_token', spelling);
  }
  assert.equal(fx.orders.received.length, 0, `reached /orders anonymously: ${JSON.stringify(fx.orders.received.map((r) => r.url))}`);
  assert.equal(fx.pub.received.length, 0, `went to /public instead: ${JSON.stringify(fx.pub.received.map((r) => r.url))}`);
});

test('with a token, the backend gets the normalised path', async (t) => {
  const fx = await fixture(t);
  for (const [spelling, normal] of ORDERS_SPELLINGS) {
    const before = fx.orders.received.length;
    const res = await get(fx.gw, spelling, fx.token);
    assert.equal(res.status, 200, spelling);
    assert.equal(fx.orders.received.length, before + 1, spelling);
    assert.equal(fx.orders.received.at(-1)!.url, normal, spelling);
  }
  const publicCases: [string, string][] = [
    ['/public/./a/../b//c', '/public/b/c'],
    ['/public/a/%7Euser/%41', '/public/a/~user/A'],
    ['/public/a%2d%5F%2E', '/public/a-_.'],
    ['/public/%c3%a9', '/public/%C3%A9'],
    ['/public/a/.', '/public/a/'],
    ['/public/a/b/..', '/public/a/'],
    ['/public/%252e%252e/x', '/public/%252e%252e/x'],
  ];
  for (const [spelling, normal] of publicCases) {
    const res = await get(fx.gw, spelling);
    assert.equal(res.status, 200, spelling);
    assert.equal(fx.pub.received.at(-1)!.url, normal, spelling);
  }
});

test('ambiguous spellings are refused with 400 before any route', async (t) => {
  const fx = await fixture(t);
  const refused = [
    '/Public/..;/orders',
    '/public/..;/orders/1',
    '/public/.;x/orders',
    '/public/..;jsessionid=1/orders/1',
    '/public%2F..%2Forders/1',
    '/public/%2e%2e%2forders/1',
    '/public/..%2F/orders/1',
    '/orders%2F1',
    '/public/%5C..%5Corders',
    '/public\\..\\orders/1',
    '/public/%00/x',
    '/public/%zz',
    '/..',
    '/../orders/1',
    '/public/../../orders/1',
    'http://gateway.test/orders/1',
    '*',
  ];
  for (const target of refused) {
    const res = await get(fx.gw, target);
    assert.equal(res.status, 400, `${target}: ${res.body.toString()}`);
    assert.equal(res.json().message.code, 'invalid_request', target);
    const authed = await get(fx.gw, target, fx.token);
    assert.equal(authed.status, 400, `${target} with a token`);
  }
  assert.equal(fx.orders.received.length, 0, `reached: ${JSON.stringify(fx.orders.received.map((r) => r.url))}`);
  assert.equal(fx.pub.received.length, 0, `reached: ${JSON.stringify(fx.pub.received.map((r) => r.url))}`);
});

test('a public catch-all in front of the same backend: path parameters do not open the protected prefix', async (t) => {
  // A common layout: everything public except /admin, on one backend. Servlet containers and
  // Spring drop ";params" from every segment, so "/admin;x=1/users" is their "/admin/users":
  // it must need /admin's token (or be refused), as "/ADMIN" does.
  const app = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/', targets: [app.url], auth: 'public' },
    { prefix: '/admin', targets: [app.url] },
  ]);
  for (const spelling of ['/admin;x=1/users', '/admin;/users', '/Admin;jsessionid=ABC', '/admin;']) {
    const res = await get(gw, spelling);
    assert.ok(res.status === 401 || res.status === 400, `${spelling} answered ${res.status}: the public catch-all took it`);
  }
  const asServletsRead = app.received.map((r) => r.url.replace(/;[^/?]*/g, '').toLowerCase());
  assert.deepEqual(asServletsRead.filter((path) => path.startsWith('/admin')), [], `anonymous requests that a servlet backend reads as /admin: ${JSON.stringify(app.received.map((r) => r.url))}`);
});
