/**
 * The `cors` settings attacked: shared-cache poisoning (every answer whose headers depend on
 * Origin says Vary: Origin, on 304s, HEADs, backend failures and the gateway's own errors),
 * spellings of the same-origin paths, oversized preflights and a preflight with a body.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { startBackend, type Backend, type Handler } from '../helpers/backend.js';
import { call, signIn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { RawConnection } from '../helpers/raw-http.js';

const APP = 'https://app.example';

async function gatewayWith(t: TestContext, handler?: Handler): Promise<{ gw: TestGateway; backend: Backend }> {
  const backend = await startBackend(t, handler);
  const gw = await startGateway(t, {
    overrides: {
      cors: { allowedOrigins: [APP] },
      routes: [
        { prefix: '/svc', targets: [backend.url] },
        { prefix: '/pub', targets: [backend.url], auth: 'public' },
        { prefix: '/down', targets: ['http://127.0.0.1:9'], auth: 'public' },
      ],
    },
  });
  return { gw, backend };
}

function varyOrigin(res: { headers: Headers }): boolean {
  return (res.headers.get('vary') ?? '').split(',').some((part) => /^\s*(origin|\*)\s*$/i.test(part));
}

const backendAnswers: Handler = (req, res) => {
  if (req.url === '/pub/304') return void res.writeHead(304, { etag: '"v1"' }).end();
  if (req.url === '/pub/500') return void res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
  if (req.url === '/pub/vary') return void res.writeHead(200, { vary: 'Accept-Language', etag: '"v1"' }).end('x');
  res.writeHead(200, { 'content-type': 'text/plain', etag: '"v1"', 'cache-control': 'public, max-age=60' }).end('ok');
};

test('every answer on a CORS path says Vary: Origin, with or without an Origin, whatever its status or method', async (t) => {
  const { gw } = await gatewayWith(t, backendAnswers);
  const { accessToken } = await signIn(gw);
  const cases: [string, RequestInit & { token?: string }][] = [
    ['/pub/ok', {}], ['/pub/ok', { method: 'HEAD' }], ['/pub/304', {}], ['/pub/500', {}], ['/pub/vary', {}],
    ['/pub/ok', { headers: { 'if-none-match': '"v1"' } }], ['/down/x', {}], ['/svc/x', {}], ['/svc/x', { token: 'garbage' }],
    ['/api/roles', { token: accessToken }], ['/api/roles', {}], ['/api/roles?page=-1', { token: accessToken }], ['/api/signin', { method: 'GET' }],
    ['/.well-known/jwks.json', {}], ['/.well-known/jwks.json', { method: 'HEAD' }], ['/nowhere', {}], ['/api/sign?address=0xzz', { token: accessToken }],
  ];
  for (const [path, init] of cases) {
    for (const origin of [undefined, APP, 'https://evil.example']) {
      const headers = new Headers(init.headers);
      if (origin !== undefined) headers.set('origin', origin);
      const res = await call(`${gw.url}${path}`, { ...init, headers });
      const what = `${init.method ?? 'GET'} ${path} from ${origin ?? 'no origin'}: ${res.status}`;
      assert.ok(res.status < 500 || path.startsWith('/down') || path === '/pub/500', what);
      assert.ok(varyOrigin(res), `${what}: Vary ${res.headers.get('vary')}`);
      assert.equal(res.headers.get('access-control-allow-origin'), origin === APP ? APP : null, what);
    }
  }
  // A 304 of the gateway's own (conditional GET of the JWKS) too.
  const first = await call(`${gw.url}/.well-known/jwks.json`, { headers: { origin: APP } });
  const etag = first.headers.get('etag');
  if (etag !== null) {
    const again = await call(`${gw.url}/.well-known/jwks.json`, { headers: { origin: APP, 'if-none-match': etag } });
    assert.ok(varyOrigin(again), `304: Vary ${again.headers.get('vary')}`);
  }
});

test('spellings of the same-origin paths get no preflight 204 and no CORS headers', async (t) => {
  const { gw, backend } = await gatewayWith(t);
  const paths = [
    '/owner/v1/session', '/Owner/v1/session', '/%6fwner/v1/session', '/%6Fwner/v1/session', '//owner/v1/session', '/owner/v1/../v1/session',
    '/./owner/v1/session', '/owner;x/v1/session', '/owner/v1/session/', '/owner%2fv1%2fsession', '/metrics/', '/METRICS', '/%6detrics',
    '/healthz;a', '/readyz/', '/openapi.json/', '/%6fpenapi.json', '/owner/v1/accounts?x=1',
  ];
  for (const path of paths) {
    for (const method of ['GET', 'POST']) {
      const res = await call(`${gw.url}${path}`, { method: 'OPTIONS', headers: { origin: APP, 'access-control-request-method': method } });
      assert.notEqual(res.status, 204, `preflight ${method} ${path}`);
      assert.equal(res.headers.get('access-control-allow-origin'), null, `preflight ${method} ${path}: ${res.status}`);
      assert.ok(res.status < 500, `preflight ${path}: ${res.status}`);
    }
    const actual = await call(`${gw.url}${path}`, { headers: { origin: APP } });
    if (actual.status !== 404 && actual.status !== 400) {
      assert.equal(actual.headers.get('access-control-allow-origin'), null, `GET ${path}: ${actual.status}`);
    }
  }
  assert.equal(backend.received.length, 0);
});

test('preflights asking for 100 headers, or very long ones, are answered without a 5xx', async (t) => {
  const { gw } = await gatewayWith(t);
  const many = Array.from({ length: 100 }, (_, i) => `x-h${i}`).join(', ');
  const allowedMany = Array.from({ length: 100 }, () => 'authorization').join(', ');
  const long = 'a'.repeat(12_000);
  for (const [requested, expected] of [[many, 403], [allowedMany, 204], [long, 403], [`authorization, ${long}`, 403], [' , ,authorization,, ', 204]] as const) {
    const res = await call(`${gw.url}/svc/x`, { method: 'OPTIONS', headers: { origin: APP, 'access-control-request-method': 'GET', 'access-control-request-headers': requested } });
    assert.equal(res.status, expected, requested.slice(0, 40));
    if (expected === 403) assert.equal(res.headers.get('access-control-allow-origin'), null);
    // The refusal names the allowed headers, never echoes the requested ones.
    assert.ok(!JSON.stringify(res.body ?? '').includes('x-h1'));
  }
});

test('a preflight with a body: the body is read and dropped, never parsed as the next request', async (t) => {
  const { gw, backend } = await gatewayWith(t);
  const host = new URL(gw.url).host;
  for (const path of ['/svc/x', '/api/roles']) {
    const smuggled = `GET /owner/v1/session HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\r\n\r\n`;
    const connection = await RawConnection.open(gw.url);
    try {
      connection.write(`OPTIONS ${path} HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\r\nAccess-Control-Request-Method: GET\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`);
      const first = await connection.response();
      assert.equal(first.status, 204, path);
      connection.write(`GET /pub/next HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\r\nConnection: close\r\n\r\n`);
      const second = await connection.response();
      assert.equal(second.status, 200, `${path}: the answer after the preflight is the next request's`);
      assert.equal(second.get('access-control-allow-origin'), APP);
    } finally {
      connection.destroy();
    }
  }
  assert.deepEqual(backend.received.map((r) => r.url), ['/pub/next', '/pub/next']);
});
