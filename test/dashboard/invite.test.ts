/**
 * The invite link in Chromium: `<origin>/owner/invite#gwinv_…` as the owner API hands it out
 * redirects to the dashboard's invite page with the fragment kept; the page takes the token out
 * of the address bar, accepts the invite with a chosen password and leads to sign-in; a used
 * invite is "not valid".
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { show } from '../helpers/gateway.js';
import { browserSuite, checkAccessibility, OWNERS, screenshot, startDashboard } from '../helpers/dashboard.js';
import { signIn as signInApi } from '../helpers/owner.js';

test('an invite link opens the invite page, makes a new owner, and works once', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const alice = await signInApi(dash.gw, OWNERS.alice.email, OWNERS.alice.password);
  const made = await alice.send('POST', '/accounts/acct_alice/invites', { email: 'dave@demo.example' });
  assert.equal(made.status, 201, show(made));
  const { url, token } = made.body.message as { url: string; token: string };
  assert.equal(url, `${dash.gw.url}/owner/invite#${token}`);

  const page = await dash.newPage();
  const requested: string[] = [];
  page.on('request', (request) => requested.push(request.url()));
  await page.goto(url);
  await page.getByRole('heading', { level: 1, name: 'Accept an invite' }).waitFor();
  assert.equal(new URL(page.url()).pathname, '/dashboard/invite', 'redirected to the dashboard');
  assert.equal(await page.evaluate<string>('location.hash'), '', 'the token is out of the address bar');
  assert.ok(!page.url().includes(token));
  await page.getByText('If you already have an owner account, enter its password').waitFor();
  await checkAccessibility(page, 'invite');
  await screenshot(page, 'invite');

  const password = 'dave picked a long passphrase';
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByLabel('Password again').fill(password);
  await page.getByRole('button', { name: 'Accept invite' }).click();
  await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: 'The invite is accepted.' }).waitFor();
  // The token went in the POST body only: no URL the page asked for holds it.
  assert.deepEqual(requested.filter((address) => address.includes(token)), [], 'no request URL holds the token');
  assert.ok(!(await page.evaluate<string>('JSON.stringify(history.state) + location.href')).includes(token));

  await page.getByLabel('Email').fill('dave@demo.example');
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${dash.url}/accounts/acct_alice`);
  await page.getByText('dave@demo.example', { exact: true }).waitFor();

  // Once only: the same link again is not valid.
  const again = await dash.newPage();
  await again.goto(url);
  await again.getByRole('heading', { level: 1, name: 'Accept an invite' }).waitFor();
  await again.getByLabel('Password', { exact: true }).fill(password);
  await again.getByLabel('Password again').fill(password);
  await again.getByRole('button', { name: 'Accept invite' }).click();
  await again.getByRole('alert').filter({ hasText: 'This invite is not valid.' }).waitFor();
  assert.equal(await again.getByRole('button', { name: 'Accept invite' }).count(), 0, 'the form is gone');

  // A link without its fragment says so.
  const bare = await dash.newPage();
  await bare.goto(`${dash.gw.url}/owner/invite`);
  await bare.getByRole('alert').filter({ hasText: 'This link holds no invite.' }).waitFor();
});

test('an owner already signed in accepts an invite with their own password and switches to the new account', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const alice = await signInApi(dash.gw, OWNERS.alice.email, OWNERS.alice.password);
  const made = await alice.send('POST', '/accounts/acct_alice/invites', { email: OWNERS.bob.email });
  assert.equal(made.status, 201, show(made));

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'bob');
  await page.goto(made.body.message.url as string);
  await page.getByRole('heading', { level: 1, name: 'Accept an invite' }).waitFor();
  const password = page.getByLabel('Password', { exact: true });
  // The invited email is bob's: his own password, not a new one.
  await password.fill('a new passphrase bob does not have');
  await page.getByLabel('Password again').fill('a new passphrase bob does not have');
  await page.getByRole('button', { name: 'Accept invite' }).click();
  await page.locator(`#${await password.getAttribute('id')}-error`).filter({ hasText: /this is not its password/ }).waitFor();
  assert.equal(await password.getAttribute('aria-invalid'), 'true');

  await password.fill(OWNERS.bob.password);
  await page.getByLabel('Password again').fill(OWNERS.bob.password);
  await page.getByRole('button', { name: 'Accept invite' }).click();
  await page.waitForURL(`${dash.url}/accounts/acct_alice`);
  await page.getByRole('main').getByRole('status').filter({ hasText: 'The invite is accepted: you are now an owner of this account.' }).waitFor();
  assert.deepEqual(await page.getByLabel('Account', { exact: true }).locator('option').allTextContents(), ['Alice Labs (demo) (acct_alice)', 'Bob Works (demo) (acct_bob)']);
});
