/**
 * The API settings tokens page in Chromium against a real gateway: a token made in the page
 * (read from the shown-once box and from the clipboard) passes the proxied route as a bearer,
 * is gone from the page after a reload, and once revoked in the page (Cancel first, which
 * changes nothing) is refused and listed as revoked.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { browserSuite, checkAccessibility, OWNERS, screenshot, startDashboard } from '../helpers/dashboard.js';
import { call, show } from '../helpers/gateway.js';
import { operator } from '../helpers/owner.js';

const ACCOUNT = OWNERS.alice.accountId;

test('settings tokens: create one in the page, call a proxied route with it, revoke it in the page and see it refused', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  const things = (token: string) => call(`${dash.gw.url}/things`, { token });

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/settings-tokens`);
  await page.getByRole('heading', { level: 1, name: 'API settings tokens' }).waitFor();
  await page.getByText('This account has no API settings tokens yet.').waitFor();
  await checkAccessibility(page, 'settings-tokens (empty)');

  // The gateway's refusal of an empty name shows at the field.
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await page.getByLabel('Name').getAttribute('aria-invalid'), 'true');
  await checkAccessibility(page, 'settings-tokens (error at a field)');

  await page.getByLabel('Name').fill('reporting');
  await page.getByLabel('Scopes').fill('read');
  await page.getByLabel('Expiry').selectOption({ label: '30 days' });
  await page.getByRole('button', { name: 'Create token' }).click();
  const box = page.getByRole('region', { name: 'API settings token reporting' });
  await box.waitFor();
  const token = await page.getByLabel('API settings token', { exact: true }).inputValue();
  assert.match(token, /^gwst_[0-9A-Za-z]{49}$/);
  assert.match(await box.innerText(), /Authorization: Bearer gwst_…/, 'how to use it is said');
  await box.getByRole('button', { name: 'Copy' }).click();
  await box.getByText('Copied').waitFor();
  assert.equal(await page.evaluate('navigator.clipboard.readText()'), token, 'Copy puts the token on the clipboard');
  const row = page.getByRole('region', { name: 'API settings tokens' }).getByRole('row').filter({ hasText: 'reporting' });
  assert.match(await row.innerText(), new RegExp(`${token.slice(0, 9)}…[\\s\\S]*read[\\s\\S]*Active`), 'listed with its start, scopes and status');
  await checkAccessibility(page, 'settings-tokens (shown-once token)');
  await screenshot(page, 'settings-token-created');

  const listed = await op.get(`/accounts/${ACCOUNT}/settings-tokens`);
  const made = listed.body.message.items.find((item: { name: string }) => item.name === 'reporting') as { id: string; expiresAt: string; createdAt: string };
  assert.equal(Date.parse(made.expiresAt) - Date.parse(made.createdAt), 30 * 86_400_000, 'the expiry chosen');

  const before = await things(token);
  assert.equal(before.status, 200, show(before));
  assert.deepEqual(dash.backend.received.at(-1)!.headers['x-key-id'], [made.id], 'the backend was told the token\'s id');

  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'API settings tokens' }).waitFor();
  await row.waitFor();
  assert.equal(await page.evaluate(`document.documentElement.outerHTML.includes(${JSON.stringify(token)}) || [...document.querySelectorAll('input')].some((field) => field.value === ${JSON.stringify(token)})`), false, 'after a reload the token is nowhere in the page');
  assert.ok(!page.url().includes(token));
  await checkAccessibility(page, 'settings-tokens');
  await screenshot(page, 'settings-tokens');

  // Revoke: the button names the token; Cancel changes nothing; confirmed, the token is refused.
  const revoke = page.getByRole('button', { name: `Revoke reporting (${token.slice(0, 9)}…)` });
  const dialog = page.getByRole('dialog');
  await revoke.click();
  assert.match(await dialog.innerText(), /Every call made with reporting \(gwst_.{4}…\) is refused at once, on every instance of the gateway, for good/);
  await checkAccessibility(page, 'settings-tokens (revoke dialog)');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await op.get(`/accounts/${ACCOUNT}/settings-tokens/${made.id}`)).body.message.status, 'active', 'Cancel revoked nothing');
  assert.equal((await things(token)).status, 200);

  await revoke.click();
  await dialog.getByRole('button', { name: 'Revoke token' }).click();
  await page.getByText('API settings token reporting revoked').waitFor();
  const after = await things(token);
  assert.equal(after.status, 401, show(after));
  assert.match(await row.innerText(), /Revoked/, 'listed as revoked');
  assert.equal(await revoke.count(), 0, 'a revoked token has no Revoke button');
  assert.equal((await op.get(`/accounts/${ACCOUNT}/settings-tokens/${made.id}`)).body.message.status, 'revoked');
});
