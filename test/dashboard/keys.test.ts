/**
 * The API keys pages in Chromium against a real gateway: a key made in the page signs in
 * through /api/signin with the secret read from the shown-once box (and from the clipboard),
 * and its access token passes the proxied route; the secret is gone after a reload. On the key's
 * page, each action (edit, roll with and without an overlap, disable, enable, reset, delete) is
 * checked against the gateway, and each confirmation's Cancel changes nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { assertNoSidewaysScroll, browserSuite, checkAccessibility, descriptionOf, OWNERS, PHONE, screenshot, startDashboard, type Dashboard } from '../helpers/dashboard.js';
import { call, postJson, sha256Hex, show, type JsonResponse } from '../helpers/gateway.js';
import { operator } from '../helpers/owner.js';

const ACCOUNT = OWNERS.alice.accountId;

function signInWith(dash: Dashboard, apiKey: string, secret: string): Promise<JsonResponse> {
  return postJson(`${dash.gw.url}/api/signin`, { apiKey, apiSecret: sha256Hex(secret) });
}

async function accessToken(dash: Dashboard, apiKey: string, secret: string): Promise<string> {
  const res = await signInWith(dash, apiKey, secret);
  assert.equal(res.status, 200, `sign-in with ${apiKey}: ${show(res)}`);
  return res.body.message.accessToken as string;
}

function things(dash: Dashboard, token: string): Promise<JsonResponse> {
  return call(`${dash.gw.url}/things`, { token });
}

/** Whether `text` is anywhere in the page: its markup, its text, a field's value, its URL. */
async function pageHolds(page: Page, text: string): Promise<boolean> {
  if (page.url().includes(text)) return true;
  const needle = JSON.stringify(text);
  return await page.evaluate(`document.documentElement.outerHTML.includes(${needle}) || document.body.innerText.includes(${needle})
    || [...document.querySelectorAll('input, textarea')].some((field) => field.value.includes(${needle}))`) as boolean;
}

/** The value of the shown-once box, once it is no longer `old` (a second roll replaces the first's box). */
async function newSecret(page: Page, old: string): Promise<string> {
  const box = page.getByLabel('API secret', { exact: true });
  for (let tries = 0; tries < 200; tries++) {
    const value = await box.inputValue();
    if (value !== old) return value;
    await page.waitForTimeout(50);
  }
  assert.fail('a new secret is shown');
}

/** What the page reads from its clipboard. */
function clipboardText(page: Page): Promise<string> {
  return page.evaluate('navigator.clipboard.readText()') as Promise<string>;
}

test('keys: the listing, a key created in the page signs in and calls a proxied route, and its secret is shown only once', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);

  // An account without keys, seen by an operator: the empty state.
  const made = await op.send('POST', '/accounts', { id: 'acct_empty', name: 'Empty Ltd' });
  assert.equal(made.status, 201, show(made));
  const opPage = await dash.newPage();
  await dash.signInAsOperator(opPage);
  await opPage.goto(`${dash.url}/accounts/acct_empty/keys`);
  await opPage.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await opPage.getByText('This account has no API keys yet.').waitFor();
  await checkAccessibility(opPage, 'keys (empty)');

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys`);
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  const listing = page.getByRole('region', { name: 'API keys' }).getByRole('table');
  await listing.getByRole('link', { name: 'key_alice_1' }).waitFor();
  assert.match(await listing.getByRole('row').filter({ hasText: 'ak_demo_alice_disabled' }).innerText(), /Disabled/, 'status is said in words');
  await checkAccessibility(page, 'keys');
  await screenshot(page, 'keys');

  // The gateway's refusal of an empty name shows at the field.
  await page.getByRole('button', { name: 'Create key' }).click();
  const name = page.getByLabel('Name');
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await name.getAttribute('aria-invalid'), 'true', 'the name field is marked invalid');
  assert.equal((await descriptionOf(page, 'Name')).at(-1), 'Enter a name.', 'a plain sentence next to the name');
  await checkAccessibility(page, 'keys (error at a field)');

  await name.fill('ci');
  await page.getByLabel('Scopes').fill('read, write');
  await page.getByRole('button', { name: 'Create key' }).click();
  const box = page.getByRole('region', { name: 'API secret for ci' });
  await box.waitFor();
  const secret = await page.getByLabel('API secret', { exact: true }).inputValue();
  assert.match(secret, /^gwsk_[0-9A-Za-z]{43}$/);
  const apiKey = (await box.locator('code').first().innerText()).trim();
  assert.match(apiKey, /^gwk_[0-9A-Za-z]{24}$/, 'the API key is shown with the secret');
  await box.getByRole('button', { name: 'Copy' }).click();
  await box.getByText('Copied').waitFor();
  assert.equal(await clipboardText(page), secret, 'Copy puts the secret on the clipboard');
  const link = listing.getByRole('link', { name: 'ci', exact: true });
  await link.waitFor();
  const keyId = (await link.getAttribute('href'))!.split('/').pop()!;
  assert.match(keyId, /^key_/);
  assert.match(await listing.getByRole('row').filter({ hasText: apiKey }).innerText(), /Enabled[\s\S]*read write/);
  await checkAccessibility(page, 'keys (shown-once secret)');
  await screenshot(page, 'key-created');

  // The secret signs in, and its access token passes the proxied route as this key.
  const token = await accessToken(dash, apiKey, secret);
  const res = await things(dash, token);
  assert.equal(res.status, 200, show(res));
  assert.deepEqual(dash.backend.received.at(-1)!.headers['x-key-id'], [keyId], 'the backend was told the new key');

  assert.ok(!page.url().includes(secret), 'never in the URL');
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await listing.getByRole('link', { name: 'ci', exact: true }).waitFor();
  assert.equal(await pageHolds(page, secret), false, 'after a reload the secret is nowhere in the page');
  const listed = await op.get(`/accounts/${ACCOUNT}/keys`);
  assert.ok(!JSON.stringify(listed.body).includes(secret), 'nor in the listing the page reads');

  // At phone size: the keys page and a shown-once secret fit the width.
  const phone = await dash.newPage({ viewport: PHONE });
  await dash.signInAsOwner(phone, 'alice');
  await phone.goto(`${dash.url}/accounts/${ACCOUNT}/keys`);
  await phone.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await phone.getByRole('region', { name: 'API keys' }).getByRole('table').waitFor();
  await assertNoSidewaysScroll(phone, 'keys at phone size');
  await phone.getByLabel('Name').fill('phone');
  await phone.getByRole('button', { name: 'Create key' }).click();
  await phone.getByRole('region', { name: 'API secret for phone' }).waitFor();
  await assertNoSidewaysScroll(phone, 'a shown-once secret at phone size');
  await checkAccessibility(phone, 'keys at phone size (shown-once secret)');
  await screenshot(phone, 'phone-key-created');
});

test('key: edit, roll with and without an overlap, disable, enable, reset and delete, each checked at the gateway; Cancel changes nothing', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  const created = await op.send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'ci', scopes: ['read'] });
  assert.equal(created.status, 201, show(created));
  const { key, apiSecret: first } = created.body.message as { key: { id: string; apiKey: string }; apiSecret: string };
  const keyPath = `/accounts/${ACCOUNT}/keys/${key.id}`;
  const readKey = async () => {
    const res = await op.get(keyPath);
    assert.equal(res.status, 200, show(res));
    return res.body.message as { name: string; enabled: boolean; previousValidUntil?: string; scopes: string[] };
  };

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys/${key.id}`);
  await page.getByRole('heading', { level: 1, name: 'API key ci' }).waitFor();
  const facts = page.locator('dl.facts');
  assert.match(await facts.innerText(), new RegExp(`API key\\s+${key.apiKey}[\\s\\S]*Status\\s+Enabled[\\s\\S]*Scopes\\s+read`));
  await checkAccessibility(page, 'key');
  await screenshot(page, 'key');

  // Edit: an empty name is refused at its field; then a rename and new scopes.
  const name = page.getByLabel('Name');
  await name.fill('');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await name.getAttribute('aria-invalid'), 'true');
  await checkAccessibility(page, 'key (error at a field)');
  await name.fill('ci-runner');
  await page.getByLabel('Scopes').fill('read write');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('heading', { level: 1, name: 'API key ci-runner' }).waitFor();
  await page.getByText('Changes saved.').waitFor();
  assert.deepEqual(await readKey().then((k) => [k.name, k.scopes]), ['ci-runner', ['read', 'write']]);

  const dialog = page.getByRole('dialog');
  const rollButton = page.getByRole('form', { name: /Roll the secret/ }).getByRole('button', { name: 'Roll secret' });

  // Roll with an overlap of one hour: Cancel first, then for real.
  await page.getByLabel('Overlap').selectOption({ label: '1 hour' });
  await rollButton.click();
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /keeps signing in for 1 hour, until .+, and then stops/);
  await checkAccessibility(page, 'key (roll dialog)');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await readKey()).previousValidUntil, undefined, 'Cancel rolled nothing');
  await accessToken(dash, key.apiKey, first);

  await rollButton.click();
  await dialog.getByRole('button', { name: 'Roll secret' }).click();
  await page.getByRole('region', { name: 'New API secret for ci-runner' }).waitFor();
  const second = await page.getByLabel('API secret', { exact: true }).inputValue();
  assert.match(second, /^gwsk_/);
  assert.notEqual(second, first);
  assert.ok((await readKey()).previousValidUntil !== undefined, 'the old secret has an end');
  assert.doesNotMatch(await facts.innerText(), /no previous secret/, 'the page shows until when the old secret works');
  await checkAccessibility(page, 'key (rolled, shown-once secret)');
  await accessToken(dash, key.apiKey, first);
  await accessToken(dash, key.apiKey, second);

  // Roll with no overlap: the secret before stops at once.
  await page.getByLabel('Overlap').selectOption('0');
  await rollButton.click();
  assert.match(await dialog.innerText(), /stops signing in at once/);
  await dialog.getByRole('button', { name: 'Roll secret' }).click();
  const third = await newSecret(page, second);
  assert.ok(![first, second].includes(third));
  assert.equal((await signInWith(dash, key.apiKey, second)).status, 401, 'the secret rolled with no overlap is refused');
  assert.equal((await signInWith(dash, key.apiKey, first)).status, 401, 'and so is the one before it');
  const before = await accessToken(dash, key.apiKey, third);
  assert.equal((await things(dash, before)).status, 200);

  // Disable: Cancel keeps it; confirmed, its tokens and its sign-ins are refused.
  await page.getByRole('button', { name: 'Disable key' }).click();
  assert.match(await dialog.innerText(), /Every access and refresh token key ci-runner has issued stops working at once, and it cannot sign in until it is enabled again/);
  await checkAccessibility(page, 'key (disable dialog)');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  assert.equal((await readKey()).enabled, true, 'Cancel left it enabled');
  assert.equal((await things(dash, before)).status, 200);
  await page.getByRole('button', { name: 'Disable key' }).click();
  await dialog.getByRole('button', { name: 'Disable key' }).click();
  await page.getByText('Key ci-runner disabled').waitFor();
  assert.match(await facts.innerText(), /Status\s+Disabled/);
  assert.equal((await readKey()).enabled, false);
  assert.equal((await things(dash, before)).status, 401, 'an access token from before the disable is refused');
  assert.notEqual((await signInWith(dash, key.apiKey, third)).status, 200, 'a disabled key cannot sign in');

  // Enable: it signs in again. (The manual clock moves on: a token of the very millisecond of
  // the disable's reset would count as issued before it.)
  dash.gw.clock.advance(1000);
  await page.getByRole('button', { name: 'Enable key' }).click();
  assert.match(await dialog.innerText(), /can sign in again/);
  await checkAccessibility(page, 'key (enable dialog)');
  await dialog.getByRole('button', { name: 'Enable key' }).click();
  await page.getByText('Key ci-runner enabled').waitFor();
  assert.equal((await readKey()).enabled, true);
  const again = await accessToken(dash, key.apiKey, third);
  assert.equal((await things(dash, again)).status, 200);
  assert.equal((await things(dash, before)).status, 401, 'tokens from before the disable stay refused');

  // Reset the key's tokens: Cancel keeps them; confirmed, they end and a new sign-in works.
  await page.getByRole('button', { name: 'Reset tokens' }).click();
  assert.match(await dialog.innerText(), /Every access and refresh token of key ci-runner stops working at once; clients must sign in again/);
  await checkAccessibility(page, 'key (reset dialog)');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  assert.equal((await things(dash, again)).status, 200, 'Cancel reset nothing');
  await page.getByRole('button', { name: 'Reset tokens' }).click();
  await dialog.getByRole('button', { name: 'Reset tokens' }).click();
  await page.getByText(/Tokens of key ci-runner reset at/).waitFor();
  assert.equal((await things(dash, again)).status, 401, 'an access token from before the reset is refused');
  dash.gw.clock.advance(1000);
  const fresh = await accessToken(dash, key.apiKey, third);
  assert.equal((await things(dash, fresh)).status, 200, 'a new sign-in works');

  // Delete: Cancel keeps it; confirmed, back to the listing, and it signs in no more.
  await page.getByRole('button', { name: 'Delete key' }).click();
  assert.match(await dialog.innerText(), /can no longer sign in, and every token it issued stops working at once/);
  await checkAccessibility(page, 'key (delete dialog)');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await readKey();
  await page.getByRole('button', { name: 'Delete key' }).click();
  await dialog.getByRole('button', { name: 'Delete key' }).click();
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await page.getByText('Key ci-runner deleted.').waitFor();
  assert.equal((await op.get(keyPath)).status, 404);
  assert.equal((await signInWith(dash, key.apiKey, third)).status, 401, 'a deleted key cannot sign in');
  assert.equal((await things(dash, fresh)).status, 401, 'nor do its tokens work');

  // A key that is not there.
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys/${key.id}`);
  await page.getByRole('heading', { level: 1, name: 'API key not found' }).waitFor();
  await checkAccessibility(page, 'key (not found)');
});

test('key: an action the gateway refuses (the key deleted meanwhile) says why in the danger zone, and the focus is back on its button', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  const created = await op.send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'gone-soon' });
  assert.equal(created.status, 201, show(created));
  const keyId = created.body.message.key.id as string;

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys/${keyId}`);
  await page.getByRole('heading', { level: 1, name: 'API key gone-soon' }).waitFor();
  assert.equal((await op.send('DELETE', `/accounts/${ACCOUNT}/keys/${keyId}`)).status, 200);

  await page.getByRole('button', { name: 'Reset tokens' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Reset tokens' }).click();
  const refused = page.getByRole('region', { name: 'Danger zone' }).getByRole('alert');
  await refused.filter({ hasText: 'This does not exist, or it is not yours to see.' }).waitFor();
  assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Reset tokens', 'the focus is back on the button');
  await checkAccessibility(page, 'key (a refused action)');
});

test('key bound to a client certificate: the page shows the fingerprint, and saving an edit keeps the binding', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  const fingerprint = 'c0ffee'.repeat(11).slice(0, 64);
  const created = await op.send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'bound', certificateSha256: fingerprint.toUpperCase() });
  assert.equal(created.status, 201, show(created));
  const { key } = created.body.message as { key: { id: string } };

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys/${key.id}`);
  await page.getByRole('heading', { level: 1, name: 'API key bound' }).waitFor();
  assert.match(await page.locator('dl.facts').innerText(), new RegExp(`Client certificate \\(SHA-256\\)\\s+${fingerprint}`));
  await assertNoSidewaysScroll(page, 'a bound key');

  await page.getByLabel('Name').fill('bound-renamed');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('heading', { level: 1, name: 'API key bound-renamed' }).waitFor();
  const read = await op.get(`/accounts/${ACCOUNT}/keys/${key.id}`);
  assert.equal(read.body.message.certificateSha256, fingerprint, 'the edit left the binding as it was');
});
