/**
 * /api/forward-auth (docs/forward-auth.md) behind Debian's real nginx: a client talks to nginx,
 * nginx asks the gateway (`auth_request`, configured exactly as docs/forward-auth.md shows: the
 * page's nginx block is what runs here) and forwards to a real backend. Allowed requests reach
 * the backend with the identity headers nginx copied; refusals (401, 403, 429) reach the client
 * as the gateway's envelope and headers, and never the backend. Beside nginx: an untrusted
 * peer's forwarded headers are ignored, a decision-only route is never proxied, bad input is a
 * 400, and Envoy's prefix form is read.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect as connectHttp2 } from 'node:http2';
import { test, type TestContext } from 'node:test';
import { decodeJwt } from 'jose';
import { startBackend, type Backend } from '../helpers/backend.js';
import { call, metricsText, signIn, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { nginxSuite, startNginx, type TestNginx } from '../helpers/nginx.js';
import { newKey, startProxy, writeDataFile } from '../helpers/proxy.js';
import { ConfigError, loadConfig } from '../../src/config/load.js';

const reader = newKey('reader', 'acct_shop', ['orders:read']);
const plain = newKey('plain', 'acct_plain');

/** The nginx block of docs/forward-auth.md, its upstreams and port pointed at this test's. */
function docNginx(gatewayUrl: string, backendUrl: string): (port: number) => string {
  const page = readFileSync(new URL('../../docs/forward-auth.md', import.meta.url), 'utf8');
  const blocks = [...page.matchAll(/```nginx\n([\s\S]*?)\n```/g)].map((m) => m[1]!);
  assert.equal(blocks.length, 1, 'docs/forward-auth.md shows one nginx configuration');
  const replace = (text: string, from: string, to: string) => {
    assert.ok(text.includes(from), `the nginx block has "${from}"`);
    return text.replace(from, to);
  };
  return (port) => {
    let conf = replace(blocks[0]!, 'server gateway:8080;', `server ${new URL(gatewayUrl).host};`);
    conf = replace(conf, 'server app:9000;', `server ${new URL(backendUrl).host};`);
    return replace(conf, 'listen 80;', `listen 127.0.0.1:${port};`);
  };
}

interface Fixture {
  gw: TestGateway;
  nginx: TestNginx;
  backend: Backend;
  readerToken: string;
  plainToken: string;
}

async function start(t: TestContext): Promise<Fixture> {
  const backend = await startBackend(t);
  const file = writeDataFile(t, [reader, plain]);
  const gw = await startProxy(t, [
    {
      name: 'orders', prefix: '/orders', identity: ['account', 'key', 'token', 'request', 'scopes'],
      allow: [{ name: 'read', methods: ['GET', 'HEAD'], anyScopes: ['orders:read'] }, { name: 'write', scopes: ['orders:write'] }],
      identityHeaders: { 'X-User-Email': 'email' },
    },
    { name: 'metered', prefix: '/metered' },
    { name: 'proxied', prefix: '/proxied', targets: [backend.url], requiredScope: 'orders:read' },
  ] as never, {
    data: { file },
    proxy: { trustedProxies: ['127.0.0.1'] },
    limits: {
      mode: 'enforce',
      signIn: { perAddress: [{ limit: 10_000, seconds: 60 }], failuresPerKeyAndAddress: [{ limit: 10_000, seconds: 60 }], failuresPerAddress: [{ limit: 10_000, seconds: 60 }] },
      calls: { perAccount: [{ limit: 10_000, seconds: 60 }] },
      rules: [{ route: 'metered', perAccount: [{ limit: 2, seconds: 60 }] }],
    },
  });
  const nginx = await startNginx(t, docNginx(gw.url, backend.url));
  const readerToken = (await signIn(gw, reader)).accessToken;
  const plainToken = (await signIn(gw, plain)).accessToken;
  return { gw, nginx, backend, readerToken, plainToken };
}

/** A request from `localAddress` (another loopback address is another peer), with these headers. */
function from(localAddress: string, url: string, headers: Record<string, string | string[]>, method = 'GET'): Promise<JsonResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, localAddress }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => {
        const out = new Headers();
        for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) out.set(name, Array.isArray(value) ? value.join(', ') : value);
        resolve({ status: res.statusCode ?? 0, headers: out, body: text === '' ? undefined : JSON.parse(text) });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

function assertRefused(res: JsonResponse, status: number, code: string): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body?.success, false, JSON.stringify(res.body));
  assert.equal(res.body?.message?.code, code, JSON.stringify(res.body));
}

test('forward auth behind nginx auth_request', nginxSuite(), async (t) => {
  const { gw, nginx, backend, readerToken, plainToken } = await start(t);
  const reached = () => backend.received.length;

  await t.test('allowed: the backend gets the request with the identity headers nginx copied, and no token', async () => {
    const before = reached();
    const res = await call(`${nginx.url}/orders/42?view=full`, { token: readerToken, headers: { 'x-account-id': 'acct_evil', 'x-scopes': 'admin' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(reached(), before + 1);
    const got = backend.received.at(-1)!;
    assert.equal(got.method, 'GET');
    assert.equal(got.url, '/orders/42?view=full');
    assert.deepEqual(got.headers['x-account-id'], ['acct_shop']);
    assert.deepEqual(got.headers['x-key-id'], ['reader']);
    assert.deepEqual(got.headers['x-token-id'], [decodeJwt(readerToken).jti]);
    assert.deepEqual(got.headers['x-scopes'], ['orders:read']);
    assert.equal(got.headers['x-request-id']?.length, 1);
    // The token has no email claim: nothing to vouch for, and the header is not sent.
    assert.equal(got.headers['x-user-email'], undefined);
    assert.equal(got.headers.authorization, undefined);
  });

  await t.test('allowed decisions keep nginx\'s connection to the gateway (asked with HEAD: nginx keeps one only for an answer without a body)', async () => {
    let opened = 0;
    const count = () => { opened++; };
    gw.running!.server.on('connection', count);
    t.after(() => gw.running!.server.off('connection', count));
    for (let i = 0; i < 5; i++) assert.equal((await call(`${nginx.url}/orders/${i}`, { token: readerToken })).status, 200, `call ${i}`);
    // One at most: the connection of earlier decisions may have been let go as idle meanwhile.
    assert.ok(opened <= 1, `${opened} connections for 5 decisions`);
  });

  await t.test('no token: 401 with the envelope and the challenge a proxied route gives, nothing reaches the backend', async () => {
    const before = reached();
    const res = await call(`${nginx.url}/orders/42`);
    assertRefused(res, 401, 'missing_token');
    const proxied = await call(`${gw.url}/proxied/x`);
    assertRefused(proxied, 401, 'missing_token');
    assert.ok(res.headers.get('www-authenticate')?.startsWith('Bearer '));
    assert.equal(res.headers.get('www-authenticate'), proxied.headers.get('www-authenticate'));
    assert.equal(reached(), before);
  });

  await t.test('an invalid token: 401 invalid_token, the same challenge as a proxied route', async () => {
    const before = reached();
    const res = await call(`${nginx.url}/orders/42`, { token: `${readerToken}x` });
    assertRefused(res, 401, 'invalid_token');
    const proxied = await call(`${gw.url}/proxied/x`, { token: `${readerToken}x` });
    assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    assert.equal(res.headers.get('www-authenticate'), proxied.headers.get('www-authenticate'));
    assert.equal(reached(), before);
  });

  await t.test('the route\'s rules refuse: 403, on the original method and path', async () => {
    const before = reached();
    assertRefused(await call(`${nginx.url}/orders/42`, { token: plainToken }), 403, 'insufficient_scope');
    // The reader may GET, not POST: the method nginx was asked about is the one decided on.
    assertRefused(await call(`${nginx.url}/orders`, { token: readerToken, method: 'POST', body: 'x' }), 403, 'insufficient_scope');
    assert.equal(reached(), before);
  });

  await t.test('over the route\'s quota: 429 with Retry-After', async () => {
    const before = reached();
    for (let i = 1; i <= 2; i++) assert.equal((await call(`${nginx.url}/metered/${i}`, { token: readerToken })).status, 200, `call ${i}`);
    assert.equal(reached(), before + 2);
    const res = await call(`${nginx.url}/metered/3`, { token: readerToken });
    assertRefused(res, 429, 'rate_limited');
    const retryAfter = Number(res.headers.get('retry-after'));
    assert.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After: ${res.headers.get('retry-after')}`);
    assert.equal(reached(), before + 2);
  });

  await t.test('no route covers the request: 404, nothing reaches the backend', async () => {
    const before = reached();
    assertRefused(await call(`${nginx.url}/elsewhere`, { token: readerToken }), 404, 'not_found');
    assert.equal(reached(), before);
  });

  await t.test('decisions are counted under their route\'s name', async () => {
    const text = await metricsText(gw);
    assert.match(text, /gateway_request_duration_seconds_count\{route="orders",method="GET",status_class="2xx"\} [1-9]/);
    assert.match(text, /gateway_request_duration_seconds_count\{route="orders",method="GET",status_class="4xx"\} [1-9]/);
  });
});

test('forward auth asked directly: trust, decision-only routes, bad input, Envoy\'s prefix form', nginxSuite(), async (t) => {
  const { gw, backend, readerToken, plainToken } = await start(t);
  const ask = `${gw.url}/api/forward-auth`;
  const bearer = { authorization: `Bearer ${readerToken}` };

  await t.test('a trusted peer\'s X-Original-* are read; an untrusted peer\'s are ignored (404: the endpoint itself is no route)', async () => {
    const trusted = await from('127.0.0.1', ask, { ...bearer, 'x-original-uri': '/orders/1', 'x-original-method': 'GET' });
    assert.equal(trusted.status, 200, JSON.stringify(trusted.body));
    assert.equal(trusted.headers.get('x-account-id'), 'acct_shop');
    assert.deepEqual(trusted.body, { success: true, message: { route: 'orders' } });
    const untrusted = await from('127.0.0.2', ask, { ...bearer, 'x-original-uri': '/orders/1', 'x-forwarded-uri': '/orders/1', 'x-original-method': 'GET' });
    assertRefused(untrusted, 404, 'not_found');
    assert.equal(untrusted.headers.get('x-account-id'), null);
    const prefixed = await from('127.0.0.2', `${ask}/orders/1`, bearer);
    assertRefused(prefixed, 404, 'not_found');
  });

  await t.test('X-Forwarded-* (Traefik, Caddy) are read too, and win over X-Original-*', async () => {
    const res = await from('127.0.0.1', ask, { ...bearer, 'x-forwarded-method': 'POST', 'x-forwarded-uri': '/orders', 'x-original-method': 'GET', 'x-original-uri': '/orders' });
    assertRefused(res, 403, 'insufficient_scope');
  });

  await t.test('Envoy\'s form: the original method, the target below /api/forward-auth/', async () => {
    const get = await from('127.0.0.1', `${ask}/orders/7?x=1`, bearer);
    assert.equal(get.status, 200, JSON.stringify(get.body));
    assertRefused(await from('127.0.0.1', `${ask}/orders/7`, bearer, 'DELETE'), 403, 'insufficient_scope');
  });

  await t.test('on a route with targets, the decision is what the proxied request gets: status, code, challenge', async () => {
    const cases: [string, Record<string, string>][] = [
      ['no token', {}], ['invalid token', { authorization: `Bearer ${readerToken}x` }],
      ['malformed header', { authorization: 'Basic abc' }], ['missing scope', { authorization: `Bearer ${plainToken}` }],
      ['allowed', bearer],
    ];
    for (const [what, headers] of cases) {
      const before = backend.received.length;
      const decided = await from('127.0.0.1', ask, { ...headers, 'x-original-uri': '/proxied/1', 'x-original-method': 'GET' });
      assert.equal(backend.received.length, before, `${what}: a decision reaches no backend`);
      const proxied = await call(`${gw.url}/proxied/1`, { headers });
      assert.equal(decided.status, proxied.status, `${what}: ${JSON.stringify(decided.body)} vs ${JSON.stringify(proxied.body)}`);
      if (proxied.status !== 200) assert.equal(decided.body.message.code, proxied.body.message.code, what);
      assert.equal(decided.headers.get('www-authenticate'), proxied.headers.get('www-authenticate'), what);
    }
    assert.equal(backend.received.length, 1, 'only the allowed proxied request reached the backend');
    backend.received.length = 0;
  });

  await t.test('a direct call with a token to a decision-only route is never proxied', async () => {
    const res = await call(`${gw.url}/orders/1`, { token: readerToken });
    assertRefused(res, 404, 'not_found');
    assert.equal(res.headers.get('x-account-id'), null);
    assert.equal(backend.received.length, 0);
  });

  await t.test('bad input is a 400 envelope, never a 500', async () => {
    const bad: Record<string, string | string[]>[] = [
      { 'x-original-uri': '/orders/%2F..' },
      { 'x-original-uri': 'http://evil/orders' },
      { 'x-original-uri': '/orders/#frag' },
      { 'x-original-uri': ['/orders/1', '/elsewhere'] },
      { 'x-original-method': 'G E T', 'x-original-uri': '/orders/1' },
    ];
    for (const headers of bad) assertRefused(await from('127.0.0.1', ask, { ...bearer, ...headers }), 400, 'invalid_request');
    assertRefused(await from('127.0.0.1', ask, { ...bearer, 'x-original-uri': '/orders/1', 'x-original-method': 'TRACE' }), 405, 'method_not_allowed');
    // One of the gateway's own paths is no route's.
    assertRefused(await from('127.0.0.1', ask, { ...bearer, 'x-original-uri': '/api/roles' }), 404, 'not_found');
  });
});

test('a route without targets loads as decision-only; it cannot be a WebSocket route', () => {
  const problems = (routes: unknown[]): string[] => {
    try {
      loadConfig({ env: {}, overrides: { routes } });
      return [];
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return [...err.problems];
    }
  };
  assert.deepEqual(problems([{ prefix: '/orders' }]), []);
  assert.deepEqual(loadConfig({ env: {}, overrides: { routes: [{ prefix: '/orders' }] } }).routes[0]!.targets, []);
  const refused = problems([{ prefix: '/chat', websocket: true }]);
  assert.equal(refused.length, 1, JSON.stringify(refused));
  assert.match(refused[0]!, /routes\.0\.websocket.*decision-only/);
});

test('a decision asked over HTTP/2 (h2c): the same reading of the original request', async (t) => {
  const file = writeDataFile(t, [reader]);
  const gw = await startProxy(t, [{ name: 'orders', prefix: '/orders', allow: [{ methods: ['GET'], anyScopes: ['orders:read'] }] }] as never, {
    data: { file }, proxy: { trustedProxies: ['127.0.0.1'] }, http2: { cleartext: true },
  });
  const token = (await signIn(gw, reader)).accessToken;
  const client = connectHttp2(gw.url);
  t.after(() => client.destroy());
  const ask = (headers: Record<string, string | string[]>) => new Promise<{ status: number; account: unknown; body: any }>((resolve, reject) => {
    const stream = client.request({ ':method': 'GET', ':path': '/api/forward-auth', authorization: `Bearer ${token}`, ...headers });
    let status = 0;
    let account: unknown;
    let text = '';
    stream.on('response', (head) => { status = Number(head[':status']); account = head['x-account-id']; });
    stream.setEncoding('utf8').on('data', (c: string) => { text += c; });
    stream.on('end', () => resolve({ status, account, body: JSON.parse(text) }));
    stream.on('error', reject);
  });
  const allowed = await ask({ 'x-original-uri': '/orders/1', 'x-original-method': 'GET' });
  assert.equal(allowed.status, 200, JSON.stringify(allowed.body));
  assert.equal(allowed.account, 'acct_shop');
  const refused = await ask({ 'x-original-uri': '/orders/1', 'x-original-method': 'POST' });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.message.code, 'forbidden');
  const twice = await ask({ 'x-original-uri': ['/orders/1', '/orders/2'] });
  assert.equal(twice.status, 400);
  assert.equal(twice.body.message.code, 'invalid_request');
});
