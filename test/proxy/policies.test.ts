/**
 * A route's `allow` rules, `allowMode` and `identityHeaders` (docs/policies.md), against a real
 * in-process gateway and a real backend: the first matching rule wins, each selector, the 403
 * envelope (with `insufficient_scope` only where a scope was missing), report mode, claims sent
 * to the backend and the client's copies removed, sources behind a trusted proxy, bad rules
 * refused at start-up and by a reload.
 *
 * Tokens with claims the gateway's own sign-in does not give (email, roles, org) are the
 * gateway's own tokens signed again, with those claims added, by the signing key it is given:
 * what a token of a trusted issuer carrying them looks like to the route.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test, type TestContext } from 'node:test';
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { startBackend, type Backend } from '../helpers/backend.js';
import { call, logged, metricsText, signIn, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { parseMetrics } from '../helpers/metrics.js';
import { exitWithin, gatewayEnv, LISTENING, logLines, startNode } from '../helpers/process.js';
import { newKey, startProxy, writeDataFile, type KeyFixture, type RouteInput } from '../helpers/proxy.js';
import { openClient, roundTrip, startWsBackend } from '../helpers/ws-backend.js';
import { loadConfig, ConfigError } from '../../src/config/load.js';
import { createConfigReloader } from '../../src/config/reload.js';

const WOULD_DENY = 'allow rules would refuse this request (allowMode report: let through)';

const reader = newKey('reader', 'acct_shop', ['orders:read']);
const writer = newKey('writer', 'acct_shop', ['orders:read', 'orders:write']);
const plain = newKey('plain', 'acct_shop');
const bob = newKey('bob', 'acct_bob');

function routes(backend: Backend): RouteInput[] {
  return [
    {
      name: 'orders', prefix: '/orders', targets: [backend.url],
      identityHeaders: { 'X-User-Email': 'email', 'X-User-Roles': 'roles' },
      allow: [
        { name: 'read', methods: ['GET'], paths: ['/orders/:id'], anyScopes: ['orders:read', 'orders:admin'] },
        { name: 'write', methods: ['POST'], paths: ['/orders'], scopes: ['orders:read', 'orders:write'] },
        { name: 'staff', roles: ['staff'] },
        { name: 'team', methods: ['GET'], claims: { org: ['acme', 'globex'], email_verified: true } },
        { accounts: ['acct_bob'], paths: ['/orders/bob/*rest'] },
        { name: 'also-read', methods: ['GET'], anyScopes: ['orders:read'] },
      ],
    },
    { name: 'office', prefix: '/office', targets: [backend.url], allow: [{ name: 'office-net', sources: ['10.1.0.0/16', '2001:db8::/32', '::ffff:10.3.0.0/112'] }] },
    { name: 'closed', prefix: '/closed', targets: [backend.url], allow: [] },
    {
      name: 'catalogue', prefix: '/catalogue', targets: [backend.url], auth: 'public',
      allow: [{ name: 'browse', methods: ['GET'] }, { name: 'feedback', methods: ['POST'], paths: ['/catalogue/feedback'] }],
    },
    { name: 'beta', prefix: '/beta', targets: [backend.url], allowMode: 'report', allow: [{ name: 'testers', scopes: ['beta'] }] },
    { name: 'plain', prefix: '/plain', targets: [backend.url] },
  ];
}

interface Fixture {
  gw: TestGateway;
  backend: Backend;
  token(key: KeyFixture, extraClaims?: Record<string, unknown>): Promise<string>;
}

/** One gateway for the suite: these keys, a signing key of the test's own, 127.0.0.1 a trusted proxy. */
async function start(t: TestContext): Promise<Fixture> {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const backend = await startBackend(t);
  const file = writeDataFile(t, [reader, writer, plain, bob]);
  const gw = await startProxy(t, routes(backend), {
    data: { file },
    signing: { keys: [{ kid: 'rules-test', alg: 'EdDSA', pem }] },
    proxy: { trustedProxies: ['127.0.0.1'] },
  });
  return { gw, backend, token: (key, extra) => tokenOf(gw, privateKey, key, extra) };
}

async function tokenOf(gw: TestGateway, privateKey: KeyObject, key: KeyFixture, extraClaims?: Record<string, unknown>): Promise<string> {
  const { accessToken } = await signIn(gw, key);
  if (extraClaims === undefined) return accessToken;
  return new SignJWT({ ...decodeJwt(accessToken), ...extraClaims }).setProtectedHeader(decodeProtectedHeader(accessToken) as { alg: string }).sign(privateKey);
}

function assertRefused(res: JsonResponse, code: 'forbidden' | 'insufficient_scope', scope?: string): void {
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(res.body.message.code, code);
  const challenge = res.headers.get('www-authenticate');
  if (code === 'forbidden') {
    assert.equal(challenge, null, 'no challenge when no scope was missing');
  } else {
    assert.match(challenge ?? '', /^Bearer realm="gateway"/);
    assert.match(challenge ?? '', /error="insufficient_scope"/);
    assert.match(challenge ?? '', new RegExp(`scope="${scope}"`));
  }
}

function decisions(text: string, route: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of parseMetrics(text)) {
    if (s.name === 'gateway_policy_decisions_total' && s.labels.route === route) out[`${s.labels.rule} ${s.labels.outcome}`] = s.value;
  }
  return out;
}

test('allow rules, against a real gateway and backend', async (t) => {
  const { gw, backend, token } = await start(t);
  const reached = () => backend.received.length;

  await t.test('methods, paths and anyScopes: the reader may GET one order, HEAD too, in any case', async () => {
    const readerToken = await token(reader);
    const before = reached();
    for (const [method, path] of [['GET', '/orders/1'], ['HEAD', '/orders/2'], ['GET', '/ORDERS/3'], ['GET', '/orders;x=1/4'], ['GET', '/orders/5/']]) {
      const res = await call(`${gw.url}${path}`, { method, token: readerToken });
      assert.equal(res.status, 200, `${method} ${path}: ${JSON.stringify(res.body)}`);
    }
    assert.equal(reached(), before + 5);
    // Two segments under the prefix are not `/orders/:id`: the later catch-all GET rule takes it.
    assert.equal((await call(`${gw.url}/orders/1/items`, { token: readerToken })).status, 200);
    assert.deepEqual(decisions(await metricsText(gw), 'orders'), { 'read allow': 5, 'also-read allow': 1 });
  });

  await t.test('first match wins: a request two rules allow is counted under the first', async () => {
    const writerToken = await token(writer);
    assert.equal((await call(`${gw.url}/orders/7`, { token: writerToken })).status, 200);
    const counted = decisions(await metricsText(gw), 'orders');
    assert.equal(counted['read allow'], 6, 'GET /orders/7 matches "read" and "also-read": "read" comes first');
    assert.equal(counted['also-read allow'], 1);
  });

  await t.test('scopes: all of them; a missing one is a 403 insufficient_scope naming what is missing, before the backend', async () => {
    const before = reached();
    assertRefused(await call(`${gw.url}/orders`, { method: 'POST', token: await token(reader), body: '{}' }), 'insufficient_scope', 'orders:write');
    assertRefused(await call(`${gw.url}/orders/1`, { token: await token(plain) }), 'insufficient_scope', 'orders:read orders:admin');
    assert.equal(reached(), before, 'a refused request reached the backend');
    const res = await call(`${gw.url}/orders`, { method: 'POST', token: await token(writer), body: '{}' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(reached(), before + 1);
  });

  await t.test('no rule matches and no scope was missing: 403 forbidden without a challenge', async () => {
    const before = reached();
    assertRefused(await call(`${gw.url}/orders/1`, { method: 'DELETE', token: await token(reader) }), 'forbidden');
    assertRefused(await call(`${gw.url}/orders/1`, { method: 'PUT', token: await token(writer), body: '{}' }), 'forbidden');
    assert.equal(reached(), before);
    assert.equal(decisions(await metricsText(gw), 'orders')['none deny'], 4, 'the two scope refusals and these two');
  });

  await t.test('roles: the token\'s roles claim, a list or a space-separated string', async () => {
    for (const roles of [['staff'], 'ops staff']) {
      const res = await call(`${gw.url}/orders/1`, { method: 'DELETE', token: await token(plain, { roles }) });
      assert.equal(res.status, 200, `${JSON.stringify(roles)}: ${JSON.stringify(res.body)}`);
    }
    assertRefused(await call(`${gw.url}/orders/1`, { method: 'DELETE', token: await token(plain, { roles: ['stafff', 'ops'] }) }), 'forbidden');
    assertRefused(await call(`${gw.url}/orders/1`, { method: 'DELETE', token: await token(plain, { roles: { staff: true } }) }), 'forbidden');
  });

  await t.test('claims: each named claim must hold one of its values, compared exactly', async () => {
    const ok = await call(`${gw.url}/orders/9/lines`, { token: await token(plain, { org: 'globex', email_verified: true }) });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const listed = await call(`${gw.url}/orders/9/lines`, { token: await token(plain, { org: ['initech', 'acme'], email_verified: true }) });
    assert.equal(listed.status, 200, 'a list claim holding one of the values matches');
    for (const claims of [{ org: 'initech', email_verified: true }, { org: 'acme', email_verified: 'true' }, { org: 'acme' }, { org: 'ACME', email_verified: true }]) {
      // The last rule (any GET with orders:read) failed on its scope alone: that is what the answer names.
      assertRefused(await call(`${gw.url}/orders/9/lines`, { token: await token(plain, claims) }), 'insufficient_scope', 'orders:read');
    }
  });

  await t.test('accounts: the caller\'s account, with the path the rule names', async () => {
    const bobToken = await token(bob);
    assert.equal((await call(`${gw.url}/orders/bob/drafts/1`, { method: 'DELETE', token: bobToken })).status, 200);
    assertRefused(await call(`${gw.url}/orders/alice/drafts/1`, { method: 'DELETE', token: bobToken }), 'forbidden');
    assertRefused(await call(`${gw.url}/orders/bob/drafts/1`, { method: 'DELETE', token: await token(plain) }), 'forbidden');
    assert.equal(decisions(await metricsText(gw), 'orders')['4 allow'], 1, 'an unnamed rule is counted under its index');
  });

  await t.test('sources: the client address a trusted proxy names, never one written left of an untrusted hop', async () => {
    const plainToken = await token(plain);
    const via = (xff: string | undefined) => call(`${gw.url}/office/desk`, { token: plainToken, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } });
    assert.equal((await via('10.1.2.3')).status, 200);
    assert.equal((await via('2001:db8::5')).status, 200);
    assert.equal((await via('10.1.2.3, 127.0.0.1')).status, 200, 'trusted hops on the right are skipped');
    assert.equal((await via('10.3.0.9')).status, 200, 'an IPv4-mapped IPv6 range is the IPv4 range it maps');
    assert.equal((await via('::ffff:10.1.0.7')).status, 200, 'a mapped address is its IPv4 address');
    assertRefused(await via('10.2.0.1'), 'forbidden');
    assertRefused(await via('10.1.2.3, 192.0.2.9'), 'forbidden');
    assertRefused(await via(undefined), 'forbidden');
    assertRefused(await via('not-an-address'), 'forbidden');
  });

  await t.test('a public route: methods and paths for anyone; a token is neither needed nor read', async () => {
    assert.equal((await call(`${gw.url}/catalogue/items`)).status, 200);
    assert.equal((await call(`${gw.url}/catalogue/feedback`, { method: 'POST', body: 'nice' })).status, 200);
    assertRefused(await call(`${gw.url}/catalogue/items`, { method: 'POST', body: 'x' }), 'forbidden');
    assertRefused(await call(`${gw.url}/catalogue/items`, { method: 'DELETE', token: await token(writer) }), 'forbidden');
  });

  await t.test('an empty allow list refuses every request on its route', async () => {
    const before = reached();
    assertRefused(await call(`${gw.url}/closed/x`, { token: await token(writer) }), 'forbidden');
    assert.equal(reached(), before);
  });

  await t.test('report mode lets a request through that the rules refuse, logs it and counts it', async () => {
    const before = reached();
    const res = await call(`${gw.url}/beta/feature?secret=1`, { token: await token(plain) });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(reached(), before + 1, 'the backend was reached');
    const lines = logged(gw, WOULD_DENY);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.route, 'beta');
    assert.equal(lines[0]!.path, '/beta/feature', 'the path without its query');
    assert.equal(lines[0]!.accountId, 'acct_shop');
    assert.equal(lines[0]!.missingScopes, 'beta');
    assert.deepEqual(decisions(await metricsText(gw), 'beta'), { 'none would_deny': 1 });
  });

  await t.test('requiredScope and rules both apply; a route without rules is unchanged', async () => {
    assert.equal((await call(`${gw.url}/plain/x`, { method: 'DELETE', token: await token(plain) })).status, 200);
    assert.deepEqual(decisions(await metricsText(gw), 'plain'), {}, 'no decision is counted for a route without rules');
  });
});

test('identityHeaders: claims go to the backend under the route\'s names; a client\'s copies never do', async (t) => {
  const { gw, backend, token } = await start(t);
  const last = () => backend.received.at(-1)!;

  const staff = await token(plain, { email: 'ana@example.com', roles: ['staff', 'ops'] });
  const res = await call(`${gw.url}/orders/1`, { method: 'DELETE', token: staff, headers: { 'X-User-Email': 'mallory@example.com', 'x-user-roles': 'admin' } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(last().headers['x-user-email'], ['ana@example.com']);
  assert.deepEqual(last().headers['x-user-roles'], ['staff, ops']);
  assert.deepEqual(last().headers['x-account-id'], ['acct_shop'], 'the built-in identity headers still go');

  // A caller whose token lacks the claims: the client's own copies are removed, none is added.
  const readerToken = await token(reader);
  assert.equal((await call(`${gw.url}/orders/1`, { token: readerToken, headers: { 'x-user-email': 'mallory@example.com', 'X-USER-ROLES': 'staff' } })).status, 200);
  assert.equal(last().headers['x-user-email'], undefined);
  assert.equal(last().headers['x-user-roles'], undefined);

  // Values that cannot go into a header as they are: not sent, and the request still served.
  for (const email of ['ana@example.com\r\nX-Admin: 1', 'ana\u0000@example.com', 'åsa@example.com', ' ana@example.com', { address: 'ana@example.com' }, '']) {
    const odd = await call(`${gw.url}/orders/1`, { method: 'DELETE', token: await token(plain, { email, roles: 'staff' }), headers: { 'x-user-email': 'mallory@example.com' } });
    assert.equal(odd.status, 200, `${JSON.stringify(email)}: ${JSON.stringify(odd.body)}`);
    assert.equal(last().headers['x-user-email'], undefined, JSON.stringify(email));
    assert.equal(last().headers['x-admin'], undefined);
  }
});

/** The problems loadConfig names for these routes (empty when they load). */
function problemsOf(routeList: unknown[], extra: Record<string, unknown> = {}): string[] {
  try {
    loadConfig({ env: {}, overrides: { ...extra, routes: routeList } });
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return [...err.problems];
  }
}

const target = ['http://127.0.0.1:9'];

test('bad rules are refused with the route and the field named', () => {
  const cases: [string, unknown[], string][] = [
    ['a path outside the prefix', [{ prefix: '/orders', targets: target, allow: [{ paths: ['/admin/:id'] }] }], 'routes.0.allow.0.paths.0'],
    ['a path that is no pattern', [{ prefix: '/orders', targets: target, allow: [{}, { paths: ['/orders/:'] }] }], 'routes.0.allow.1.paths.0'],
    ['a misspelt selector', [{ prefix: '/orders', targets: target, allow: [{ scope: ['a'] }] }], 'routes.0.allow.0'],
    ['an unknown method', [{ prefix: '/orders', targets: target, allow: [{ methods: ['FETCH'] }] }], 'routes.0.allow.0.methods.0'],
    ['a lower-case method', [{ prefix: '/orders', targets: target, allow: [{ methods: ['get'] }] }], 'routes.0.allow.0.methods.0'],
    ['a source that is no CIDR', [{ prefix: '/orders', targets: target, allow: [{ sources: ['10.0.0.0/33'] }] }], 'routes.0.allow.0.sources.0'],
    ['an empty selector list', [{ prefix: '/orders', targets: target, allow: [{ accounts: [] }] }], 'routes.0.allow.0.accounts'],
    ['a scope with a space', [{ prefix: '/orders', targets: target, allow: [{ scopes: ['a b'] }] }], 'routes.0.allow.0.scopes.0'],
    ['a caller selector on a public route', [{ prefix: '/a', targets: target }, { prefix: '/shop', targets: target, auth: 'public', allow: [{ methods: ['GET'], scopes: ['x'] }] }], 'routes.1.allow.0.scopes'],
    ['a rule named "none"', [{ prefix: '/orders', targets: target, allow: [{ name: 'none' }] }], 'routes.0.allow.0.name'],
    ['an unknown allowMode', [{ prefix: '/orders', targets: target, allowMode: 'audit', allow: [] }], 'routes.0.allowMode'],
    ['a claim header the gateway sets', [{ prefix: '/orders', targets: target, identityHeaders: { Authorization: 'email' } }], 'routes.0.identityHeaders.Authorization'],
    ['a claim header that is a built-in identity header', [{ prefix: '/orders', targets: target, identityHeaders: { 'x-account-id': 'sub' } }], 'routes.0.identityHeaders.x-account-id'],
    ['a claim header given twice', [{ prefix: '/orders', targets: target, identityHeaders: { 'X-Email': 'email', 'x-email': 'mail' } }], 'routes.0.identityHeaders.x-email'],
    ['a claim header that is no header name', [{ prefix: '/orders', targets: target, identityHeaders: { 'X Email': 'email' } }], 'routes.0.identityHeaders'],
  ];
  for (const [label, routeList, field] of cases) {
    const problems = problemsOf(routeList);
    assert.ok(problems.some((p) => p.startsWith(field)), `${label}: expected a problem at ${field}, got ${JSON.stringify(problems)}`);
  }
  assert.deepEqual(problemsOf([{ prefix: '/', targets: target, allow: [{ paths: ['/anything/*rest'], sources: ['::1', '10.0.0.0/8'] }, {}] }]), [], 'the "/" route takes any path; an empty rule allows all');
});

test('a bad rule stops the start-up before the gateway listens, naming the route and the field', async (t) => {
  const child = startNode(t, ['src/main.ts'], {
    env: gatewayEnv({ PORT: '0', HOST: '127.0.0.1', ROUTES: JSON.stringify([{ prefix: '/orders', targets: target, allow: [{ methods: ['GET'] }, { paths: ['/orders/(x)'] }] }]) }),
  });
  const exit = await exitWithin(child);
  assert.ok(exit.code !== null && exit.code !== 0, `exit code ${exit.code}`);
  assert.match(child.stderr(), /routes\.0\.allow\.1\.paths\.0/);
  assert.deepEqual(logLines(child).filter(LISTENING), [], 'it never listened');
});

test('a reload with a bad rule changes nothing; a good one puts the new rules in force', async (t) => {
  const { gw, token } = await start(t);
  const initial = gw.services.config;
  let next: Record<string, unknown>[] = [];
  const reloader = createConfigReloader({
    initial,
    load: () => loadConfig({ env: {}, overrides: { ...structuredClone(initial) as unknown as Record<string, unknown>, routes: next } }),
    apply: (config) => gw.services.reload(config),
    log: gw.services.log,
  });
  const writerToken = await token(writer);
  const post = () => call(`${gw.url}/orders`, { method: 'POST', token: writerToken, body: '{}' });
  assert.equal((await post()).status, 200);

  const orders = initial.routes.find((r) => r.name === 'orders')!;
  next = initial.routes.map((r) => (r === orders ? { ...r, allow: [{ methods: ['GET'] }, { methods: ['POST'], paths: ['/elsewhere'] }] } : { ...r }));
  assert.equal(reloader.reload('SIGHUP'), false);
  const failed = logged(gw, 'configuration reload failed: the running configuration stays in force');
  assert.equal(failed.length, 1);
  assert.ok((failed[0]!.problems as string[]).some((p) => p.startsWith('routes.0.allow.1.paths.0')), JSON.stringify(failed[0]!.problems));
  assert.equal((await post()).status, 200, 'the old rules are still in force');

  next = initial.routes.map((r) => (r === orders ? { ...r, allow: [{ methods: ['GET'] }] } : { ...r }));
  assert.equal(reloader.reload('SIGHUP'), true);
  assertRefused(await post(), 'forbidden');
});

/** The configuration examples of docs/policies.md, their targets pointed at `url`. */
function docExamples(url: string): { routes: Record<string, unknown>[] }[] {
  const page = readFileSync(new URL('../../docs/policies.md', import.meta.url), 'utf8');
  const blocks = [...page.matchAll(/```json\n([\s\S]*?)\n```/g)].map((m) => JSON.parse(m[1]!) as { routes: Record<string, unknown>[] });
  assert.equal(blocks.length, 3, 'docs/policies.md has three examples');
  for (const block of blocks) for (const route of block.routes) route.targets = [url];
  return blocks;
}

test('the examples of docs/policies.md load, and do what the page says', async (t) => {
  const backend = await startBackend(t);
  const examples = docExamples(backend.url);
  for (const example of examples) assert.deepEqual(problemsOf(example.routes), [], JSON.stringify(example));
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const file = writeDataFile(t, [reader, plain]);
  const gw = await startProxy(t, examples.flatMap((e) => e.routes) as RouteInput[], {
    data: { file }, signing: { keys: [{ kid: 'docs', alg: 'EdDSA', pem }] }, proxy: { trustedProxies: ['127.0.0.1'] },
  });
  const readerToken = await tokenOf(gw, privateKey, reader);

  // orders: read and list with orders:read (HEAD too), not write, nor delete.
  for (const [method, path] of [['GET', '/orders'], ['GET', '/orders/42'], ['HEAD', '/orders/42']]) {
    assert.equal((await call(`${gw.url}${path}`, { method, token: readerToken })).status, 200, `${method} ${path}`);
  }
  assertRefused(await call(`${gw.url}/orders`, { method: 'POST', token: readerToken, body: '{}' }), 'insufficient_scope', 'orders:write');
  assertRefused(await call(`${gw.url}/orders/42`, { method: 'DELETE', token: readerToken }), 'forbidden');
  // … unless the caller is of acme and in the office network; its email goes to the backend.
  const acme = await tokenOf(gw, privateKey, plain, { org: 'acme', email: 'ana@acme.example' });
  assertRefused(await call(`${gw.url}/orders/42`, { method: 'DELETE', token: acme, headers: { 'x-forwarded-for': '192.0.2.1' } }), 'forbidden');
  assert.equal((await call(`${gw.url}/orders/42`, { method: 'DELETE', token: acme, headers: { 'x-forwarded-for': '10.20.3.4' } })).status, 200);
  assert.deepEqual(backend.received.at(-1)!.headers['x-user-email'], ['ana@acme.example']);
  const support = await tokenOf(gw, privateKey, plain, { roles: ['support'] });
  assert.equal((await call(`${gw.url}/orders/42`, { token: support })).status, 200, 'support reads');

  // catalogue: anyone reads; only the partners' networks change it.
  assert.equal((await call(`${gw.url}/catalogue/items`)).status, 200);
  assertRefused(await call(`${gw.url}/catalogue/items/1`, { method: 'DELETE', headers: { 'x-forwarded-for': '198.51.100.7' } }), 'forbidden');
  assert.equal((await call(`${gw.url}/catalogue/items/1`, { method: 'DELETE', headers: { 'x-forwarded-for': '2001:db8::7' } })).status, 200);

  // billing: report mode, the request goes through and is counted.
  assert.equal((await call(`${gw.url}/billing/invoices`, { method: 'POST', token: readerToken, body: '{}' })).status, 200);
  assert.deepEqual(decisions(await metricsText(gw), 'billing'), { 'none would_deny': 1 });
  assert.equal(logged(gw, WOULD_DENY).length, 1);
});

test('a WebSocket handshake is decided by the same rules and gets the same claim headers', async (t) => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const backend = await startWsBackend(t);
  const gw = await startProxy(t, [{
    name: 'chat', prefix: '/chat', targets: [backend.url], websocket: true,
    identityHeaders: { 'X-User-Email': 'email' },
    allow: [{ name: 'rooms', methods: ['GET'], paths: ['/chat/rooms/:room'], roles: ['member'] }],
  }], { data: { file: writeDataFile(t, [plain]) }, signing: { keys: [{ kid: 'ws', alg: 'EdDSA', pem }] } });

  const member = await tokenOf(gw, privateKey, plain, { roles: ['member'], email: 'ana@example.com' });
  const ws = await openClient(gw.url, '/chat/rooms/lobby', { token: member, headers: { 'x-user-email': 'mallory@example.com' } });
  assert.equal((await roundTrip(ws, 'hello')).data.toString(), 'hello');
  ws.close();
  assert.equal(backend.handshakes.length, 1);
  assert.deepEqual(backend.handshakes[0]!.headers['x-user-email'], ['ana@example.com']);

  const outsider = await tokenOf(gw, privateKey, plain, { roles: ['guest'] });
  await assert.rejects(openClient(gw.url, '/chat/rooms/lobby', { token: outsider }), /answered 403/);
  await assert.rejects(openClient(gw.url, '/chat/admin/x', { token: member }), /answered 403/);
  assert.equal(backend.handshakes.length, 1, 'a refused handshake reached the backend');
});

test('the start-up errors docs/policies.md shows are the ones the gateway prints', () => {
  const page = readFileSync(new URL('../../docs/policies.md', import.meta.url), 'utf8');
  const shown = /\n {4}(invalid configuration:\n(?: {6}- .*\n)+)/.exec(page)?.[1]?.replace(/^ {4}/gm, '');
  assert.ok(shown !== undefined, 'docs/policies.md shows the errors');
  const routesEnv = JSON.stringify([
    { prefix: '/orders', targets: target, allow: [{ paths: ['/orders/:'] }, { paths: ['/admin/:id'] }] },
    { prefix: '/c', auth: 'public', targets: target, allow: [{ scopes: ['x'] }] },
  ]);
  assert.throws(() => loadConfig({ env: { ROUTES: routesEnv } }), (err: Error) => {
    assert.equal(`${err.message}\n`, shown);
    return true;
  });
});
