/**
 * The Roles pages in Chromium against a real gateway: every change made through the pages is
 * checked where clients see it, in /api/roles with an access token of alice's demo key.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { assertNoSidewaysScroll, browserSuite, checkAccessibility, descriptionOf, focusedName, focusedTag, OWNERS, PHONE, screenshot, startDashboard, tabTo } from '../helpers/dashboard.js';
import { call, DEMO, show, signIn, type TestGateway } from '../helpers/gateway.js';
import { operator } from '../helpers/owner.js';

const ALICE = OWNERS.alice.accountId;

interface ListedRole { id: number; slug: string; name: string; description: string; public: 0 | 1 }

/** Every role /api/roles lists to alice's demo key (one page of 100 is all a test makes). */
async function apiRoles(gw: TestGateway, query = ''): Promise<ListedRole[]> {
  const { accessToken } = await signIn(gw, DEMO.alice);
  const res = await call(`${gw.url}/api/roles?limit=100${query}`, { token: accessToken });
  assert.equal(res.status, 200, show(res));
  assert.equal(res.body.message.pages, '1', 'one page holds them all');
  return res.body.message.items as ListedRole[];
}

async function rolesPage(page: Page, url: string, query = ''): Promise<void> {
  await page.goto(`${url}/accounts/${ALICE}/roles${query}`);
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
}

test('roles: create, edit and delete through the pages, each change seen in /api/roles', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  const before = await apiRoles(dash.gw);
  assert.equal(before.length, 12, 'the demo roles');

  await rolesPage(page, dash.url);
  const rows = page.getByRole('region', { name: 'Roles, in id order' }).getByRole('row');
  assert.equal(await rows.count(), 1 + before.length, 'a header row and one row per role');
  assert.deepEqual(await rows.nth(1).getByRole('cell').allTextContents(), ['1', 'admin', 'Administrator', 'No', 'Full access to the account\'s resources.', 'Edit role Administrator']);
  assert.equal(await page.getByRole('link', { name: 'Edit role Viewer' }).getAttribute('href'), `/dashboard/accounts/${ALICE}/roles/3`);
  await checkAccessibility(page, 'roles');
  await screenshot(page, 'roles');

  // Create.
  await page.getByRole('link', { name: 'Create role' }).click();
  await page.getByRole('heading', { level: 1, name: 'Create role' }).waitFor();
  assert.equal(await page.getByLabel('Id').inputValue(), '13', 'the id after the highest one is suggested');
  await page.getByLabel('Id').fill('40');
  await page.getByLabel('Slug').fill('night-auditor');
  await page.getByLabel('Name').fill('Night auditor');
  await page.getByLabel('Description').fill('Reads the night reports.\nAnd the weekend ones.');
  await checkAccessibility(page, 'role-new');
  await screenshot(page, 'role-new');
  await page.getByRole('button', { name: 'Create role' }).click();
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: 'Role Night auditor created.' }).waitFor();
  assert.deepEqual((await apiRoles(dash.gw)).at(-1), { id: 40, slug: 'night-auditor', name: 'Night auditor', description: 'Reads the night reports.\nAnd the weekend ones.', public: 0 });
  assert.equal(await page.getByRole('row', { name: /Night auditor/ }).getByRole('cell').nth(4).innerText(), 'Reads the night reports.\nAnd the weekend ones.', 'the description keeps its two lines');

  // Edit: name, public, and the id (which moves the role).
  await page.getByRole('link', { name: 'Edit role Night auditor' }).click();
  await page.getByRole('heading', { level: 1, name: 'Role Night auditor' }).waitFor();
  assert.equal(await page.getByLabel('Slug').inputValue(), 'night-auditor');
  assert.equal(await page.getByLabel('Public').isChecked(), false);
  await page.getByLabel('Name').fill('Night and weekend auditor');
  await page.getByLabel('Public').check();
  assert.match((await descriptionOf(page, 'Id'))[0] ?? '', /Another id moves the role/);
  await page.getByLabel('Id').fill('41');
  await checkAccessibility(page, 'role-edit');
  await screenshot(page, 'role-edit');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: 'Role Night and weekend auditor saved, now with id 41.' }).waitFor();
  assert.deepEqual((await apiRoles(dash.gw)).slice(-2).map((role) => role.id), [12, 41], 'moved: no role 40 any more');
  assert.deepEqual((await apiRoles(dash.gw)).at(-1), { id: 41, slug: 'night-auditor', name: 'Night and weekend auditor', description: 'Reads the night reports.\nAnd the weekend ones.', public: 1 });

  // Delete: the dialog names the role and the consequence; Cancel changes nothing.
  await page.getByRole('link', { name: 'Edit role Night and weekend auditor' }).click();
  await page.getByRole('heading', { level: 1, name: 'Role Night and weekend auditor' }).waitFor();
  await page.getByRole('button', { name: 'Delete role' }).click();
  const dialog = page.getByRole('dialog', { name: 'Delete role Night and weekend auditor?' });
  await dialog.waitFor();
  const said = await dialog.textContent();
  assert.match(said ?? '', /Role Night and weekend auditor \(night-auditor\) is removed from \/api\/roles for every key of this account at once\. This cannot be undone\./);
  assert.equal(await focusedName(page), 'Cancel', 'Cancel has the focus');
  await checkAccessibility(page, 'role-delete-dialog');
  await page.keyboard.press('Tab');
  assert.equal(await focusedName(page), 'Delete role', 'the dialog keeps the focus: Tab goes from Cancel to its confirm button');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate('document.activeElement === document.body || document.activeElement?.closest("dialog") !== null'), true, 'nor does Tab reach the page behind it');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal(await focusedName(page), 'Delete role', 'closed, the focus is back on the button that opened it');
  assert.equal((await apiRoles(dash.gw)).length, 13, 'cancelled: still there');
  assert.equal(page.url(), `${dash.url}/accounts/${ALICE}/roles/41`);

  await page.getByRole('button', { name: 'Delete role' }).click();
  await dialog.getByRole('button', { name: 'Delete role' }).click();
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: 'Role Night and weekend auditor deleted.' }).waitFor();
  assert.equal(await focusedTag(page), 'H1', 'after the delete, the focus is on the page it led to');
  assert.deepEqual(await apiRoles(dash.gw), before, 'gone from /api/roles');

  // A role that is not there.
  await page.goto(`${dash.url}/accounts/${ALICE}/roles/41`);
  await page.getByRole('heading', { level: 1, name: 'Role not found' }).waitFor();
  await checkAccessibility(page, 'role-not-found');
});

test('roles: created with the keyboard alone; focus on the h1 after navigation and on the refused field; the gateway\'s messages beside their fields', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await rolesPage(page, dash.url);

  await tabTo(page, 'Create role');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Create role' }).waitFor();
  assert.equal(await focusedTag(page), 'H1', 'the h1 has the focus after navigation');

  await tabTo(page, 'Id');
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.type('1');
  await tabTo(page, 'Slug');
  await page.keyboard.type('keyboard-made');
  await tabTo(page, 'Name');
  await page.keyboard.type('Made by keyboard');
  await tabTo(page, 'Description');
  await page.keyboard.type('First line.');
  await page.keyboard.press('Enter');
  await page.keyboard.type('Second line.');
  await tabTo(page, 'Public');
  await page.keyboard.press('Space');
  await tabTo(page, 'Create role');
  await page.keyboard.press('Enter');

  // Id 1 is the Administrator's: refused, the message at the Id field, which takes the focus.
  const duplicate = await operator(dash.gw).send('POST', `/accounts/${ALICE}/roles`, { id: 1, slug: 'keyboard-made', name: 'Made by keyboard', description: '', public: true });
  assert.equal(duplicate.status, 409, show(duplicate));
  assert.equal(duplicate.body.message.field, 'id');
  const idField = page.getByLabel('Id', { exact: true });
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await idField.getAttribute('aria-invalid'), 'true');
  assert.equal((await descriptionOf(page, 'Id')).at(-1), duplicate.body.message.description, 'the gateway\'s sentence is the field\'s description');
  assert.equal(await focusedName(page), 'Id', 'the refused field has the focus');
  await checkAccessibility(page, 'role-new-errors');

  // The focus is at the Id field: the keyboard corrects it there.
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.type('77');
  await tabTo(page, 'Create role');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  assert.equal(await focusedTag(page), 'H1');
  const made = (await apiRoles(dash.gw)).find((role) => role.slug === 'keyboard-made');
  assert.deepEqual(made, { id: 77, slug: 'keyboard-made', name: 'Made by keyboard', description: 'First line.\nSecond line.', public: 1 });

  // A bad slug: the gateway's message at the Slug field; the Id error of before is gone.
  await page.getByRole('link', { name: 'Create role' }).click();
  await page.getByRole('heading', { level: 1, name: 'Create role' }).waitFor();
  await page.getByLabel('Slug').fill('Not A Slug');
  await page.getByLabel('Name').fill('Badly slugged');
  await page.getByRole('button', { name: 'Create role' }).click();
  const badSlug = await operator(dash.gw).send('POST', `/accounts/${ALICE}/roles`, { id: 78, slug: 'Not A Slug', name: 'Badly slugged', description: '', public: false });
  assert.equal(badSlug.status, 400, show(badSlug));
  assert.equal(badSlug.body.message.field, 'slug');
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await page.getByLabel('Slug').getAttribute('aria-invalid'), 'true');
  assert.equal(await page.getByLabel('Id', { exact: true }).getAttribute('aria-invalid'), null);
  assert.match(badSlug.body.message.description, /slug: expected 1 to 256 of a-z/, 'the owner API says it for developers');
  assert.equal((await descriptionOf(page, 'Slug')).at(-1), 'Use 1 to 256 of a-z 0-9 . _ - (starting with a letter or digit).', 'the page says it for owners');
  assert.equal(await focusedName(page), 'Slug');

  // zod's own phrasings read as plain sentences at their fields.
  await page.getByLabel('Id', { exact: true }).fill('twelve');
  await page.getByLabel('Slug').fill('plain-words');
  await page.getByRole('button', { name: 'Create role' }).click();
  await page.getByLabel('Id', { exact: true }).and(page.locator('[aria-invalid="true"]')).waitFor();
  assert.equal((await descriptionOf(page, 'Id')).at(-1), 'Enter a whole number.');
  await page.getByLabel('Id', { exact: true }).fill('79');
  await page.getByLabel('Name').fill('');
  await page.getByRole('button', { name: 'Create role' }).click();
  await page.getByLabel('Name').and(page.locator('[aria-invalid="true"]')).waitFor();
  assert.equal((await descriptionOf(page, 'Name')).at(-1), 'Enter a name.');
  await page.getByLabel('Name').fill('n'.repeat(257));
  await page.getByRole('button', { name: 'Create role' }).click();
  await page.getByLabel('Name').and(page.locator('[aria-invalid="true"]')).waitFor();
  assert.equal((await descriptionOf(page, 'Name')).at(-1), 'At most 256 characters.');

  // A duplicate slug on an edit: at the Slug field too, and nothing changed.
  await page.goto(`${dash.url}/accounts/${ALICE}/roles/77`);
  await page.getByRole('heading', { level: 1, name: 'Role Made by keyboard' }).waitFor();
  await page.getByLabel('Slug').fill('admin');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await page.getByLabel('Slug').getAttribute('aria-invalid'), 'true');
  assert.match((await descriptionOf(page, 'Slug')).at(-1) ?? '', /slug/i);
  assert.deepEqual((await apiRoles(dash.gw)).find((role) => role.id === 77), made);
});

test('roles: search by name and paging, as /api/roles lists them; empty states; no sideways scroll on a phone', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  for (let i = 0; i < 20; i += 1) {
    const res = await op.send('POST', `/accounts/${ALICE}/roles`, { id: 100 + i, slug: `batch-${i}`, name: `Batch role ${String(i).padStart(2, '0')}`, description: '', public: i % 2 === 0 });
    assert.equal(res.status, 201, show(res));
  }
  const listed = await apiRoles(dash.gw);
  assert.equal(listed.length, 32);

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await rolesPage(page, dash.url);
  const idsShown = async () => (await page.getByRole('region', { name: /^Roles/ }).getByRole('row').allTextContents()).slice(1).map((row) => Number.parseInt(row, 10));
  assert.deepEqual(await idsShown(), listed.slice(0, 25).map((role) => role.id), 'the first page: 25 roles in /api/roles order');
  assert.equal(await page.getByRole('link', { name: 'First page' }).count(), 0);

  await page.getByRole('navigation', { name: 'Pages of roles' }).getByRole('link', { name: 'Next page' }).click();
  await page.waitForURL(/cursor=/);
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  assert.deepEqual(await idsShown(), listed.slice(25).map((role) => role.id), 'the second page: the rest');
  assert.equal(await page.getByRole('link', { name: 'Next page' }).count(), 0, 'the last page');
  await page.getByRole('link', { name: 'First page' }).click();
  await page.waitForURL((url) => !url.search.includes('cursor'));
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  assert.deepEqual(await idsShown(), listed.slice(0, 25).map((role) => role.id));

  // Search: the query goes into the URL; the matches are /api/roles?name='s.
  await page.getByLabel('Search by name').fill('BATCH');
  await page.getByRole('button', { name: 'Search' }).click();
  await page.waitForURL(/\?name=BATCH$/);
  await page.getByRole('region', { name: 'Roles whose name contains “BATCH”, in id order' }).waitFor();
  assert.deepEqual(await idsShown(), (await apiRoles(dash.gw, '&name=BATCH')).map((role) => role.id));
  assert.equal((await idsShown()).length, 20);
  assert.equal(await page.getByLabel('Search by name').inputValue(), 'BATCH', 'the search is kept in its field');

  await page.getByLabel('Search by name').fill('zzz');
  await page.getByRole('button', { name: 'Search' }).click();
  await page.getByText('No role matches “zzz”.').waitFor();
  assert.equal(page.url(), `${dash.url}/accounts/${ALICE}/roles?name=zzz`);
  await checkAccessibility(page, 'roles-no-match');
  await page.getByRole('link', { name: 'Show all roles' }).first().click();
  await page.waitForURL(`${dash.url}/accounts/${ALICE}/roles`);
  await page.getByRole('region', { name: 'Roles, in id order' }).waitFor();

  // A search and a page link the owner API refuses: said where they belong, not as a failure.
  const tooLong = 'x'.repeat(101);
  const refusedSearch = await op.get(`/accounts/${ALICE}/roles?name=${tooLong}`);
  assert.equal(refusedSearch.body.message.field, 'name', show(refusedSearch));
  await rolesPage(page, dash.url, `?name=${tooLong}`);
  assert.equal(await page.getByLabel('Search by name').getAttribute('aria-invalid'), 'true');
  assert.equal((await descriptionOf(page, 'Search by name')).at(-1), 'At most 100 characters.');
  const refusedCursor = await op.get(`/accounts/${ALICE}/roles?cursor=not-a-cursor`);
  assert.equal(refusedCursor.body.message.field, 'cursor', show(refusedCursor));
  await rolesPage(page, dash.url, '?cursor=not-a-cursor');
  await page.getByText('This page link does not work (it may come from another listing): start again from the first page.').waitFor();
  await page.locator('.empty').getByRole('link', { name: 'First page' }).click();
  await page.getByRole('region', { name: 'Roles, in id order' }).waitFor();

  // An account without roles: bob's, emptied.
  for (const id of [101, 102]) assert.equal((await op.send('DELETE', `/accounts/${OWNERS.bob.accountId}/roles/${id}`)).status, 200);
  const bob = await dash.newPage();
  await dash.signInAsOwner(bob, 'bob');
  await bob.goto(`${dash.url}/accounts/${OWNERS.bob.accountId}/roles`);
  await bob.getByText('No roles yet.').waitFor();
  assert.equal(await bob.locator('.empty').getByRole('link', { name: 'Create role' }).count(), 1);
  await checkAccessibility(bob, 'roles-empty');

  // Phone size: the table scrolls in its own region, the page does not.
  const phone = await dash.newPage({ viewport: PHONE });
  await dash.signInAsOwner(phone, 'alice');
  await rolesPage(phone, dash.url);
  await assertNoSidewaysScroll(phone, 'roles at 375 px');
  await checkAccessibility(phone, 'phone-roles');
  await screenshot(phone, 'phone-roles');
});

test('roles: where the gateway does not write them, the pages say the roles are managed elsewhere', browserSuite(), async (t) => {
  // Never called: the owner API answers 409 read_only_store before any directory read.
  const upstream = 'http://127.0.0.1:9';
  const dash = await startDashboard(t, { overrides: { directory: { store: 'http', http: { signUrl: `${upstream}/sign?account={accountId}&address={address}`, rolesUrl: `${upstream}/roles?account={accountId}`, token: 'service-token' } } } });
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await rolesPage(page, dash.url);
  await page.getByRole('heading', { level: 2, name: 'Roles are managed elsewhere' }).waitFor();
  assert.match(await page.locator('main').textContent() ?? '', /directory upstream/);
  assert.equal(await page.getByRole('link', { name: 'Create role' }).count(), 0, 'nothing offered that would be refused');
  await checkAccessibility(page, 'roles-read-only');

  await page.goto(`${dash.url}/accounts/${ALICE}/roles/new`);
  await page.getByRole('heading', { level: 2, name: 'Roles are managed elsewhere' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'Create role' }).count(), 0);
});
