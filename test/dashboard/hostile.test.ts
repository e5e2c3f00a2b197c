/**
 * The dashboard in Chromium as an attacker meets it (issue 16, the hostile pass): markup, script
 * and bidi controls written through every field an owner or operator can write show as text and
 * run nothing; a 4096-character word does not widen the page; a page of another origin (another
 * port of 127.0.0.1) can neither change anything with the owner's cookie nor frame the dashboard;
 * secrets and the admin token do not outlive their place (DOM, history, storage, URLs, logs);
 * links with `next` or an address of "." and ".." lead nowhere else; a proxy answering garbage
 * or slowly gives each page its error state. Plain-HTTP attacks are in hostile-http.test.ts.
 */
import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import type { Page } from 'playwright-core';
import { ADMIN_TOKEN, browserSuite, OWNERS, PHONE, startDashboard, type Dashboard } from '../helpers/dashboard.js';
import { logLines, show } from '../helpers/gateway.js';
import { operator } from '../helpers/owner.js';

const ACCOUNT = OWNERS.alice.accountId;
/** Each sets window.pwned if it ever runs. */
const MARKUP = '<img src=x onerror="window.pwned=1">';
const SCRIPT = '</script><script>window.pwned=2</script>';
const SVG = '<svg onload="window.pwned=3"></svg>';
const LONG_WORD = 'W'.repeat(4096);

async function noHorizontalScroll(page: Page, what: string): Promise<void> {
  const [scroll, width] = await page.evaluate('[document.documentElement.scrollWidth, window.innerWidth]') as [number, number];
  assert.ok(scroll <= width, `${what}: the page does not scroll sideways (${scroll} > ${width})`);
}

/** Nothing ran, nothing became an element: the payloads are text in the page. */
async function inert(page: Page, what: string, shown: string[]): Promise<void> {
  assert.equal(await page.evaluate('window.pwned'), undefined, `${what}: no payload ran`);
  assert.equal(await page.evaluate('document.querySelectorAll("main img, main svg, main script, header img, header script").length'), 0, `${what}: no payload became an element`);
  const text = await page.evaluate('document.body.innerText') as string;
  for (const payload of shown) assert.ok(text.includes(payload), `${what}: ${payload.slice(0, 60)} shows as text`);
  await noHorizontalScroll(page, what);
}

async function seed(dash: Dashboard): Promise<{ keyId: string; roleId: number }> {
  const op = operator(dash.gw);
  const ok = (res: { status: number }, what: string, status = 201) => assert.equal(res.status, status, `${what}: ${show(res as never)}`);
  ok(await op.send('PATCH', `/accounts/${ACCOUNT}`, { name: `${MARKUP} ${LONG_WORD.slice(0, 60)}` }), 'account name', 200);
  const key = await op.send('POST', `/accounts/${ACCOUNT}/keys`, { name: SCRIPT, description: `${SVG} ${LONG_WORD.slice(0, 4000)}`, scopes: [] });
  ok(key, 'key');
  const role = { id: 77, slug: 'x'.repeat(256), name: MARKUP, description: `${SCRIPT} ${LONG_WORD.slice(0, 4000)}`, public: true };
  ok(await op.send('POST', `/accounts/${ACCOUNT}/roles`, role), 'role');
  ok(await op.send('POST', `/accounts/${ACCOUNT}/settings-tokens`, { name: SVG }), 'settings token');
  // A change, so the audit log holds the payloads as before and after values.
  ok(await op.send('PATCH', `/accounts/${ACCOUNT}/keys/${key.body.message.key.id}`, { name: MARKUP, description: LONG_WORD }), 'key edit', 200);
  return { keyId: key.body.message.key.id as string, roleId: 77 };
}

test('markup and script in every field an owner writes show as text, run nothing, and long words do not widen the page', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const { keyId, roleId } = await seed(dash);
  const page = await dash.newPage({ viewport: PHONE });
  await dash.signInAsOwner(page);
  const visit = async (path: string, h1: string | RegExp, shown: string[]) => {
    await page.goto(`${dash.url}/accounts/${ACCOUNT}${path}`);
    await page.getByRole('heading', { level: 1, name: h1 }).waitFor();
    await page.waitForLoadState('networkidle');
    await inert(page, path === '' ? 'account' : path, shown);
  };
  await visit('', /.*/, [MARKUP]);
  await visit('/roles', 'Roles', [MARKUP]);
  await visit(`/roles/${roleId}`, /.*/, []);
  await visit('/keys', 'API keys', [MARKUP]);
  await visit(`/keys/${keyId}`, /.*/, [MARKUP]);
  await visit('/settings-tokens', 'API settings tokens', [SVG]);
  await visit('/activity', 'Activity', [SCRIPT]);
  await page.goto(`${dash.url}/accounts`);
  await page.getByRole('heading', { level: 1 }).waitFor();
  await inert(page, 'accounts', [MARKUP]);
});

/**
 * Whether `later` is drawn after `earlier` (further right on the same line, or on a line below)
 * in the first element of `selector` holding both: the reading order as shown, not as stored.
 */
async function drawnInOrder(page: Page, selector: string, earlier: string, later: string): Promise<boolean> {
  // A string, not a function: the test's compiler would name the inner function with a helper the page lacks.
  return page.evaluate(`(() => {
    const [selector, earlier, later] = ${JSON.stringify([selector, earlier, later])};
    const holder = [...document.querySelectorAll(selector)].find((e) => e.textContent.includes(earlier) && e.textContent.includes(later));
    if (holder === undefined) throw new Error('no ' + selector + ' holds ' + earlier + ' and ' + later);
    const rect = (needle) => {
      const walker = document.createTreeWalker(holder, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
        const at = node.textContent.indexOf(needle);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + needle.length);
        return range.getBoundingClientRect();
      }
      throw new Error(needle + ' is not in one text node');
    };
    const [a, b] = [rect(earlier), rect(later)];
    // On a later line, or on the same line further right.
    return b.top >= a.bottom - 1 || (Math.abs(a.top - b.top) < 2 && a.left < b.left);
  })()`) as Promise<boolean>;
}

test('a bidi override in a description does not turn the rest of an audit line around', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  // The owner API refuses bidi controls in every text field now, but data written before it (or
  // by hand in the data file) may hold one: written here behind the API.
  const key = await op.send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'spoof', description: 'OLD' });
  assert.equal(key.status, 201, show(key));
  const keyId = key.body.message.key.id as string;
  await dash.gw.services.ownerStore.updateAccount(ACCOUNT, (doc) => ({
    doc: { ...doc, apiKeys: doc.apiKeys.map((k) => (k.id === keyId ? { ...k, description: 'OLD\u202Eevil' } : k)) },
    events: [],
    result: undefined,
  }));
  const edit = await op.send('PATCH', `/accounts/${ACCOUNT}/keys/${key.body.message.key.id}`, { description: 'NEW' });
  assert.equal(edit.status, 200, show(edit));
  const page = await dash.newPage();
  await dash.signInAsOwner(page);
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/activity`);
  await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
  // The change line itself: getByText('NEW') matched any "new" on the page (case-insensitive),
  // before the activity list had loaded.
  await page.locator('ul.changes li', { hasText: '→' }).filter({ hasText: 'NEW' }).first().waitFor();
  // Before the change, then the arrow, then after: as written, left to right.
  assert.ok(await drawnInOrder(page, 'ul.changes li', 'OLD', '→'), 'the old value left of the arrow');
  assert.ok(await drawnInOrder(page, 'ul.changes li', '→', 'NEW'), 'the new value right of the arrow, whatever the old one held');
});

test('a page of another origin cannot change anything with the owner\'s cookie', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwner(page);
  const api = `${dash.gw.url}/owner/v1/accounts/${ACCOUNT}`;
  // Another origin (another port of 127.0.0.1: same site, so SameSite cookies go along) whose
  // page tries every request a page can make without the gateway's CORS consent.
  const evil = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<!doctype html><body>
      <form id="reset" method="post" action="${api}/reset" target="sink"></form>
      <form id="key" method="post" action="${api}/keys" enctype="text/plain" target="sink2"><input name='{"name":"csrf-form","x":"' value='"}'></form>
      <iframe name="sink"></iframe><iframe name="sink2"></iframe>
      <iframe name="framed" src="${dash.url}/accounts/${ACCOUNT}/keys"></iframe>
      <script>
        const sent = [
          fetch(${JSON.stringify(`${api}/keys`)}, { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ name: 'csrf-fetch' }) }),
          fetch(${JSON.stringify(`${api}/keys`)}, { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'csrf-json' }) }),
          fetch(${JSON.stringify(`${dash.gw.url}/owner/v1/session`)}, { method: 'DELETE', credentials: 'include' }),
          fetch(${JSON.stringify(`${dash.gw.url}/owner/v1/session`)}, { credentials: 'include' }).then((r) => r.text()).then((text) => { window.read = text; }),
        ].map((p) => p.then(() => 'sent', (e) => 'refused'));
        document.getElementById('reset').submit();
        document.getElementById('key').submit();
        Promise.all(sent).then((outcomes) => { window.outcomes = outcomes; });
      </script></body>`);
  });
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
  t.after(() => evil.close());
  const evilPage = await page.context().newPage();
  await evilPage.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
  await evilPage.waitForFunction('window.outcomes !== undefined');
  await evilPage.waitForLoadState('networkidle');
  assert.equal(await evilPage.evaluate('window.read'), undefined, 'the session could not be read across origins');
  // Framed (for clickjacking), the dashboard does not draw: the browser refuses to show it.
  const framed = evilPage.frames().filter((frame) => frame.name() === 'framed');
  assert.equal(framed.length, 1, 'the dashboard\'s frame is there');
  assert.ok(!framed[0]!.url().startsWith(dash.url), `the frame holds no dashboard page: ${framed[0]!.url()}`);
  // The forms and the no-cors fetch did reach the gateway (a test of nothing otherwise), refused.
  const posts = logLines(dash.gw).filter((line) => line.method === 'POST' && /\/(reset|keys)$/.test(String(line.path)));
  assert.ok(posts.length >= 3, `the cross-origin posts arrived: ${JSON.stringify(posts)}`);
  assert.ok(posts.every((line) => line.status === 403), `and were refused: ${JSON.stringify(posts.map((line) => line.status))}`);

  const op = operator(dash.gw);
  const keys = await op.get(`/accounts/${ACCOUNT}/keys`);
  assert.deepEqual(keys.body.message.items.map((k: { name: string }) => k.name).filter((n: string) => n.startsWith('csrf')), [], 'no key was made');
  const audit = await op.get(`/accounts/${ACCOUNT}/audit`);
  assert.deepEqual(audit.body.message.items.map((e: { action: string }) => e.action), [], `nothing was changed: ${show(audit)}`);
  // And the owner is still signed in: the DELETE of the session did not count.
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys`);
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
});

test('a secret shown once is nowhere after the page is left: DOM, history, storage, title, logs', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwner(page);
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys`);
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await page.getByLabel('Name').fill('leaky');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByRole('region', { name: 'API secret for leaky' }).waitFor();
  const secret = await page.getByLabel('API secret', { exact: true }).inputValue();
  const referers: string[] = [];
  page.on('request', (request) => referers.push(request.headers().referer ?? ''));
  const nowhere = async (what: string) => {
    const places = await page.evaluate(`JSON.stringify([document.documentElement.outerHTML, document.title, location.href, history.state,
      Object.entries(sessionStorage), Object.entries(localStorage),
      [...document.querySelectorAll('input, textarea')].map((f) => f.value)])`) as string;
    assert.ok(!places.includes(secret), `${what}: the secret is not in the page, its URL, history state or storage`);
  };
  // Left by a link in the page (no reload), then come back with Back.
  await page.getByRole('navigation', { name: /^Account/ }).getByRole('link', { name: 'API settings tokens' }).click();
  await page.getByRole('heading', { level: 1, name: 'API settings tokens' }).waitFor();
  await nowhere('after leaving');
  await page.goBack();
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await page.getByRole('link', { name: /leaky|key_/ }).first().waitFor();
  await nowhere('after Back');
  assert.ok(referers.every((referer) => referer === ''), `no Referer on the page's requests: ${referers.join(', ')}`);
  assert.ok(!dash.gw.logs.join('\n').includes(secret), 'the secret is in no log line');
  assert.ok(!dash.gw.logs.join('\n').includes(OWNERS.alice.password), 'nor the password');

  // The admin token: in this tab's sessionStorage only, never in a URL, a Referer or a log line.
  const wrong = 'gwadm_wrongwrongwrongwrongwrongwrongwrong';
  const operatorPage = await dash.newPage();
  const urls: string[] = [];
  operatorPage.on('request', (request) => urls.push(`${request.url()} ${request.headers().referer ?? ''}`));
  await operatorPage.goto(`${dash.url}/sign-in`);
  await operatorPage.getByLabel('Admin token').fill(wrong);
  await operatorPage.getByRole('button', { name: 'Sign in as operator' }).click();
  await operatorPage.getByRole('alert').filter({ hasText: 'not valid' }).waitFor();
  await dash.signInAsOperator(operatorPage);
  for (const section of ['keys', 'activity']) {
    await operatorPage.goto(`${dash.url}/accounts/${ACCOUNT}/${section}`);
    await operatorPage.getByRole('heading', { level: 1 }).waitFor();
    await operatorPage.waitForLoadState('networkidle');
  }
  assert.deepEqual(await operatorPage.evaluate('Object.keys(localStorage)'), [], 'nothing in localStorage');
  for (const token of [ADMIN_TOKEN, wrong]) {
    assert.ok(!urls.some((url) => url.includes(token)), 'no URL or Referer holds an admin token');
    assert.ok(!dash.gw.logs.join('\n').includes(token), 'no log line holds an admin token, right or wrong');
  }
});

test('an address of "." or ".." in a link does not send the page\'s calls to another owner API path', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwner(page);
  for (const address of ['..', '.', '%2e%2E']) {
    const calls: string[] = [];
    const listen = (request: { url(): string; method(): string }) => {
      const url = new URL(request.url());
      if (url.pathname.startsWith('/owner/v1/')) calls.push(`${request.method()} ${url.pathname}`);
    };
    page.on('request', listen);
    await page.goto(`${dash.url}/accounts/${ACCOUNT}/sign-records?address=${address}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
    await page.waitForLoadState('networkidle');
    page.off('request', listen);
    // The session and the account the frame reads; nothing under the account, where the address went.
    assert.deepEqual(calls.filter((c) => c.includes(`/accounts/${ACCOUNT}/`)), [], `?address=${address}: ${calls.join(', ')}`);
    assert.equal(await page.getByRole('button', { name: 'Create record' }).count(), 0, `?address=${address}: no record offered for it`);
  }
});

/**
 * A proxy in front of the gateway, as a misconfigured one answers: what `answer` returns for a
 * path is sent instead of the gateway's answer (undefined: forwarded as it is, Host kept).
 */
async function misconfiguredProxy(t: TestContext, gatewayUrl: string, answer: (path: string) => { status: number; type: string; body: string; delayMs?: number } | undefined): Promise<{ url: string; asked: string[] }> {
  const target = new URL(gatewayUrl);
  const asked: string[] = [];
  const proxy = createServer((req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    asked.push(`${req.method} ${path}`);
    const instead = answer(path);
    if (instead !== undefined) {
      setTimeout(() => {
        res.writeHead(instead.status, { 'content-type': instead.type });
        res.end(instead.body);
      }, instead.delayMs ?? 0);
      return;
    }
    const forwarded = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (upstream) => {
      res.writeHead(upstream.statusCode!, upstream.headers);
      upstream.pipe(res);
    });
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    proxy.closeAllConnections();
    proxy.close(() => resolve());
  }));
  return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, asked };
}

test('a proxy answering garbage or slowly: each page says it could not load, offers Try again, and asks once', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const base = `/owner/v1/accounts/${ACCOUNT}`;
  const proxy = await misconfiguredProxy(t, dash.gw.url, (path) => {
    if (path === `${base}/keys`) return { status: 502, type: 'text/html', body: '<html><body><h1>502 Bad Gateway</h1></body></html>' };
    if (path === `${base}/roles`) return { status: 200, type: 'application/json', body: '{"success":true,"message":{"items":"not a list"}}' };
    if (path === `${base}/settings-tokens`) return { status: 200, type: 'text/html', body: '<html>Sign in to the hotel Wi-Fi</html>' };
    if (path === `${base}/audit`) return { status: 200, type: 'application/json', body: '{"success":true,"message":null}', delayMs: 1500 };
    return undefined;
  });
  // A page of the harness's browser, but at the proxy's origin (the harness page refuses any other).
  const page = await (await dash.newPage()).context().newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) errors.push(message.text());
  });
  await page.goto(`${proxy.url}/dashboard/sign-in`);
  await page.getByLabel('Email').fill(OWNERS.alice.email);
  await page.getByLabel('Password', { exact: true }).fill(OWNERS.alice.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL((url) => !url.pathname.endsWith('/sign-in'));
  for (const [section, h1, api] of [['keys', 'API keys', 'keys'], ['roles', 'Roles', 'roles'], ['settings-tokens', 'API settings tokens', 'settings-tokens'], ['activity', 'Activity', 'audit']] as const) {
    const before = proxy.asked.length;
    await page.goto(`${proxy.url}/dashboard/accounts/${ACCOUNT}/${section}`);
    await page.getByRole('heading', { level: 1 }).first().waitFor();
    const alert = page.getByRole('alert').filter({ hasText: /Could not load this|went wrong/ }).first();
    await alert.waitFor({ timeout: 5000 });
    assert.ok((await alert.innerText()).trim().length > 20, `${section}: says what went wrong`);
    await page.getByRole('button', { name: 'Try again' }).first().waitFor();
    await page.waitForTimeout(500);
    const calls = proxy.asked.slice(before).filter((c) => c === `GET ${base}/${api}`);
    assert.ok(calls.length <= 2, `${section}: asked ${calls.length} times, no loop`);
    assert.ok(await page.getByRole('heading', { level: 1, name: h1 }).count() + await page.getByRole('heading', { level: 1, name: 'Something went wrong' }).count() > 0, `${section}: a heading, not a blank page`);
  }
  assert.deepEqual(errors, [], 'no script error on the way');
});

test('signed out in one tab, a change in another is not made; a planted session cookie is not the session', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const first = await dash.newPage();
  // Session fixation: a cookie chosen beforehand (e.g. by a same-site page) under the session's name.
  const planted = 'planted-by-someone-else';
  const origin = new URL(dash.url).origin;
  await first.context().addCookies([{ name: 'gw_session', value: planted, url: origin }]);
  await dash.signInAsOwner(first);
  const cookies = await first.context().cookies(origin);
  const session = cookies.filter((c) => c.httpOnly);
  assert.ok(session.length > 0, `the gateway set its HttpOnly session cookie: ${cookies.map((c) => c.name).join(', ')}`);
  assert.ok(session.every((c) => c.value !== planted), 'the session is a new value, not the planted one');

  const second = await first.context().newPage();
  await second.goto(`${dash.url}/accounts/${ACCOUNT}/keys`);
  await second.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await second.getByLabel('Name').fill('after-sign-out');

  await first.getByRole('button', { name: 'Sign out' }).click();
  await first.getByRole('status').filter({ hasText: 'You are signed out.' }).waitFor();

  await second.getByRole('button', { name: 'Create key' }).click();
  await second.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  const keys = await operator(dash.gw).get(`/accounts/${ACCOUNT}/keys`);
  assert.ok(!JSON.stringify(keys.body).includes('after-sign-out'), 'the key was not made');
  assert.deepEqual(await second.evaluate('Object.entries(sessionStorage)'), [], 'nothing kept in the tab');
});

test('`next` on sign-in never leaves the dashboard, however it is spelled', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const origin = new URL(dash.url).origin;
  const nexts = [
    '/\\evil.example/', '/dashboard/\\evil.example', '\\\\evil.example', '/%2F%2Fevil.example', '/dashboard/%2F%2Fevil.example',
    '/dashboard/..%2F..%2Fowner/v1/session', '/dashboard/%2e%2e/owner/v1/session', '/dashboard/../owner/v1/session',
    '/dash\tboard//evil.example', '/dashboard/\n//evil.example', ' //evil.example', 'javascript:window.pwned=1', '/dashboard/javascript:window.pwned=1',
    'http:evil.example', `${origin}.evil.example/dashboard/keys`, '/dashboard/accounts/acct_bob?x=1#//evil.example',
  ];
  for (const next of nexts) {
    const page = await dash.newPage();
    await page.goto(`${dash.url}/sign-in?next=${encodeURIComponent(next)}`);
    await page.getByLabel('Email').fill(OWNERS.alice.email);
    await page.getByLabel('Password', { exact: true }).fill(OWNERS.alice.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL((url) => !url.pathname.endsWith('/sign-in'));
    await page.getByRole('heading', { level: 1 }).waitFor();
    const url = new URL(page.url());
    assert.equal(url.origin, origin, `${JSON.stringify(next)}: stays on the gateway`);
    assert.ok(url.pathname.startsWith('/dashboard/'), `${JSON.stringify(next)}: stays in the dashboard (${url.pathname})`);
    assert.equal(await page.evaluate('window.pwned'), undefined);
    await page.context().close();
  }
});
