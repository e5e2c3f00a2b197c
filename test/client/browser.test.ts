/**
 * The browser build in headless Chromium (Debian's, through playwright-core): the package is
 * compiled with its own tsconfig to a temporary directory and served, with a blank page, from
 * a static server on 127.0.0.1 (origin A). A real gateway on another port allows origin A
 * through its `cors.allowedOrigins` and proxies /orders to a real backend. The page imports
 * the built module and calls the gateway with a token pair minted from Node (the browser-safe
 * credentials), as an application's backend would hand one to its front end.
 *
 * Scripts are sent to the page as text: functions compiled by tsx carry helpers the page lacks.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import { after, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { BrowserContext, Page } from 'playwright-core';
import { startBackend } from '../helpers/backend.js';
import { browserSuite, launchBrowser } from '../helpers/browser.js';
import { call, logLines, postJson, signIn, type TestGateway } from '../helpers/gateway.js';
import { ROOT } from '../helpers/process.js';
import { startProxy } from '../helpers/proxy.js';

const run = promisify(execFile);
const ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';
const TSC = join(ROOT, 'node_modules/.bin/tsc');

const BUILD_DIR = mkdtempSync(join(tmpdir(), 'client-browser-build-'));
after(() => rmSync(BUILD_DIR, { recursive: true, force: true }));
let build: Promise<string> | undefined;

/**
 * The package compiled by its own tsconfig (ES2022 + DOM, no Node types) into a temporary
 * directory, once for the file (a tsc run costs seconds of CPU; the tests only read the build).
 */
function buildClient(): Promise<string> {
  build ??= run(TSC, ['-p', join(ROOT, 'packages/client/tsconfig.json'), '--outDir', BUILD_DIR]).then(() => BUILD_DIR);
  return build;
}

/** Serves `/` (a blank page) and `/client/…` (the build) on 127.0.0.1; resolves to its origin. */
async function serveStatic(t: TestContext, buildDir: string): Promise<string> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><meta charset="utf-8"><title>client</title>');
      return;
    }
    const file = normalize(join(buildDir, path.replace(/^\/client\//, '')));
    if (!path.startsWith('/client/') || !file.startsWith(buildDir)) {
      res.writeHead(404).end();
      return;
    }
    readFile(file).then(
      (body) => res.writeHead(200, { 'content-type': extname(file) === '.js' ? 'text/javascript' : 'application/octet-stream' }).end(body),
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // Every connection is cut, not only the idle ones: Chromium opens sockets ahead of need, and
  // one that has sent no byte is not idle to Node, so server.close() alone waited on it for
  // ever (the file hung in its after hooks, before the browser context was closed).
  t.after(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface Setup {
  gw: TestGateway;
  backend: Awaited<ReturnType<typeof startBackend>>;
  originA: string;
  /** Serves the same files, but is not in the gateway's allow-list. */
  originC: string;
  browser: BrowserContext;
}

async function setUp(t: TestContext, overrides: Record<string, unknown> = {}): Promise<Setup> {
  const buildDir = await buildClient();
  const originA = await serveStatic(t, buildDir);
  const originC = await serveStatic(t, buildDir);
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/orders', targets: [backend.url] }], { cors: { allowedOrigins: [originA] }, ...overrides });
  const browser = await launchBrowser(t);
  return { gw, backend, originA, originC, browser };
}

async function openPage(browser: BrowserContext, origin: string): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(`${origin}/`);
  return page;
}

/** How long a script in the page may run: page.evaluate itself never gives up, and a stalled page would hold the run. */
const IN_PAGE_LIMIT_MS = 60_000;

/** Runs `body` (JavaScript, with `client` = the built module) in the page; returns its JSON result. */
async function inPage<T>(page: Page, body: string): Promise<T> {
  const limit = new AbortController();
  const stalled = sleep(IN_PAGE_LIMIT_MS, undefined, { signal: limit.signal, ref: false }).then(() => {
    throw new Error(`the page's script did not finish in ${IN_PAGE_LIMIT_MS} ms: ${body.trim().split('\n')[0]}`);
  }, () => undefined as never);
  try {
    return await Promise.race([page.evaluate(`(async () => { const client = await import('/client/index.js'); ${body} })()`) as Promise<T>, stalled]);
  } finally {
    limit.abort();
  }
}

function requests(gw: TestGateway, path: string): Record<string, unknown>[] {
  return logLines(gw).filter((line) => line.msg === 'request' && line.path === path);
}

test('in Chromium, with a pair minted by the backend: sign, roles, allRoles and a JSON POST through a proxied route', browserSuite(), async (t) => {
  const { gw, backend, originA, browser } = await setUp(t);
  const pair = await signIn(gw);
  const expectedRecord = await call(`${gw.url}/api/sign?address=${ADDRESS}`, { token: pair.accessToken });
  const expectedPage = await call(`${gw.url}/api/roles?page=1&limit=3`, { token: pair.accessToken });
  const expectedAll = await call(`${gw.url}/api/roles?page=1&limit=100`, { token: pair.accessToken });

  const page = await openPage(browser, originA);
  const result = await inPage<Record<string, any>>(page, `
    const gateway = new client.GatewayClient({ baseUrl: ${JSON.stringify(gw.url)}, credentials: ${JSON.stringify(pair)} });
    const record = await gateway.sign(${JSON.stringify(ADDRESS)});
    const page = await gateway.roles({ page: 1, limit: 3 });
    const all = [];
    for await (const role of gateway.allRoles({ limit: 2 })) all.push(role);
    const res = await gateway.fetch('/orders/new', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sku: 'A1', qty: 2 }) });
    return { record, page, all, status: res.status, echoed: await res.json(), inBrowser: typeof window === 'object' };
  `);
  assert.equal(result.inBrowser, true);
  assert.deepEqual(result.record, expectedRecord.body.message);
  assert.deepEqual(result.page, expectedPage.body.message);
  assert.deepEqual(result.all, expectedAll.body.message.items);
  assert.equal(result.status, 200);
  assert.equal(result.echoed.method, 'POST');
  assert.equal(result.echoed.url, '/orders/new');
  assert.equal(result.echoed.bodyBytes, JSON.stringify({ sku: 'A1', qty: 2 }).length);
  const received = backend.received.at(-1)!;
  assert.deepEqual(received.headers['content-type'], ['application/json']);
  // The pair came with the credentials: the page neither signed in nor refreshed.
  assert.equal(requests(gw, '/api/signin').length, 1);
  assert.equal(requests(gw, '/api/refresh').length, 0);
});

test('in Chromium, signOut revokes the pair across origins (a simple CORS request) and forgets it', browserSuite(), async (t) => {
  const { gw, originA, browser } = await setUp(t);
  const pair = await signIn(gw);
  const page = await openPage(browser, originA);
  const result = await inPage<Record<string, any>>(page, `
    const gateway = new client.GatewayClient({ baseUrl: ${JSON.stringify(gw.url)}, credentials: ${JSON.stringify(pair)} });
    await gateway.roles({ limit: 1 });
    await gateway.signOut();
    const after = await gateway.roles({ limit: 1 }).then(() => 'answered', (err) => err.name);
    return { after };
  `);
  assert.equal(result.after, 'AuthenticationError', 'with a handed-over pair the session is over');
  assert.equal((await call(`${gw.url}/api/roles`, { token: pair.accessToken })).status, 401, 'the access token is revoked');
  assert.equal((await postJson(`${gw.url}/api/refresh`, { refreshToken: pair.refreshToken })).status, 401, 'the family is over');
  assert.equal(requests(gw, '/api/revoke').length, 2);
});

test('in Chromium, with dpop: true the refresh binds the tokens to a non-extractable key, and calls carry proofs', browserSuite(), async (t) => {
  const { gw, backend, originA, browser } = await setUp(t);
  const { refreshToken } = await signIn(gw);
  const page = await openPage(browser, originA);
  // The proofs' iat is the browser's clock; the gateway's stands still, set a little ahead of it.
  gw.clock.advance(Date.now() + 20_000 - gw.clock.now());
  const result = await inPage<Record<string, any>>(page, `
    const gateway = new client.GatewayClient({ baseUrl: ${JSON.stringify(gw.url)}, credentials: { refreshToken: ${JSON.stringify(refreshToken)} }, dpop: true });
    const roles = await gateway.roles({ page: 1, limit: 2 });
    const res = await gateway.fetch('/orders/7');
    const token = await gateway.accessToken();
    const bare = await fetch(${JSON.stringify(`${gw.url}/api/roles`)}, { headers: { authorization: 'Bearer ' + token } });
    return { items: roles.items.length, status: res.status, payload: JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))), bare: bare.status };
  `);
  assert.equal(result.items, 2);
  assert.equal(result.status, 200);
  assert.equal(typeof result.payload.cnf?.jkt, 'string', 'the refreshed token is bound to the page\'s key');
  assert.deepEqual(backend.received.at(-1)!.headers['x-dpop-jkt'], [result.payload.cnf.jkt]);
  assert.equal(result.bare, 401, 'the token alone, as a bearer token, is refused');
});

test('in Chromium, an access token the gateway refuses as expired is renewed with the refresh token and the call replayed', browserSuite(), async (t) => {
  const { gw, originA, browser } = await setUp(t);
  const pair = await signIn(gw);
  const page = await openPage(browser, originA);
  const first = await inPage<{ did: string }>(page, `
    globalThis.gateway = new client.GatewayClient({ baseUrl: ${JSON.stringify(gw.url)}, credentials: ${JSON.stringify(pair)} });
    return await gateway.sign(${JSON.stringify(ADDRESS)});
  `);
  assert.equal(first.did, ADDRESS);
  // The gateway's clock passes the access token's lifetime (900 s) and its skew allowance; the
  // page's does not, so only the gateway's 401 invalid_token can tell the client.
  gw.clock.advance(3_600_000);
  const stale = await call(`${gw.url}/api/sign?address=${ADDRESS}`, { token: pair.accessToken });
  assert.equal(stale.status, 401);
  const second = await inPage<{ did: string; token: string }>(page, `
    const record = await gateway.sign(${JSON.stringify(ADDRESS)});
    return { did: record.did, token: await gateway.accessToken() };
  `);
  assert.equal(second.did, ADDRESS);
  assert.notEqual(second.token, pair.accessToken);
  assert.equal(requests(gw, '/api/refresh').filter((l) => l.status === 200).length, 1);
  assert.equal(requests(gw, '/api/sign').filter((l) => l.status === 401).length, 2, 'the test\'s own call and the page\'s first attempt');
});

test('in Chromium, with a 2 s token lifetime the client renews before expiry, from the token\'s exp, with no 401 on the way', browserSuite(), async (t) => {
  // The gateway's clock stands still, so its tokens never expire there: only the client's own
  // schedule (renew when less than half the lifetime is left) can cause a refresh.
  const { gw, originA, browser } = await setUp(t, { tokens: { memoryStoreMaxTokens: 10_000, accessTokenTtlSeconds: 2 } });
  const { refreshToken } = await signIn(gw);
  const page = await openPage(browser, originA);
  const tokens = await inPage<string[]>(page, `
    const gateway = new client.GatewayClient({ baseUrl: ${JSON.stringify(gw.url)}, credentials: { refreshToken: ${JSON.stringify(refreshToken)} } });
    await gateway.sign(${JSON.stringify(ADDRESS)});
    const seen = [await gateway.accessToken()];
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    await gateway.sign(${JSON.stringify(ADDRESS)});
    seen.push(await gateway.accessToken());
    return seen;
  `);
  // The first refresh got the page its first access token; the second renewed it, due by then.
  assert.notEqual(tokens[0], tokens[1]);
  assert.equal(requests(gw, '/api/refresh').filter((l) => l.status === 200).length, 2);
  assert.equal(requests(gw, '/api/sign').filter((l) => l.status !== 200).length, 0);
});

/**
 * Two tabs of origin A sharing localStorage as the storage hook, both needing a renewal at
 * once (their pair has no access token). The refresh is slowed in the page so that both are
 * inside their renewal together: with the Web Lock the second tab waits, re-reads storage and
 * adopts the first tab's pair; without it each tab spends the refresh token.
 */
async function twoTabs(t: TestContext, crossTabLock: boolean): Promise<{ refreshes: number; dids: string[]; lockRequests: number }> {
  const { gw, originA, browser } = await setUp(t);
  const { refreshToken } = await signIn(gw);
  // The second tab is opened by the first (window.open), as a link with target=_blank does, so
  // Chromium keeps both in one renderer process. Between unrelated tabs (two processes) a
  // localStorage write reaches the other tab's reads only after a moment: under load the
  // second tab could re-read a stale storage inside the lock and spend the same refresh token
  // (harmless at the gateway, whose grace window answers it with the same pair, but a second
  // /api/refresh that this test counts).
  const first = await openPage(browser, originA);
  const [second] = await Promise.all([browser.waitForEvent('page'), first.evaluate(`void window.open('${originA}/', '_blank')`)]);
  await second.waitForLoadState('load');
  const tabs = [first, second];
  // Each tab first loads the module and builds its client (counting the Web Lock requests it
  // makes), so that the two renewals below start together rather than a module load apart.
  const prepare = `
    const request = navigator.locks.request.bind(navigator.locks);
    globalThis.lockRequests = 0;
    navigator.locks.request = (...args) => { globalThis.lockRequests += 1; return request(...args); };
    const storage = {
      load: () => JSON.parse(localStorage.getItem('gateway-pair') ?? 'null') ?? undefined,
      save: (pair) => pair ? localStorage.setItem('gateway-pair', JSON.stringify(pair)) : localStorage.removeItem('gateway-pair'),
    };
    const slowRefresh = async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.endsWith('/api/refresh')) await new Promise((resolve) => setTimeout(resolve, 500));
      return fetch(input, init);
    };
    globalThis.gateway = new client.GatewayClient({
      baseUrl: ${JSON.stringify(gw.url)}, credentials: { refreshToken: ${JSON.stringify(refreshToken)} },
      storage, fetch: slowRefresh, crossTabLock: ${crossTabLock},
    });
  `;
  for (const tab of tabs) await inPage(tab, prepare);
  const dids = await Promise.all(tabs.map((tab) => tab.evaluate(`gateway.sign(${JSON.stringify(ADDRESS)}).then((record) => record.did)`) as Promise<string>));
  const counts = await Promise.all(tabs.map((tab) => tab.evaluate('globalThis.lockRequests') as Promise<number>));
  return { refreshes: requests(gw, '/api/refresh').length, dids, lockRequests: counts[0]! + counts[1]! };
}

test('in Chromium, two tabs sharing localStorage as storage renew through one refresh (Web Locks)', browserSuite(), async (t) => {
  const { refreshes, dids, lockRequests } = await twoTabs(t, true);
  assert.deepEqual(dids, [ADDRESS, ADDRESS]);
  assert.equal(refreshes, 1, 'one /api/refresh on the gateway\'s access log');
  assert.equal(lockRequests, 2, 'each tab asked for the lock once');
});

test('in Chromium, the same two tabs with crossTabLock: false each refresh (what the lock saves)', browserSuite(), async (t) => {
  const { refreshes, dids, lockRequests } = await twoTabs(t, false);
  assert.deepEqual(dids, [ADDRESS, ADDRESS]);
  assert.equal(refreshes, 2);
  assert.equal(lockRequests, 0);
});

test('in Chromium, a page on an origin the gateway does not allow gets NetworkError (CORS refused)', browserSuite(), async (t) => {
  const { gw, backend, originC, browser } = await setUp(t);
  const pair = await signIn(gw);
  const page = await openPage(browser, originC);
  const result = await inPage<Record<string, unknown>>(page, `
    const gateway = new client.GatewayClient({ baseUrl: ${JSON.stringify(gw.url)}, credentials: ${JSON.stringify(pair)}, retry: false });
    const outcome = {};
    for (const [name, attempt] of [['sign', () => gateway.sign(${JSON.stringify(ADDRESS)})], ['fetch', () => gateway.fetch('/orders/1')]]) {
      try { await attempt(); outcome[name] = 'answered'; }
      catch (err) { outcome[name] = { isNetworkError: err instanceof client.NetworkError, code: err.code, name: err.name }; }
    }
    return outcome;
  `);
  for (const name of ['sign', 'fetch']) {
    assert.deepEqual(result[name], { isNetworkError: true, code: 'network_error', name: 'NetworkError' }, `${name}: ${JSON.stringify(result[name])}`);
  }
  assert.equal(backend.received.length, 0);
  // What the browser met: the gateway refuses this origin's preflight, and the call never went.
  const preflight = await fetch(`${gw.url}/api/sign?address=${ADDRESS}`, {
    method: 'OPTIONS', headers: { origin: originC, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
  });
  assert.equal(preflight.status, 403);
  assert.equal(preflight.headers.get('access-control-allow-origin'), null);
  assert.equal(logLines(gw).filter((l) => l.msg === 'request' && l.method === 'GET').length, 0, 'no GET reached the gateway');
});

test('in Chromium, the constructor refuses an API key and secret (or a settings token) unless dangerouslyAllowBrowser', browserSuite(), async (t) => {
  const { gw, originA, browser } = await setUp(t);
  const page = await openPage(browser, originA);
  const result = await inPage<Record<string, unknown>>(page, `
    const baseUrl = ${JSON.stringify(gw.url)};
    const attempt = (options) => { try { new client.GatewayClient(options); return 'constructed'; } catch (err) { return err instanceof client.ConfigurationError ? 'ConfigurationError' : String(err); } };
    const optedIn = new client.GatewayClient({ baseUrl, credentials: { apiKey: 'ak_demo_alice', apiSecret: 'sk_demo_alice_secret' }, dangerouslyAllowBrowser: true });
    return {
      key: attempt({ baseUrl, credentials: { apiKey: 'ak_demo_alice', apiSecret: 'sk_demo_alice_secret' } }),
      settingsToken: attempt({ baseUrl, credentials: { settingsToken: 'gwst_x' } }),
      refreshToken: attempt({ baseUrl, credentials: { refreshToken: 'r' } }),
      optedIn: (await optedIn.sign(${JSON.stringify(ADDRESS)})).did,
    };
  `);
  assert.deepEqual(result, { key: 'ConfigurationError', settingsToken: 'ConfigurationError', refreshToken: 'constructed', optedIn: ADDRESS });
  // Opted in, the page hashed the secret with Web Crypto and signed in.
  assert.equal(requests(gw, '/api/signin').filter((l) => l.status === 200).length, 1);
});
