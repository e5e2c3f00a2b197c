/**
 * The `cors` settings (docs/api.md, "CORS"): real in-process gateways, a real backend that
 * records what reaches it, and raw sockets where a test needs every header line as sent.
 *
 *   off by default           an Origin changes nothing: no CORS header, preflights go as before
 *   preflights               answered by the gateway (204 or a 403 refusal) on own and proxied
 *                            paths, never reaching a backend, no token needed
 *   actual answers           the headers on successes and errors (401, 429), a backend's own
 *                            Access-Control-* replaced, nothing for an origin not listed
 *   settings                 origins validated with clear messages; the env's comma list
 *   hostile Origin values    never echoed, never a 500
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { startBackend, type Backend, type Handler } from '../helpers/backend.js';
import { call, postJson, sha256Hex, signIn, startGateway, DEMO, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-http.js';

const APP = 'https://app.example';
const OTHER = 'https://evil.example';

/** A backend that answers with its own CORS headers, as many frameworks do. */
const corsyBackend: Handler = (_req, res) => {
  res.writeHead(200, {
    'content-type': 'application/json',
    'access-control-allow-origin': '*',
    'access-control-allow-credentials': 'true',
    'access-control-expose-headers': 'X-Internal',
    vary: 'Accept-Encoding',
    'x-backend': 'yes',
  });
  res.end('{"ok":true}');
};

async function gatewayWith(t: TestContext, cors: Record<string, unknown> | undefined, handler?: Handler, extra: Record<string, unknown> = {}): Promise<{ gw: TestGateway; backend: Backend }> {
  const backend = await startBackend(t, handler);
  const gw = await startGateway(t, {
    overrides: {
      ...extra,
      ...(cors === undefined ? {} : { cors }),
      routes: [
        { prefix: '/svc', targets: [backend.url] },
        { prefix: '/pub', targets: [backend.url], auth: 'public' },
      ],
    },
  });
  return { gw, backend };
}

function preflight(url: string, origin: string, method: string, headers?: string): Promise<JsonResponse> {
  return call(url, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, ...(headers === undefined ? {} : { 'access-control-request-headers': headers }) },
  });
}

/** Every CORS header name of an answer (none may be there when CORS is off or refused). */
function corsHeaders(res: { headers: Headers }): string[] {
  return [...res.headers.keys()].filter((name) => name.startsWith('access-control-'));
}

function assertExposed(res: JsonResponse, origin = APP): void {
  assert.equal(res.headers.get('access-control-allow-origin'), origin);
  const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(', ');
  for (const name of ['X-Request-Id', 'Retry-After', 'RateLimit', 'RateLimit-Policy', 'WWW-Authenticate', 'DPoP-Nonce']) assert.ok(exposed.includes(name), `${name} exposed: ${exposed.join(', ')}`);
  assert.match(res.headers.get('vary') ?? '', /\bOrigin\b/);
  assert.equal(res.headers.get('access-control-allow-credentials'), null, 'credentials mode is never allowed');
}

test('off by default: the settings are empty, and an Origin changes no answer', async (t) => {
  const config = loadConfig({ env: {} });
  assert.deepEqual(config.cors, { allowedOrigins: [], maxAgeSeconds: 600, allowHeaders: [], exposeHeaders: [] });

  const { gw, backend } = await gatewayWith(t, undefined);
  const pair = await signIn(gw);
  const answers = [
    await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex('wrong') }, { headers: { origin: APP } }),
    await call(`${gw.url}/api/roles`, { token: pair.accessToken, headers: { origin: APP } }),
    await call(`${gw.url}/.well-known/jwks.json`, { headers: { origin: APP } }),
    await call(`${gw.url}/svc/x`, { token: pair.accessToken, headers: { origin: APP } }),
  ];
  assert.deepEqual(answers.map((r) => r.status), [401, 200, 200, 200]);
  for (const res of answers) {
    assert.deepEqual(corsHeaders(res), []);
    assert.equal(res.headers.get('vary'), null);
  }
  // A preflight is an ordinary OPTIONS, as before: 405 on an own path, the route's bearer
  // check on a required route, and the backend itself on a public one.
  const own = await preflight(`${gw.url}/api/signin`, APP, 'POST', 'content-type');
  assert.equal(own.status, 405);
  assert.equal(own.body.message.code, 'method_not_allowed');
  const required = await preflight(`${gw.url}/svc/x`, APP, 'GET', 'authorization');
  assert.equal(required.status, 401);
  assert.equal(backend.received.length, 1, 'only the GET above reached the backend');
  const open = await preflight(`${gw.url}/pub/x`, APP, 'GET');
  assert.equal(open.status, 200);
  assert.equal(backend.received.at(-1)!.method, 'OPTIONS');
  for (const res of [own, required, open]) assert.deepEqual(corsHeaders(res), []);
});

test('preflights from an allowed origin: 204 with the allow headers, on every CORS path, no token, no backend', async (t) => {
  const { gw, backend } = await gatewayWith(t, { allowedOrigins: [APP, 'http://localhost:5173'], maxAgeSeconds: 120, allowHeaders: ['Idempotency-Key'] });
  const cases: [string, string, string][] = [
    ['/api/signin', 'POST', 'POST'],
    ['/api/refresh', 'POST', 'POST'],
    ['/api/reset', 'POST', 'POST'],
    ['/api/sign', 'GET', 'HEAD, GET, POST'],
    ['/api/roles', 'GET', 'HEAD, GET'],
    ['/.well-known/jwks.json', 'GET', 'HEAD, GET'],
    ['/svc/orders/1', 'PUT', 'GET, HEAD, POST, PUT, PATCH, DELETE'],
    ['/pub/x', 'DELETE', 'GET, HEAD, POST, PUT, PATCH, DELETE'],
  ];
  for (const [path, method, methods] of cases) {
    const res = await preflight(`${gw.url}${path}`, APP, method, 'Authorization, content-type, idempotency-key');
    assert.equal(res.status, 204, `${path}: ${JSON.stringify(res.body)}`);
    assert.equal(res.headers.get('access-control-allow-origin'), APP, path);
    assert.deepEqual(res.headers.get('access-control-allow-methods')!.split(', ').sort(), methods.split(', ').sort(), path);
    assert.equal(res.headers.get('access-control-allow-headers'), 'authorization, content-type, x-request-id, dpop, idempotency-key', path);
    assert.equal(res.headers.get('access-control-max-age'), '120', path);
    assert.equal(res.headers.get('access-control-allow-credentials'), null, path);
    assert.match(res.headers.get('vary') ?? '', /Origin, Access-Control-Request-Method, Access-Control-Request-Headers/, path);
    assert.ok(res.headers.get('x-request-id'), path);
  }
  const other = await preflight(`${gw.url}/api/roles`, 'http://localhost:5173', 'GET');
  assert.equal(other.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  assert.equal(backend.received.length, 0, 'no preflight reached the backend');
  const log = gw.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request' && line.path === '/svc/orders/1');
  assert.equal(log.length, 1);
  assert.equal(log[0].status, 204, 'the proxied preflight is in the access log with its status');
});

test('preflights refused: origin not listed, same-origin paths, method or header not allowed: 403 without allow headers', async (t) => {
  const { gw, backend } = await gatewayWith(t, { allowedOrigins: [APP] });
  const refusals: [string, string, string, string | undefined, string][] = [
    ['/api/signin', OTHER, 'POST', undefined, 'cors_origin_not_allowed'],
    ['/svc/x', OTHER, 'GET', 'authorization', 'cors_origin_not_allowed'],
    ['/pub/x', 'null', 'GET', undefined, 'cors_origin_not_allowed'],
    ['/owner/v1/session', APP, 'POST', 'content-type', 'cors_origin_not_allowed'],
    ['/owner/v1/accounts', APP, 'GET', undefined, 'cors_origin_not_allowed'],
    ['/metrics', APP, 'GET', undefined, 'cors_origin_not_allowed'],
    ['/healthz', APP, 'GET', undefined, 'cors_origin_not_allowed'],
    ['/readyz', APP, 'GET', undefined, 'cors_origin_not_allowed'],
    ['/openapi.json', APP, 'GET', undefined, 'cors_origin_not_allowed'],
    ['/OWNER/v1/session', APP, 'POST', undefined, 'cors_origin_not_allowed'],
    ['/api/signin', APP, 'DELETE', undefined, 'cors_request_not_allowed'],
    ['/api/signin', APP, 'post', undefined, 'cors_request_not_allowed'],
    ['/svc/x', APP, 'TRACE', undefined, 'cors_request_not_allowed'],
    ['/api/roles', APP, 'GET', 'authorization, x-secret', 'cors_request_not_allowed'],
    ['/svc/x', APP, 'GET', 'x-api-key', 'cors_request_not_allowed'],
  ];
  for (const [path, origin, method, headers, code] of refusals) {
    const res = await preflight(`${gw.url}${path}`, origin, method, headers);
    const what = `${path} from ${origin} ${method} ${headers ?? ''}`;
    assert.equal(res.status, 403, `${what}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message.code, code, what);
    assert.deepEqual(corsHeaders(res), [], what);
    assert.ok(res.headers.get('x-request-id'), what);
  }
  assert.equal(backend.received.length, 0, 'no refused preflight reached the backend');

  // A preflight to a path nothing serves is the usual 404.
  const unknown = await preflight(`${gw.url}/nowhere`, APP, 'GET');
  assert.equal(unknown.status, 404);
  assert.deepEqual(corsHeaders(unknown), []);
});

test('an OPTIONS that is not a preflight behaves as without CORS', async (t) => {
  const { gw, backend } = await gatewayWith(t, { allowedOrigins: [APP] });
  const own = await call(`${gw.url}/api/signin`, { method: 'OPTIONS', headers: { origin: APP } });
  assert.equal(own.status, 405);
  assert.equal(own.headers.get('allow'), 'POST');
  const proxied = await call(`${gw.url}/pub/x`, { method: 'OPTIONS', headers: { origin: APP } });
  assert.equal(proxied.status, 200);
  assert.equal(backend.received.length, 1);
  assert.equal(backend.received[0]!.method, 'OPTIONS');
  assert.equal(proxied.headers.get('access-control-allow-origin'), APP, 'an actual request from an allowed origin');
});

test('actual answers carry the headers, on successes and on error answers, own and proxied', async (t) => {
  const { gw } = await gatewayWith(t, { allowedOrigins: [APP] });
  const headers = { origin: APP };
  const signedIn = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) }, { headers });
  assert.equal(signedIn.status, 200);
  assertExposed(signedIn);
  const token = signedIn.body.message.accessToken as string;

  const wrong = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex('wrong') }, { headers });
  assert.equal(wrong.status, 401);
  assert.equal(wrong.body.message.code, 'invalid_credentials');
  assertExposed(wrong);

  const noToken = await call(`${gw.url}/api/roles`, { headers });
  assert.equal(noToken.status, 401);
  assert.ok(noToken.headers.get('www-authenticate'));
  assertExposed(noToken);

  const roles = await call(`${gw.url}/api/roles`, { token, headers });
  assert.equal(roles.status, 200);
  assertExposed(roles);

  const jwks = await call(`${gw.url}/.well-known/jwks.json`, { headers });
  assert.equal(jwks.status, 200);
  assertExposed(jwks);

  const proxiedNoToken = await call(`${gw.url}/svc/x`, { headers, token: 'not-a-token' });
  assert.equal(proxiedNoToken.status, 401);
  assert.equal(proxiedNoToken.body.message.code, 'invalid_token');
  assertExposed(proxiedNoToken);

  const proxied = await call(`${gw.url}/svc/x`, { token, headers });
  assert.equal(proxied.status, 200);
  assertExposed(proxied);

  const notFound = await call(`${gw.url}/nowhere`, { headers });
  assert.equal(notFound.status, 404);
  assertExposed(notFound);

  // Same-origin paths never get them.
  for (const path of ['/healthz', '/readyz', '/openapi.json', '/metrics', '/owner/v1/session']) {
    const res = await call(`${gw.url}${path}`, { headers });
    assert.ok(res.status < 500, path);
    assert.deepEqual(corsHeaders(res), [], path);
  }
});

test('429 answers expose Retry-After and the RateLimit fields to the page', async (t) => {
  const { gw } = await gatewayWith(t, { allowedOrigins: [APP] }, undefined, { limits: { mode: 'enforce', calls: { perAccount: [{ limit: 1, seconds: 60 }] } } });
  const { accessToken: token } = await signIn(gw);
  const first = await call(`${gw.url}/api/roles`, { token, headers: { origin: APP } });
  assert.equal(first.status, 200);
  const own = await call(`${gw.url}/api/roles`, { token, headers: { origin: APP } });
  assert.equal(own.status, 429);
  assert.ok(own.headers.get('retry-after'));
  assertExposed(own);
  // Each route counts on its own (docs/rate-limits.md): the route's first call passes.
  assert.equal((await call(`${gw.url}/svc/x`, { token, headers: { origin: APP } })).status, 200);
  const proxied = await call(`${gw.url}/svc/x`, { token, headers: { origin: APP } });
  assert.equal(proxied.status, 429);
  assert.ok(proxied.headers.get('retry-after'));
  assertExposed(proxied);
});

test("the gateway owns CORS on proxied routes: a backend's Access-Control-* headers are replaced, its Vary kept", async (t) => {
  const { gw } = await gatewayWith(t, { allowedOrigins: [APP], exposeHeaders: ['X-Backend'] }, corsyBackend);
  const { accessToken } = await signIn(gw);
  const host = new URL(gw.url).host;
  const res = await rawExchange(gw.url, `GET /svc/x HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\r\nAuthorization: Bearer ${accessToken}\r\nConnection: close\r\n\r\n`);
  assert.equal(res.status, 200);
  assert.deepEqual(res.all('access-control-allow-origin'), [APP], 'one Allow-Origin, the gateway\'s');
  assert.deepEqual(res.all('access-control-allow-credentials'), []);
  assert.deepEqual(res.all('access-control-expose-headers'), ['X-Request-Id, Retry-After, RateLimit, RateLimit-Policy, WWW-Authenticate, DPoP-Nonce, X-Backend']);
  assert.deepEqual(res.all('vary'), ['Accept-Encoding, Origin']);
  assert.equal(res.get('x-backend'), 'yes');

  // An origin not listed: the request is served all the same (CORS is not access control),
  // the answer only lacks the headers, the backend's included.
  const other = await rawExchange(gw.url, `GET /pub/x HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${OTHER}\r\nConnection: close\r\n\r\n`);
  assert.equal(other.status, 200);
  assert.deepEqual(other.headers.filter(([name]) => name.toLowerCase().startsWith('access-control-')), []);
  assert.deepEqual(other.all('vary'), ['Accept-Encoding, Origin']);
  assert.equal(other.json().ok, true);
});

test('an origin not listed is served as without CORS: the answer just lacks the headers', async (t) => {
  const { gw, backend } = await gatewayWith(t, { allowedOrigins: [APP] });
  const pair = await signIn(gw);
  for (const res of [
    await call(`${gw.url}/api/roles`, { token: pair.accessToken, headers: { origin: OTHER } }),
    await call(`${gw.url}/svc/x`, { token: pair.accessToken, headers: { origin: OTHER } }),
    await call(`${gw.url}/svc/x`, { token: pair.accessToken }),
  ]) {
    assert.equal(res.status, 200);
    assert.deepEqual(corsHeaders(res), []);
    assert.equal(res.headers.get('vary'), 'Origin', 'caches must keep answers per Origin');
  }
  assert.equal(backend.received.length, 2);
});

test('"*" alone: any origin, answered with "*", still without credentials', async (t) => {
  const { gw } = await gatewayWith(t, { allowedOrigins: ['*'] });
  const pre = await preflight(`${gw.url}/api/signin`, OTHER, 'POST', 'content-type');
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  const res = await call(`${gw.url}/.well-known/jwks.json`, { headers: { origin: 'null' } });
  assertExposed(res, '*');
  const owner = await preflight(`${gw.url}/owner/v1/session`, OTHER, 'POST');
  assert.equal(owner.status, 403, 'the owner API stays same-origin even so');
});

test('settings: origins are validated with clear messages; the environment takes a comma list', () => {
  const problemsOf = (cors: unknown, env: NodeJS.ProcessEnv = {}): readonly string[] => {
    try {
      loadConfig({ env, overrides: cors === undefined ? {} : { cors } });
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return err.problems;
    }
    assert.fail('accepted');
  };
  const shape = /expected an origin "http\(s\):\/\/host\[:port\]" \(no path, no trailing "\/"\) or "\*"/;
  assert.match(problemsOf({ allowedOrigins: ['https://app.example/'] })[0]!, shape);
  assert.match(problemsOf({ allowedOrigins: ['https://app.example/app'] })[0]!, /^cors\.allowedOrigins\.0: /);
  assert.match(problemsOf({ allowedOrigins: ['app.example'] })[0]!, shape);
  assert.match(problemsOf({ allowedOrigins: ['null'] })[0]!, shape);
  assert.match(problemsOf({ allowedOrigins: ['ftp://app.example'] })[0]!, shape);
  assert.match(problemsOf({ allowedOrigins: ['https://App.example'] })[0]!, /lower-case scheme and host, without a default port/);
  assert.match(problemsOf({ allowedOrigins: ['https://app.example:443'] })[0]!, /without a default port/);
  assert.deepEqual(problemsOf({ allowedOrigins: ['*', APP] }), ['cors.allowedOrigins: "*" allows every origin: give it alone, or list the origins without it']);
  assert.match(problemsOf({ maxAgeSeconds: 86_401 })[0]!, /^cors\.maxAgeSeconds: /);
  assert.match(problemsOf({ allowHeaders: ['bad header'] })[0]!, /expected an HTTP header name/);
  assert.match(problemsOf(undefined, { CORS_ALLOWED_ORIGINS: `${APP}/` })[0]!, /^cors\.allowedOrigins\.0 \(from env CORS_ALLOWED_ORIGINS\): /);

  const fromEnv = loadConfig({ env: { CORS_ALLOWED_ORIGINS: ` ${APP}, http://localhost:5173 ,`, CORS_ALLOW_HEADERS: 'Idempotency-Key', CORS_MAX_AGE_SECONDS: '60' } });
  assert.deepEqual(fromEnv.cors, { allowedOrigins: [APP, 'http://localhost:5173'], maxAgeSeconds: 60, allowHeaders: ['Idempotency-Key'], exposeHeaders: [] });
  assert.deepEqual(loadConfig({ env: { CORS_ALLOWED_ORIGINS: JSON.stringify([APP]) } }).cors.allowedOrigins, [APP]);
});

test('hostile Origin values are never echoed and never make a 500', async (t) => {
  const { gw, backend } = await gatewayWith(t, { allowedOrigins: [APP] });
  const host = new URL(gw.url).host;
  const long = `https://${'a'.repeat(8000)}.example`;
  for (const origin of [long, 'null', `${APP}.evil.example`, `${APP}/`, 'HTTPS://APP.EXAMPLE', `${APP}:443`, '*', '']) {
    const pre = await preflight(`${gw.url}/api/signin`, origin, 'POST');
    assert.equal(pre.status, 403, `preflight from ${origin.slice(0, 40)}`);
    assert.deepEqual(corsHeaders(pre), []);
    const actual = await call(`${gw.url}/pub/x`, { headers: { origin } });
    assert.equal(actual.status, 200);
    assert.deepEqual(corsHeaders(actual), []);
  }
  // Two Origin lines: Node joins them, and the joined value is no listed origin.
  const twice = await rawExchange(gw.url, `OPTIONS /pub/x HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\r\nOrigin: ${APP}\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n`);
  assert.equal(twice.status, 403);
  assert.deepEqual(twice.all('access-control-allow-origin'), []);
  // CR or LF inside the value: the head is refused before any CORS decision, and nothing is echoed.
  for (const bytes of [
    `GET /pub/x HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\rAccess-Control-Allow-Credentials: true\r\nConnection: close\r\n\r\n`,
    `OPTIONS /svc/x HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\nX-Injected: 1\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n`,
    `OPTIONS /api/signin HTTP/1.1\r\nHost: ${host}\r\nOrigin: ${APP}\r\n X-Folded: 1\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n`,
  ]) {
    const res = await rawExchange(gw.url, bytes);
    assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}`);
    assert.deepEqual(res.headers.filter(([name]) => /^access-control-|^x-injected$|^x-folded$/i.test(name)), []);
  }
  assert.equal(backend.received.filter((r) => r.method === 'OPTIONS').length, 0, 'no preflight reached the backend');
  assert.equal(gw.logs.some((line) => /"status":5\d\d/.test(line)), false, 'no 5xx logged');
});
