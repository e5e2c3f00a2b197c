/**
 * The dashboard's tree as the gateway serves it (src/dashboard/serve.ts), over plain HTTP: every
 * page answers the shell with the security headers, assets revalidate with their ETag, every
 * other path under the tree is the 404 envelope, nothing under it ever reaches a backend (even
 * behind a catch-all route), the invite link redirects to the invite page, and the configuration
 * refuses a dashboard path that would overlap the gateway's own paths or a route.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONTENT_SECURITY_POLICY } from '../../src/dashboard/serve.js';
import { PAGES, pagePath, type PageName } from '../../src/dashboard/browser/pages.js';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { startBackend } from '../helpers/backend.js';
import { call, parseRawResponse, rawRequest, show, startGateway, type JsonResponse } from '../helpers/gateway.js';

const PARAMS = { account: 'acct_alice', key: 'key_alice_1', role: '1' };

function assertNotFound(res: JsonResponse, what: string): void {
  assert.equal(res.status, 404, `${what}: ${show(res)}`);
  assert.equal(res.body.success, false, what);
  assert.equal(res.body.message.code, 'not_found', what);
}

async function raw(url: string, path: string, method = 'GET'): Promise<{ status: number; headers: string; body: any }> {
  const { host } = new URL(url);
  return parseRawResponse(await rawRequest(url, `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
}

test('every page answers the shell with the security headers, and no inline script or style', async (t) => {
  const gw = await startGateway(t);
  for (const name of Object.keys(PAGES) as PageName[]) {
    const path = `/dashboard${pagePath(name, PARAMS) === '' ? '' : `/${pagePath(name, PARAMS)}`}`;
    const res = await fetch(`${gw.url}${path}`);
    assert.equal(res.status, 200, path);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8', path);
    assert.equal(res.headers.get('content-security-policy'), CONTENT_SECURITY_POLICY, path);
    assert.equal(res.headers.get('x-frame-options'), 'DENY', path);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer', path);
    const html = await res.text();
    const scripts = [...html.matchAll(/<script\b[^>]*>/gi)].map((m) => m[0]);
    assert.ok(scripts.length > 0, 'the shell loads its script');
    for (const tag of scripts) assert.match(tag, /\ssrc="\/dashboard\/assets\/[^"]+"/, `${path}: ${tag} has a src of the dashboard's`);
    assert.doesNotMatch(html, /<script\b[^>]*>[^<]+<\/script>/i, 'no script body');
    assert.doesNotMatch(html, /<style\b/i, 'no style element');
    assert.doesNotMatch(html, /\sstyle=/i, 'no style attribute');
    assert.doesNotMatch(html, /\son[a-z]+=/i, 'no event handler attribute');
  }
  assert.match(CONTENT_SECURITY_POLICY, /script-src 'self'/);
  assert.match(CONTENT_SECURITY_POLICY, /frame-ancestors 'none'/);
  assert.doesNotMatch(CONTENT_SECURITY_POLICY, /unsafe-inline|unsafe-eval/);
});

test('assets answer with an ETag and a 304 to If-None-Match; other paths under the tree are the 404 envelope', async (t) => {
  const gw = await startGateway(t);
  for (const [asset, type] of [['dashboard.css', 'text/css; charset=utf-8'], ['js/main.js', 'text/javascript; charset=utf-8']] as const) {
    const url = `${gw.url}/dashboard/assets/${asset}`;
    const first = await fetch(url);
    assert.equal(first.status, 200, asset);
    assert.equal(first.headers.get('content-type'), type);
    assert.equal(first.headers.get('content-security-policy'), CONTENT_SECURITY_POLICY);
    const etag = first.headers.get('etag');
    assert.match(etag ?? '', /^"[A-Za-z0-9_-]+"$/);
    assert.ok((await first.arrayBuffer()).byteLength > 0);
    const again = await fetch(url, { headers: { 'if-none-match': etag! } });
    assert.equal(again.status, 304, asset);
    assert.equal((await again.arrayBuffer()).byteLength, 0);
    const other = await fetch(url, { headers: { 'if-none-match': '"something-else"' } });
    assert.equal(other.status, 200);
    await other.arrayBuffer();
  }

  for (const path of ['/dashboard/nope', '/dashboard/accounts/x/nope', '/dashboard/accounts/x/roles/01', '/dashboard/sign-in/x', '/dashboard/assets/js/missing.js', '/dashboard/assets/index.html', '/dashboard/assets/']) {
    assertNotFound(await call(`${gw.url}${path}`), path);
  }
  // Dot segments, raw and percent-encoded (sent as they are: fetch would resolve them first).
  for (const path of ['/dashboard/assets/../../package.json', '/dashboard/assets/%2e%2e/%2e%2e/package.json', '/dashboard/assets/%2E%2E/%2E%2E/package.json', '/dashboard/assets/js/../../../package.json', '/dashboard/assets/.%2e/js/main.js']) {
    const res = await raw(gw.url, path);
    assert.equal(res.status, 404, `${path}: ${res.headers}`);
    assert.equal(res.body.message.code, 'not_found', path);
  }
  // An encoded "/" is refused outright by the gateway's path screening.
  const slash = await raw(gw.url, '/dashboard/assets/..%2f..%2fpackage.json');
  assert.equal(slash.status, 400);
  assert.equal(slash.body.message.code, 'invalid_request');

  // A page takes GET (and HEAD) only.
  const posted = await call(`${gw.url}/dashboard/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(posted.status, 405, show(posted));
  assert.equal(posted.body.message.code, 'method_not_allowed');
  assert.match(posted.headers.get('allow') ?? '', /\bGET\b/);
  const head = await fetch(`${gw.url}/dashboard/sign-in`, { method: 'HEAD' });
  assert.equal(head.status, 200);
});

test('the invite link redirects to the invite page when the dashboard is on, and is the owner API\'s 404 when it is off', async (t) => {
  const on = await startGateway(t);
  const res = await fetch(`${on.url}/owner/invite`, { redirect: 'manual' });
  assert.equal(res.status, 303);
  assert.equal(res.headers.get('location'), '/dashboard/invite');
  await res.arrayBuffer();
  const posted = await call(`${on.url}/owner/invite`, { method: 'POST' });
  assert.equal(posted.status, 405, show(posted));
  assertNotFound(await call(`${on.url}/owner/invites`), '/owner/invites');

  const off = await startGateway(t, { overrides: { dashboard: { enabled: false } } });
  assertNotFound(await call(`${off.url}/owner/invite`, { redirect: 'manual' }), 'dashboard off: /owner/invite');
  assertNotFound(await call(`${off.url}/dashboard`), 'dashboard off: /dashboard');
  assertNotFound(await call(`${off.url}/dashboard/sign-in`), 'dashboard off: /dashboard/sign-in');
});

test('behind a catch-all route nothing under the dashboard reaches the backend; with the dashboard off it is proxied', async (t) => {
  const backend = await startBackend(t);
  const route = { name: 'all', prefix: '/', targets: [backend.url], auth: 'public' };
  const gw = await startGateway(t, { overrides: { routes: [route] } });
  // The route works: another path reaches the backend.
  const control = await call(`${gw.url}/elsewhere`);
  assert.equal(control.status, 200, show(control));
  assert.equal(backend.received.length, 1);
  backend.received.length = 0;

  for (const path of ['/dashboard', '/dashboard/', '/dashboard/sign-in', '/dashboard/nope', '/dashboard/assets/js/main.js', '/dashboard/assets/nope.js', '/owner/invite']) {
    const res = await fetch(`${gw.url}${path}`, { redirect: 'manual' });
    assert.ok([200, 303, 404].includes(res.status), `${path}: ${res.status}`);
    await res.arrayBuffer();
  }
  // Spellings a backend may read as the dashboard's paths are the gateway's too.
  for (const path of ['/DASHBOARD/x', '/Dashboard/sign-in', '/dashboard;x/y', '/dashboard;x', '/dashboard/assets;x/js/main.js']) {
    const res = await raw(gw.url, path);
    assert.ok(res.status >= 400 && res.status < 500, `${path}: ${res.status}`);
  }
  assert.deepEqual(backend.received.map((r) => r.url), [], 'nothing under the dashboard reached the backend');

  const offBackend = await startBackend(t);
  const off = await startGateway(t, { overrides: { dashboard: { enabled: false }, routes: [{ ...route, targets: [offBackend.url] }] } });
  const proxied = await call(`${off.url}/dashboard/sign-in`);
  assert.equal(proxied.status, 200, show(proxied));
  assert.deepEqual(offBackend.received.map((r) => r.url), ['/dashboard/sign-in']);
});

test('a custom dashboard.path serves the dashboard there and only there', async (t) => {
  const gw = await startGateway(t, { overrides: { dashboard: { path: '/admin/ui' } } });
  const page = await fetch(`${gw.url}/admin/ui/accounts/acct_alice/roles`);
  assert.equal(page.status, 200);
  const html = await page.text();
  assert.match(html, /data-base="\/admin\/ui"/);
  assert.match(html, /<script type="module" src="\/admin\/ui\/assets\/js\/main\.js"><\/script>/);
  assert.match(html, /href="\/admin\/ui\/assets\/dashboard\.css"/);
  assert.doesNotMatch(html, /\{\{BASE\}\}|"\/dashboard/);
  const script = await fetch(`${gw.url}/admin/ui/assets/js/main.js`);
  assert.equal(script.status, 200);
  await script.arrayBuffer();
  assertNotFound(await call(`${gw.url}/dashboard`), '/dashboard');
  assertNotFound(await call(`${gw.url}/admin/ui/nope`), '/admin/ui/nope');
  const invite = await fetch(`${gw.url}/owner/invite`, { redirect: 'manual' });
  assert.equal(invite.headers.get('location'), '/admin/ui/invite');
  await invite.arrayBuffer();
});

test('the configuration refuses a dashboard path over the gateway\'s own paths or a route', () => {
  const problemsOf = (overrides: Record<string, unknown>): readonly string[] => {
    try {
      loadConfig({ env: {}, overrides });
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return err.problems;
    }
    assert.fail(`accepted ${JSON.stringify(overrides)}`);
  };
  for (const path of ['/api/ui', '/api', '/owner/ui', '/owner', '/healthz', '/Dashboard', '/dashboard/', '/', 'dashboard', '/dash board', '/dashboard//x']) {
    const problems = problemsOf({ dashboard: { path } });
    assert.ok(problems.some((p) => p.startsWith('dashboard.path')), `${path}: ${JSON.stringify(problems)}`);
  }
  for (const prefix of ['/dashboard', '/dashboard/x']) {
    const problems = problemsOf({ routes: [{ name: 'r', prefix, targets: ['http://127.0.0.1:9'] }] });
    assert.ok(problems.some((p) => p.startsWith('routes.0.prefix')), `${prefix}: ${JSON.stringify(problems)}`);
  }
  // Accepted: beside the dashboard, under a custom path's sibling, or anywhere with it off.
  loadConfig({ env: {}, overrides: { routes: [{ name: 'r', prefix: '/dashboards', targets: ['http://127.0.0.1:9'] }] } });
  loadConfig({ env: {}, overrides: { dashboard: { enabled: false }, routes: [{ name: 'r', prefix: '/dashboard', targets: ['http://127.0.0.1:9'] }] } });
  loadConfig({ env: {}, overrides: { dashboard: { path: '/admin/ui' }, routes: [{ name: 'r', prefix: '/dashboard', targets: ['http://127.0.0.1:9'] }] } });
});
