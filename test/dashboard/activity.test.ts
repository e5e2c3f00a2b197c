/**
 * The Activity page against a real gateway: calls made with alice's demo key, an API settings
 * token and a key deleted since (some refused by a per-key quota), counted by the gateway,
 * flushed, and shown per key with the names the account gives them; bob's calls stay on his
 * account. The audit log shows the changes made in the test newest first, with who made them,
 * paged. Empty states before anything happened; axe, screenshots, and a phone-sized screen.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { call, DEMO, show, signIn, type TestGateway } from '../helpers/gateway.js';
import { operator, signIn as ownerSignIn, type Client } from '../helpers/owner.js';
import { assertNoSidewaysScroll, browserSuite, checkAccessibility, OWNERS, PHONE, screenshot, startDashboard } from '../helpers/dashboard.js';

const ACCOUNT = OWNERS.alice.accountId;
/** Per key and route: 3 calls a minute admitted (the account's own quota out of the way). */
// Quotas on, to show rate-limited calls; the owner's own changes are not limited here (the test
// makes a page and more of audit events in a burst; test/http/owner-write-limits.test.ts tests those).
const LIMITS = { mode: 'enforce', calls: { perAccount: [], perKey: [{ limit: 3, seconds: 60 }] }, owner: { perOwner: [], perAccount: [] } };

interface KeyUsage { keyId: string; requests: number; rateLimited: number; statuses: Record<string, number> }

/** A key's counts as the owner API answers them: the classes of status not named are 0. */
function counted(keyId: string, requests: number, rateLimited: number, statuses: Record<string, number>): KeyUsage {
  return { keyId, requests, rateLimited, statuses: { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, ...statuses } };
}

/** The text of each body row's cells. */
async function rowsOf(table: Locator): Promise<string[][]> {
  const rows = await table.locator('tbody tr').all();
  return Promise.all(rows.map(async (row) => (await row.locator('td').allTextContents()).map((text) => text.replace(/\s+/g, ' ').trim())));
}

async function statuses(gw: TestGateway, path: string, token: string, times: number): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < times; i++) seen.push((await call(`${gw.url}${path}`, { token })).status);
  return seen;
}

/** Waits until the usage the owner API reports (flushed every 100 ms here) is `expected`. */
async function flushed(owner: Client, expected: KeyUsage[]): Promise<void> {
  const byId = (items: KeyUsage[]) => [...items].sort((a, b) => (a.keyId < b.keyId ? -1 : 1));
  const sorted = byId(expected);
  let last: KeyUsage[] = [];
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(50)) {
    // An owner's session: each admin token presented counts as a sign-in, which the limits here restrict.
    const res = await owner.get(`/accounts/${ACCOUNT}/usage?hours=1`);
    assert.equal(res.status, 200, show(res));
    last = byId(res.body.message.items);
    if (JSON.stringify(last) === JSON.stringify(sorted)) return;
  }
  assert.deepEqual(last, sorted, 'the counts reached the usage store');
}

async function openActivity(page: Page): Promise<void> {
  await page.getByRole('navigation', { name: /^Account/ }).getByRole('link', { name: 'Activity' }).click();
  await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
}

test('activity: per-key calls and rate-limited calls, named; the audit log newest first with who and what, paged', browserSuite(), async (t) => {
  const dash = await startDashboard(t, { overrides: { usage: { flushIntervalMs: 100 }, limits: LIMITS } });
  const { gw } = dash;
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await openActivity(page);

  // Nothing happened yet: both parts say so.
  const usage = page.getByRole('region', { name: 'Usage' });
  await usage.getByText('No calls in the last 24 hours.').waitFor();
  const audit = page.getByRole('region', { name: 'Audit log' });
  await audit.getByText('Nothing has been changed in this account yet.').waitFor();
  assert.equal(await usage.getByLabel('Window', { exact: true }).inputValue(), '24', 'the last 24 hours unless asked');
  await checkAccessibility(page, 'activity, empty');

  // Calls: alice's demo key (4 proxied, the 4th past the quota; 2 /api/roles), a settings token
  // (2 proxied), a key deleted afterwards (1), and bob's key on his own account.
  const alice = await ownerSignIn(gw, OWNERS.alice.email, OWNERS.alice.password);
  const { accessToken } = await signIn(gw, DEMO.alice);
  assert.deepEqual(await statuses(gw, '/things/a', accessToken, 4), [200, 200, 200, 429]);
  assert.deepEqual(await statuses(gw, '/api/roles', accessToken, 2), [200, 200]);
  const made = await alice.send('POST', `/accounts/${ACCOUNT}/settings-tokens`, { name: 'reporting' });
  assert.equal(made.status, 201, show(made));
  const stk = made.body.message as { token: string; settingsToken: { id: string } };
  assert.deepEqual(await statuses(gw, '/things/b', stk.token, 2), [200, 200]);
  const created = await alice.send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'short-lived' });
  assert.equal(created.status, 201, show(created));
  const gone = created.body.message as { key: { id: string; apiKey: string }; apiSecret: string };
  const goneTokens = await signIn(gw, { apiKey: gone.key.apiKey, secret: gone.apiSecret });
  assert.deepEqual(await statuses(gw, '/api/roles', goneTokens.accessToken, 1), [200]);
  assert.equal((await operator(gw).send('DELETE', `/accounts/${ACCOUNT}/keys/${gone.key.id}`)).status, 200);
  const bob = await signIn(gw, DEMO.bob);
  assert.deepEqual(await statuses(gw, '/things/c', bob.accessToken, 1), [200]);
  const role = await alice.send('POST', `/accounts/${ACCOUNT}/roles`, { id: 42, slug: 'night-auditor', name: 'Night auditor', description: 'Reads the night reports.', public: false });
  assert.equal(role.status, 201, show(role));
  await flushed(alice, [
    counted(DEMO.alice.keyId, 5, 1, { '2xx': 5, '4xx': 1 }),
    counted(stk.settingsToken.id, 2, 0, { '2xx': 2 }),
    counted(gone.key.id, 1, 0, { '2xx': 1 }),
  ]);

  // The window chooser: kept in the URL.
  await usage.getByLabel('Window', { exact: true }).selectOption({ label: 'Last hour' });
  await usage.getByRole('button', { name: 'Show' }).click();
  await page.waitForURL((url) => url.searchParams.get('hours') === '1');
  const calls = page.getByRole('table', { name: 'Calls per key in the last hour' });
  await calls.waitFor();
  assert.deepEqual(await rowsOf(calls), [
    [`ak_demo_alice ${DEMO.alice.keyId}`, 'API key', '5', '1', '2xx: 5, 4xx: 1'],
    [`reporting ${stk.settingsToken.id}`, 'API settings token', '2', '0', '2xx: 2'],
    [`${gone.key.id} (deleted)`, 'API key', '1', '0', '2xx: 1'],
  ]);
  assert.doesNotMatch(await usage.innerText(), new RegExp(DEMO.bob.keyId), 'bob\'s key is not on alice\'s account');
  await usage.getByText(/^From .+ to .+, by hour\.$/).waitFor();
  assert.match(await usage.innerText(), /flushed every few seconds and summed over every gateway instance sharing Redis/);

  // The audit log: the role created last on top, by alice (named by email), with what it holds;
  // below it the key deleted by the operator, named by id now that its name is gone.
  const log = page.getByRole('table', { name: 'Audit log, newest first' });
  const events = await rowsOf(log);
  assert.deepEqual(events.map((row) => row.slice(1, 4)), [
    [OWNERS.alice.email, 'Role created', 'Role 42'],
    ['Operator', 'API key deleted', `API key ${gone.key.id}`],
    [OWNERS.alice.email, 'API key created', `API key ${gone.key.id}`],
    [OWNERS.alice.email, 'API settings token created', `API settings token reporting ${stk.settingsToken.id}`],
  ]);
  const [, , , , address, changes] = events[0]!;
  assert.match(address!, /127\.0\.0\.1/);
  assert.match(changes!, /name: Night auditor/);
  assert.match(changes!, /slug: night-auditor/);
  assert.match(events[1]![5]!, /name: was short-lived/);
  await checkAccessibility(page, 'activity');
  await screenshot(page, 'activity');

  // On a phone: the page does not scroll sideways (the tables scroll inside their regions).
  const phone = await dash.newPage({ viewport: PHONE });
  await dash.signInAsOwner(phone, 'alice');
  await phone.goto(`${dash.url}/accounts/${ACCOUNT}/activity?hours=1`);
  await phone.getByRole('table', { name: 'Calls per key in the last hour' }).waitFor();
  await phone.getByRole('table', { name: 'Audit log, newest first' }).waitFor();
  await assertNoSidewaysScroll(phone, 'activity on a phone');
  await screenshot(phone, 'phone-activity');

  // Enough changes for a second page: it holds the oldest event, and the window stays as chosen.
  for (let i = 0; i < 22; i++) {
    const res = await alice.send('POST', `/accounts/${ACCOUNT}/roles`, { id: 200 + i, slug: `filler-${i}`, name: `Filler ${i}`, description: '', public: false });
    assert.equal(res.status, 201, show(res));
  }
  await page.reload();
  await log.waitFor();
  const first = await rowsOf(log);
  assert.equal(first.length, 25, 'one page of events');
  assert.deepEqual(first[0]!.slice(1, 4), [OWNERS.alice.email, 'Role created', 'Role 221']);
  await page.getByRole('navigation', { name: 'Audit log pages' }).getByRole('link', { name: 'Next page' }).click();
  await page.waitForURL((url) => url.searchParams.has('cursor') && url.searchParams.get('hours') === '1');
  // Only a later page links back to the first: the page has been drawn again.
  await page.getByRole('link', { name: 'First page' }).waitFor();
  const older = await rowsOf(log);
  assert.equal(older.length, 1);
  assert.deepEqual(older[0]!.slice(1, 4), [OWNERS.alice.email, 'API settings token created', `API settings token reporting ${stk.settingsToken.id}`]);
  assert.match(older[0]![5]!, /name: reporting/);
  await page.getByRole('link', { name: 'First page' }).click();
  await page.waitForURL((url) => !url.searchParams.has('cursor'));
  await page.getByRole('link', { name: 'First page' }).waitFor({ state: 'detached' });
  // The link goes as the page starts drawing again; the rows come once the events are read.
  await log.locator('tbody tr').nth(24).waitFor();
  assert.equal((await rowsOf(log)).length, 25);
});

test('activity: a window the owner API refuses shows its message; an account of no calls in the hour says so', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'bob');
  await page.goto(`${dash.url}/accounts/${OWNERS.bob.accountId}/activity?hours=99`);
  await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
  const usage = page.getByRole('region', { name: 'Usage' });
  const refused = usage.getByRole('alert');
  await refused.waitFor();
  assert.match(await refused.innerText(), /hours/i, 'the owner API\'s sentence about the window');
  await usage.getByRole('button', { name: 'Try again' }).waitFor();

  await usage.getByLabel('Window', { exact: true }).selectOption({ label: 'Last hour' });
  await usage.getByRole('button', { name: 'Show' }).click();
  await usage.getByText('No calls in the last hour.').waitFor();
  assert.equal(new URL(page.url()).searchParams.get('hours'), '1');
});

test('activity: a gateway that counts nothing (usage.enabled off) says so instead of "no calls"', browserSuite(), async (t) => {
  const dash = await startDashboard(t, { overrides: { usage: { enabled: false } } });
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  const { accessToken } = await signIn(dash.gw, DEMO.alice);
  assert.deepEqual(await statuses(dash.gw, '/things/a', accessToken, 1), [200]);
  await openActivity(page);
  const usage = page.getByRole('region', { name: 'Usage' });
  await usage.getByText('This gateway does not count calls (its usage.enabled setting is off), so there is nothing to show.').waitFor();
  assert.equal(await usage.getByText(/No calls/).count(), 0);
});
