/**
 * The account overview in Chromium against a real gateway: its facts and section links, a
 * rename (refused at the field when empty), and the account-wide reset: Cancel changes nothing;
 * confirmed, an access token of the demo key and a settings token made before are refused,
 * and a fresh sign-in works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { browserSuite, checkAccessibility, descriptionOf, OWNERS, screenshot, startDashboard } from '../helpers/dashboard.js';
import { call, DEMO, show, signIn } from '../helpers/gateway.js';
import { operator } from '../helpers/owner.js';

const ACCOUNT = OWNERS.alice.accountId;

test('account: overview, rename, and the reset of every token of the account behind a confirmation', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  const things = (token: string) => call(`${dash.gw.url}/things`, { token });

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}`);
  await page.getByRole('heading', { level: 1, name: 'Alice Labs (demo)' }).waitFor();
  assert.match(await page.locator('dl.facts').innerText(), /Account id\s+acct_alice[\s\S]*Status\s+Enabled/);
  const sections = page.getByRole('region', { name: 'Sections' });
  for (const [name, path] of [['Roles', 'roles'], ['API keys', 'keys'], ['API settings tokens', 'settings-tokens'], ['Sign records', 'sign-records'], ['Activity', 'activity']]) {
    assert.equal(await sections.getByRole('link', { name, exact: true }).getAttribute('href'), `/dashboard/accounts/${ACCOUNT}/${path}`);
  }
  await checkAccessibility(page, 'account');
  await screenshot(page, 'account');

  // Rename: an empty name is refused at the field; then a new name, in the page and the switcher.
  const name = page.getByLabel('Name', { exact: true });
  await name.fill('');
  await page.getByRole('button', { name: 'Rename account' }).click();
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await name.getAttribute('aria-invalid'), 'true');
  assert.equal((await descriptionOf(page, 'Name')).at(-1), 'Enter a name.');
  await checkAccessibility(page, 'account (error at a field)');
  await name.fill('Alice Labs');
  await page.getByRole('button', { name: 'Rename account' }).click();
  await page.getByRole('heading', { level: 1, name: 'Alice Labs', exact: true }).waitFor();
  await page.getByText('Account renamed to Alice Labs.').waitFor();
  assert.equal((await op.get(`/accounts/${ACCOUNT}`)).body.message.name, 'Alice Labs');
  assert.equal(await page.getByLabel('Account', { exact: true }).locator('option:checked').innerText(), 'Alice Labs (acct_alice)', 'the switcher shows the new name');

  // Tokens from before the reset: an access token of the demo key and a settings token.
  const before = await signIn(dash.gw, DEMO.alice);
  assert.equal((await things(before.accessToken)).status, 200);
  const made = await op.send('POST', `/accounts/${ACCOUNT}/settings-tokens`, { name: 'before the reset' });
  assert.equal(made.status, 201, show(made));
  const settingsToken = made.body.message.token as string;
  assert.equal((await things(settingsToken)).status, 200);

  const reset = page.getByRole('button', { name: 'Reset all tokens of this account' });
  const dialog = page.getByRole('dialog');
  await reset.click();
  const message = await dialog.innerText();
  assert.match(message, /every access and refresh token of every API key of this account stops working/);
  assert.match(message, /every API settings token of this account is revoked for good/);
  assert.match(message, /clients must sign in again/);
  await checkAccessibility(page, 'account (reset dialog)');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await things(before.accessToken)).status, 200, 'Cancel reset nothing');
  assert.equal((await things(settingsToken)).status, 200, 'nor revoked the settings token');

  await reset.click();
  await dialog.getByRole('button', { name: 'Reset all tokens' }).click();
  await page.getByText(/All tokens of Alice Labs reset at .+: every key's tokens are refused and every API settings token is revoked/).waitFor();
  const refused = await things(before.accessToken);
  assert.equal(refused.status, 401, show(refused));
  assert.equal((await things(settingsToken)).status, 401, 'the settings token made before is refused');
  const listed = await op.get(`/accounts/${ACCOUNT}/settings-tokens`);
  assert.deepEqual(listed.body.message.items.map((item: { status: string }) => item.status), ['revoked']);

  // A token of the very millisecond of the reset counts as from before it: the clock moves on.
  dash.gw.clock.advance(1000);
  const after = await signIn(dash.gw, DEMO.alice);
  assert.equal((await things(after.accessToken)).status, 200, 'a fresh sign-in works');
});

test('account: an operator\'s switcher offers "Choose an account" where none is open, and shows a rename at once', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOperator(page);
  await page.goto(`${dash.url}/accounts`);
  await page.getByRole('heading', { level: 1, name: 'Accounts' }).waitFor();
  const switcher = page.getByLabel('Account', { exact: true });
  assert.equal(await switcher.locator('option:checked').innerText(), 'Choose an account', 'no account is shown as open');
  await page.getByRole('button', { name: 'Open' }).click();
  assert.equal(page.url(), `${dash.url}/accounts`, 'Open with no choice goes nowhere');

  await switcher.selectOption(ACCOUNT);
  await page.getByRole('button', { name: 'Open' }).click();
  await page.getByRole('heading', { level: 1, name: 'Alice Labs (demo)' }).waitFor();
  assert.equal(await switcher.locator('option:checked').innerText(), 'Alice Labs (demo) (acct_alice)');
  assert.equal(await switcher.locator('option', { hasText: 'Choose an account' }).count(), 0, 'with an account open, no placeholder');

  await page.getByLabel('Name', { exact: true }).fill('Alice Renamed');
  await page.getByRole('button', { name: 'Rename account' }).click();
  await page.getByRole('heading', { level: 1, name: 'Alice Renamed', exact: true }).waitFor();
  assert.equal(await switcher.locator('option:checked').innerText(), 'Alice Renamed (acct_alice)', 'the operator\'s switcher is read again after the rename');
});
