/**
 * The Sign records page in Chromium against a real gateway: what it shows is held to what
 * /api/sign answers an access token of alice's demo key, and every change made through it is
 * checked there.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { assertNoSidewaysScroll, browserSuite, checkAccessibility, descriptionOf, focusedName, OWNERS, PHONE, screenshot, startDashboard } from '../helpers/dashboard.js';
import { call, DEMO, signIn, type JsonResponse, type TestGateway } from '../helpers/gateway.js';

const ALICE = OWNERS.alice.accountId;
/** A demo record of acct_alice, stored in capitals (config/demo-data.json). */
const DEMO_ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';
const NEW_ADDRESS = '0x00000000000000000000000000000000000000Ab';

async function apiSign(gw: TestGateway, address: string): Promise<JsonResponse> {
  const { accessToken } = await signIn(gw, DEMO.alice);
  return call(`${gw.url}/api/sign?address=${address}`, { token: accessToken });
}

/** The JSON the page shows as /api/sign's answer. */
async function shownRecord(page: Page): Promise<unknown> {
  return JSON.parse((await page.locator('pre.served').textContent()) ?? '') as unknown;
}

async function lookUp(page: Page, address: string): Promise<void> {
  await page.getByLabel('Address', { exact: true }).fill(address);
  await page.getByRole('button', { name: 'Look up' }).click();
}

test('sign records: look up, edit, delete and create, each seen as /api/sign serves it', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ALICE}/sign-records`);
  await page.getByRole('heading', { level: 1, name: 'Sign records' }).waitFor();
  await checkAccessibility(page, 'sign-records-empty');

  // Found: exactly /api/sign's message (did as typed), and the edit form prefilled.
  await lookUp(page, DEMO_ADDRESS);
  await page.getByRole('heading', { level: 2, name: 'What /api/sign serves' }).waitFor();
  assert.equal(page.url(), `${dash.url}/accounts/${ALICE}/sign-records?address=${DEMO_ADDRESS}`);
  const served = await apiSign(dash.gw, DEMO_ADDRESS);
  assert.equal(served.status, 200);
  assert.deepEqual(await shownRecord(page), served.body.message);
  assert.deepEqual(served.body.message, { did: DEMO_ADDRESS, signedNonce: 42, signedAt: '2026-03-01 12:00:00', signedExpiredAt: '2026-03-31 12:00:00' });
  assert.equal(await page.getByLabel('Signed nonce').inputValue(), '42');
  assert.equal(await page.getByLabel('Signed at').inputValue(), '2026-03-01T12:00:00Z');
  assert.equal(await page.getByLabel('Expires at').inputValue(), '2026-03-31T12:00:00Z');
  await checkAccessibility(page, 'sign-records-found');
  await screenshot(page, 'sign-records');

  // A refused change: the gateway's message at its field, which takes the focus.
  await page.getByLabel('Expires at').fill('2026-02-01T00:00:00Z');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await page.getByLabel('Expires at').getAttribute('aria-invalid'), 'true');
  assert.match((await descriptionOf(page, 'Expires at')).at(-1) ?? '', /later than signedAt/);
  assert.equal(await focusedName(page), 'Expires at');
  assert.deepEqual((await apiSign(dash.gw, DEMO_ADDRESS)).body.message, served.body.message, 'nothing changed');

  // Edit: /api/sign serves the new values (times given with an offset, served in UTC).
  await page.getByLabel('Signed nonce').fill('43');
  await page.getByLabel('Signed at').fill('2026-04-01T10:00:00+02:00');
  await page.getByLabel('Expires at').fill('2026-05-01T08:00:00Z');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText(`Sign record of ${DEMO_ADDRESS.toLowerCase()} saved.`).waitFor();
  const edited = await apiSign(dash.gw, DEMO_ADDRESS);
  assert.deepEqual(edited.body.message, { did: DEMO_ADDRESS, signedNonce: 43, signedAt: '2026-04-01 08:00:00', signedExpiredAt: '2026-05-01 08:00:00' });
  assert.deepEqual(await shownRecord(page), edited.body.message);

  // Delete: the dialog names the address and the consequence; Cancel keeps it.
  await page.getByRole('button', { name: 'Delete record' }).click();
  const dialog = page.getByRole('dialog', { name: `Delete the sign record of ${DEMO_ADDRESS.toLowerCase()}?` });
  await dialog.waitFor();
  assert.match(await dialog.textContent() ?? '', /\/api\/sign stops serving 0x52908400098527886e0f7030069857d2e4169ee7 at once.*This cannot be undone\./);
  await checkAccessibility(page, 'sign-records-delete-dialog');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await apiSign(dash.gw, DEMO_ADDRESS)).status, 200, 'cancelled: still served');
  await page.getByRole('button', { name: 'Delete record' }).click();
  await dialog.getByRole('button', { name: 'Delete record' }).click();
  await page.getByText(`Sign record of ${DEMO_ADDRESS.toLowerCase()} deleted.`).waitFor();
  const gone = await apiSign(dash.gw, DEMO_ADDRESS);
  assert.equal(gone.status, 404);
  await page.getByRole('heading', { level: 2, name: 'Create a record for this address' }).waitFor();

  // Not found: said, with a form to create one for that address.
  await lookUp(page, NEW_ADDRESS);
  await page.waitForURL(`${dash.url}/accounts/${ALICE}/sign-records?address=${NEW_ADDRESS}`);
  await page.getByText(`No sign record for ${NEW_ADDRESS}`).waitFor();
  await checkAccessibility(page, 'sign-records-not-found');
  await screenshot(page, 'sign-record-new');
  await page.getByLabel('Signed nonce').fill('5');
  await page.getByLabel('Signed at').fill('2026-06-01T10:00:00Z');
  await page.getByLabel('Expires at').fill('2026-07-01T10:00:00Z');
  await page.getByRole('button', { name: 'Create record' }).click();
  await page.getByText(`Sign record of ${NEW_ADDRESS.toLowerCase()} created.`).waitFor();
  const created = await apiSign(dash.gw, NEW_ADDRESS);
  assert.deepEqual(created.body.message, { did: NEW_ADDRESS, signedNonce: 5, signedAt: '2026-06-01 10:00:00', signedExpiredAt: '2026-07-01 10:00:00' });
  assert.deepEqual(await shownRecord(page), created.body.message);

  // A malformed address: the gateway's message at the Address field.
  await lookUp(page, '0x1234');
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await page.getByLabel('Address', { exact: true }).getAttribute('aria-invalid'), 'true');
  assert.match((await descriptionOf(page, 'Address')).at(-1) ?? '', /0x and 40 hex digits/);
  assert.equal(await focusedName(page), 'Address');
  // …and the same when it comes in the URL.
  await page.goto(`${dash.url}/accounts/${ALICE}/sign-records?address=nope`);
  await page.getByRole('heading', { level: 1, name: 'Sign records' }).waitFor();
  assert.equal(await page.getByLabel('Address', { exact: true }).getAttribute('aria-invalid'), 'true');
  assert.equal(await page.locator('pre.served').count(), 0);
});

test('sign records: where the gateway does not write them, the page says they are written elsewhere', browserSuite(), async (t) => {
  // Never called: the owner API answers 409 read_only_store before any directory read.
  const upstream = 'http://127.0.0.1:9';
  const dash = await startDashboard(t, { overrides: { directory: { store: 'http', http: { signUrl: `${upstream}/sign?account={accountId}&address={address}`, rolesUrl: `${upstream}/roles?account={accountId}`, token: 'service-token' } } } });
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ALICE}/sign-records`);
  await page.getByRole('heading', { level: 1, name: 'Sign records' }).waitFor();
  await lookUp(page, DEMO_ADDRESS);
  await page.getByRole('heading', { level: 2, name: 'Sign records are written elsewhere' }).waitFor();
  assert.match(await page.locator('main').textContent() ?? '', /directory upstream/);
  assert.equal(await page.getByRole('button', { name: /Save changes|Create record|Delete record/ }).count(), 0, 'nothing offered that would be refused');
  await checkAccessibility(page, 'sign-records-read-only');
});

test('sign records: a found record on a phone: no sideways page scroll, the served JSON scrolls in its own box', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const phone = await dash.newPage({ viewport: PHONE });
  await dash.signInAsOwner(phone, 'alice');
  await phone.goto(`${dash.url}/accounts/${ALICE}/sign-records?address=${DEMO_ADDRESS}`);
  await phone.getByRole('heading', { level: 2, name: 'What /api/sign serves' }).waitFor();
  await assertNoSidewaysScroll(phone, 'a sign record at 375 px');
  await checkAccessibility(phone, 'phone-sign-records');
  await screenshot(phone, 'phone-sign-records');
});
