/**
 * One owner never sees another's account in the dashboard: every page of alice's account,
 * opened by bob, is "Account not found" with nothing of alice's on it, and bob's switcher and
 * accounts list hold only his account (and the reverse).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { browserSuite, checkAccessibility, startDashboard } from '../helpers/dashboard.js';

/** What of alice's account a page must not show: its name, ids, and role names bob's account does not have. */
const ALICE = ['Alice Labs', 'acct_alice', 'key_alice_1', 'key_alice_off', 'ak_demo_alice', 'Editor', 'Viewer', 'Billing Manager', 'Support Agent', 'Auditor', 'alice@demo.example'];
const BOB = ['Bob Works', 'acct_bob', 'key_bob_1', 'ak_demo_bob', 'Member', 'bob@demo.example'];

async function assertNotFound(page: Page, url: string, hidden: readonly string[]): Promise<void> {
  await page.goto(url);
  await page.getByRole('heading', { level: 1, name: 'Account not found' }).waitFor();
  const text = await page.locator('body').innerText();
  const options = await page.locator('option').allTextContents();
  for (const word of hidden) {
    assert.ok(!text.includes(word), `${url} shows "${word}"`);
    assert.ok(!options.some((option) => option.includes(word)), `${url}'s switcher offers "${word}"`);
  }
}

test('bob sees nothing of alice\'s account, and alice nothing of bob\'s', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const bob = await dash.newPage();
  await dash.signInAsOwner(bob, 'bob');
  await bob.waitForURL(`${dash.url}/accounts/acct_bob`);
  // The bar is drawn again once the account has loaded (its sections' nav with it): until then the
  // switcher offers a placeholder, as with no account open.
  await bob.getByRole('navigation', { name: 'Account Bob Works (demo)' }).waitFor();
  assert.deepEqual(await bob.getByLabel('Account', { exact: true }).locator('option').allTextContents(), ['Bob Works (demo) (acct_bob)']);

  const pages = ['', '/roles', '/roles/2', '/keys', '/keys/key_alice_1', '/settings-tokens', '/webhooks', '/sign-records', '/activity'];
  for (const rest of pages) await assertNotFound(bob, `${dash.url}/accounts/acct_alice${rest}`, ALICE);
  await checkAccessibility(bob, 'account not found');
  // The way back leads to bob's own account.
  await bob.getByRole('link', { name: 'Go to your accounts' }).click();
  await bob.waitForURL(`${dash.url}/accounts/acct_bob`);

  await bob.goto(`${dash.url}/accounts`);
  await bob.getByRole('heading', { level: 1, name: 'Accounts' }).waitFor();
  const list = bob.getByRole('region', { name: 'Accounts' });
  assert.deepEqual(await list.getByRole('link').allTextContents(), ['Bob Works (demo)']);
  assert.ok(!(await bob.locator('body').innerText()).includes('Alice'));
  await checkAccessibility(bob, 'accounts (owner)');

  const alice = await dash.newPage();
  await dash.signInAsOwner(alice, 'alice');
  await assertNotFound(alice, `${dash.url}/accounts/acct_bob/keys`, BOB);
  await assertNotFound(alice, `${dash.url}/accounts/acct_bob/keys/key_bob_1`, BOB);
});
