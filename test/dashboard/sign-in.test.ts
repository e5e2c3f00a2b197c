/**
 * Signing in and out of the dashboard in Chromium, against a real gateway: owners (session
 * cookie), operators (admin token in this tab's sessionStorage), wrong passwords and the
 * lockout, an ended session, `next` and its open-redirect check, the initial-password gate and
 * the password change, and the account switcher with the keyboard.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { call, show } from '../helpers/gateway.js';
import { ADMIN_TOKEN, assertNoSidewaysScroll, browserSuite, checkAccessibility, OWNERS, PHONE, screenshot, startDashboard } from '../helpers/dashboard.js';
import { operator, signIn as signInApi } from '../helpers/owner.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const h1 = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 1, name });

/** The error line tied to a field (forms.ts: `<id>-error`, in the field's aria-describedby). */
async function errorOf(field: Locator): Promise<Locator> {
  const id = await field.getAttribute('id');
  assert.match(await field.getAttribute('aria-describedby') ?? '', new RegExp(`\\b${id}-error\\b`));
  return field.page().locator(`#${id}-error`);
}

async function fillOwner(page: Page, email: string, password: string): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
}

test('an owner signs in and out; a wrong password, `next` and other origins in it', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();

  await page.goto(`${dash.url}/sign-in`);
  await h1(page, 'Sign in').waitFor();
  assert.equal(await page.getByLabel('Email').getAttribute('autocomplete'), 'username');
  assert.equal(await page.getByLabel('Password', { exact: true }).getAttribute('autocomplete'), 'current-password');
  await checkAccessibility(page, 'sign-in (empty)');
  await screenshot(page, 'sign-in');

  // A wrong password and an unknown email get the gateway's one answer, above the form.
  await fillOwner(page, OWNERS.alice.email, 'not alice demo passphrase');
  const alert = page.getByRole('alert').filter({ hasText: 'The email or password is not valid.' });
  await alert.waitFor();
  assert.equal(await page.getByLabel('Password', { exact: true }).inputValue(), '', 'the wrong password is cleared');
  await checkAccessibility(page, 'sign-in (wrong password)');
  await fillOwner(page, 'nobody@demo.example', 'whatever passphrase it is');
  await alert.waitFor();
  assert.match(new URL(page.url()).pathname, /\/sign-in$/);

  // Signed in: alice has one account, so home is that account.
  await fillOwner(page, OWNERS.alice.email, OWNERS.alice.password);
  await page.waitForURL(`${dash.url}/accounts/acct_alice`);
  await page.getByText(OWNERS.alice.email, { exact: true }).waitFor();
  // A signed-in visitor on sign-in goes home.
  await page.goto(`${dash.url}/sign-in`);
  await page.waitForURL(`${dash.url}/accounts/acct_alice`);

  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === 'gw_session');
  assert.ok(session !== undefined, 'the session cookie is set');
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, 'Strict');
  const withCookie = () => call(`${dash.gw.url}/owner/v1/session`, { headers: { cookie: `gw_session=${session.value}` } });
  assert.equal((await withCookie()).status, 200, 'the cookie works while signed in');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await h1(page, 'Sign in').waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: 'You are signed out.' }).waitFor();
  const after = await withCookie();
  assert.equal(after.status, 401, show(after));
  assert.equal(after.body.message.code, 'session_required');
  await page.goto(`${dash.url}/accounts/acct_alice/roles`);
  await h1(page, 'Sign in').waitFor();
  assert.equal(new URL(page.url()).searchParams.get('next'), '/dashboard/accounts/acct_alice/roles');

  // `next` to another origin (or protocol-relative) is not followed: home instead.
  for (const next of ['https://evil.example/', '//evil.example', '/dashboard/../..//evil.example/']) {
    const other = await dash.newPage();
    await other.goto(`${dash.url}/sign-in?next=${encodeURIComponent(next)}`);
    await fillOwner(other, OWNERS.alice.email, OWNERS.alice.password);
    await other.waitForURL(`${dash.url}/accounts/acct_alice`);
    assert.equal(new URL(other.url()).origin, new URL(dash.url).origin, next);
  }
  // A dashboard page in `next` is followed.
  await fillOwner(page, OWNERS.alice.email, OWNERS.alice.password);
  await page.waitForURL(`${dash.url}/accounts/acct_alice/roles`);
});

test('a lockout after failed sign-ins shows when to try again', browserSuite(), async (t) => {
  const dash = await startDashboard(t, { overrides: { limits: { mode: 'enforce', ownerSignIn: { failuresPerEmail: [{ limit: 2, seconds: 60 }] } } } });
  const page = await dash.newPage();
  await page.goto(`${dash.url}/sign-in`);
  await h1(page, 'Sign in').waitFor();
  for (let i = 0; i < 2; i += 1) {
    await fillOwner(page, OWNERS.bob.email, 'a wrong passphrase for bob');
    await page.getByRole('alert').filter({ hasText: 'The email or password is not valid.' }).waitFor();
  }
  // Locked out: the right password too, until the window ends.
  await fillOwner(page, OWNERS.bob.email, OWNERS.bob.password);
  await page.getByRole('alert').filter({ hasText: /^Too many attempts\. Try again in \d+ seconds\.$/ }).waitFor();
  assert.match(new URL(page.url()).pathname, /\/sign-in$/);
});

test('with the store down, sign-in says so instead of blaming the password', { skip: browserSuite().skip || redisSuite().skip }, async (t) => {
  const redis = await startRedis(t);
  const dash = await startDashboard(t, { overrides: { redis: { url: redis.url } } });
  const page = await dash.newPage();
  await page.goto(`${dash.url}/sign-in`);
  await h1(page, 'Sign in').waitFor();
  await redis.kill();
  await fillOwner(page, OWNERS.alice.email, OWNERS.alice.password);
  await page.getByRole('alert').filter({ hasText: 'Signing in is not possible right now: the gateway\'s store is unavailable. Try again in a moment.' }).waitFor();
  assert.match(new URL(page.url()).pathname, /\/sign-in$/);
});

test('an ended session returns to sign-in, then to the page asked for', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await dash.signInAsOwnerWithForm(page, 'bob');
  await page.waitForURL(`${dash.url}/accounts/acct_bob`);
  // Drawn (the account read) before the clock moves: else that read is the one refused.
  const roles = page.getByRole('navigation', { name: /Account / }).getByRole('link', { name: 'Roles' });
  await roles.waitFor();

  dash.gw.clock.advance(31 * 60 * 1000);
  await roles.click();
  await h1(page, 'Sign in').waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: 'Your session has ended. Sign in again to go on.' }).waitFor();
  assert.equal(new URL(page.url()).searchParams.get('next'), '/dashboard/accounts/acct_bob/roles');

  await fillOwner(page, OWNERS.bob.email, OWNERS.bob.password);
  await page.waitForURL(`${dash.url}/accounts/acct_bob/roles`);
});

test('an operator signs in with the admin token, switches accounts with the keyboard, and signs out', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage();
  await page.goto(`${dash.url}/sign-in`);
  await page.getByLabel('Admin token').fill('gwadm_not-the-token-at-all-0000000000000000');
  await page.getByRole('button', { name: 'Sign in as operator' }).click();
  await page.getByRole('alert').filter({ hasText: 'The admin token is not valid.' }).waitFor();

  await dash.signInAsOperator(page);
  await h1(page, 'Accounts').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('gateway-dashboard-admin-token')), ADMIN_TOKEN);
  const list = page.getByRole('region', { name: 'Accounts' });
  await list.getByRole('link', { name: 'Alice Labs (demo)' }).waitFor();
  await list.getByRole('link', { name: 'Bob Works (demo)' }).waitFor();
  await checkAccessibility(page, 'accounts (operator)');
  await screenshot(page, 'accounts');

  // The switcher lists both demo accounts under a placeholder (none is open here); bob's opens
  // with the keyboard alone.
  const switcher = page.getByLabel('Account', { exact: true });
  assert.deepEqual(await switcher.locator('option').allTextContents(), ['Choose an account', 'Alice Labs (demo) (acct_alice)', 'Bob Works (demo) (acct_bob)']);
  await page.getByRole('form', { name: 'Switch account' }).getByRole('link', { name: 'All accounts' }).waitFor();
  await switcher.focus();
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  assert.equal(await switcher.inputValue(), 'acct_bob');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate<string | undefined>('document.activeElement?.textContent'), 'Open');
  await page.keyboard.press('Enter');
  await page.waitForURL(`${dash.url}/accounts/acct_bob`);
  assert.equal(await page.getByLabel('Account', { exact: true }).inputValue(), 'acct_bob');

  // A reload keeps the operator signed in (this tab's sessionStorage); another tab does not.
  await page.reload();
  await page.getByText('Operator (admin token)', { exact: true }).waitFor();
  assert.equal(await page.getByRole('link', { name: 'Change password' }).count(), 0, 'operators have no password here');
  assert.match(page.url(), /\/accounts\/acct_bob$/);
  const other = await dash.newPage();
  await other.goto(`${dash.url}/accounts/acct_bob`);
  await h1(other, 'Sign in').waitFor();

  await page.getByRole('button', { name: 'Sign out' }).click();
  await h1(page, 'Sign in').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'the admin token is forgotten');
  await page.goto(`${dash.url}/accounts`);
  await h1(page, 'Sign in').waitFor();
});

test('an operator pages through the accounts, fifty at a time', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const op = operator(dash.gw);
  for (let i = 0; i < 50; i += 1) {
    const made = await op.send('POST', '/accounts', { id: `acct_many_${String(i).padStart(2, '0')}`, name: `Many ${i}` });
    assert.equal(made.status, 201, show(made));
  }
  const disabled = await op.send('PATCH', '/accounts/acct_many_49', { enabled: false });
  assert.equal(disabled.status, 200, show(disabled));
  const page = await dash.newPage();
  await dash.signInAsOperator(page);
  await h1(page, 'Accounts').waitFor();
  const rows = page.getByRole('region', { name: 'Accounts' }).locator('tbody tr');
  // The heading comes first; the table once the page of accounts is read.
  await rows.nth(49).waitFor();
  assert.equal(await rows.count(), 50);
  assert.equal(await rows.first().locator('td').nth(1).textContent(), 'acct_alice');
  await page.getByRole('navigation', { name: 'More accounts' }).getByRole('link', { name: 'Next page' }).click();
  await page.waitForURL(/\/accounts\?cursor=/);
  await page.getByRole('link', { name: 'Many 49' }).waitFor();
  // The status is written, not only coloured.
  assert.equal(await rows.count(), 2, 'the 51st and 52nd of 52');
  assert.deepEqual(await rows.last().locator('td').allTextContents(), ['Many 49', 'acct_many_49', 'Disabled']);
  assert.equal(await page.getByRole('link', { name: 'Next page' }).count(), 0);
  await page.getByRole('link', { name: 'First page' }).click();
  await page.waitForURL(`${dash.url}/accounts`);
  await page.getByRole('link', { name: 'Alice Labs (demo)' }).waitFor();
});

test('an operator of a gateway without accounts sees the empty state', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  for (const id of ['acct_alice', 'acct_bob']) {
    const deleted = await operator(dash.gw).send('DELETE', `/accounts/${id}`);
    assert.equal(deleted.status, 200, show(deleted));
  }
  const page = await dash.newPage();
  await dash.signInAsOperator(page);
  await h1(page, 'Accounts').waitFor();
  await page.getByText('There are no accounts yet.').waitFor();
  assert.equal(await page.getByRole('table').count(), 0);
  assert.equal(await page.getByLabel('Account', { exact: true }).count(), 0, 'no switcher with nothing to switch to');
  await checkAccessibility(page, 'accounts (empty)');
});

test('an owner with an initial password changes it before anything else', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const email = 'carol@demo.example';
  const initial = 'an initial passphrase from the operator';
  const added = await operator(dash.gw).send('POST', '/accounts/acct_bob/owners', { email, initialPassword: initial });
  assert.equal(added.status, 201, show(added));

  const page = await dash.newPage();
  await page.goto(`${dash.url}/sign-in?next=${encodeURIComponent('/dashboard/accounts/acct_bob/keys')}`);
  await fillOwner(page, email, initial);
  await page.waitForURL(`${dash.url}/password`);
  await h1(page, 'Change password').waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: /Choose a new password before anything else/ }).waitFor();
  // Other pages lead back here.
  await page.goto(`${dash.url}/accounts/acct_bob/roles`);
  await page.waitForURL(`${dash.url}/password`);
  await h1(page, 'Change password').waitFor();

  const current = page.getByLabel('Current password');
  const next = page.getByLabel('New password', { exact: true });
  const again = page.getByLabel('New password again');
  assert.equal(await next.getAttribute('autocomplete'), 'new-password');
  await page.getByText('15 to 256 characters; a long passphrase is best.', { exact: true }).waitFor();
  const chosen = 'carol chose this long passphrase';
  // Different confirmation: said next to that field, nothing sent.
  await current.fill(initial);
  await next.fill(chosen);
  await again.fill(`${chosen}!`);
  await page.getByRole('button', { name: 'Change password' }).click();
  await (await errorOf(again)).filter({ hasText: /^This is not the same as the new password above\. Type it again\.$/ }).waitFor();
  assert.equal(await again.getAttribute('aria-invalid'), 'true');
  await checkAccessibility(page, 'password (field error)');
  await screenshot(page, 'password');
  // Too short: the gateway's message at the new password.
  await next.fill('short');
  await again.fill('short');
  await page.getByRole('button', { name: 'Change password' }).click();
  // (the gateway's own sentence, whatever its wording: it names the bound)
  await (await errorOf(next)).filter({ hasText: /15/ }).waitFor();
  assert.equal(await next.getAttribute('aria-invalid'), 'true');
  // A wrong current password, at its field.
  await current.fill('not the initial passphrase at all');
  await next.fill(chosen);
  await again.fill(chosen);
  await page.getByRole('button', { name: 'Change password' }).click();
  await (await errorOf(current)).filter({ hasText: /^This is not your current password\.$/ }).waitFor();

  await current.fill(initial);
  await page.getByRole('button', { name: 'Change password' }).click();
  await page.waitForURL(`${dash.url}/accounts/acct_bob`);
  await page.getByRole('main').getByRole('status').filter({ hasText: 'Every other session of yours has ended' }).waitFor();
  await page.getByRole('navigation', { name: /^Account / }).getByRole('link', { name: 'API keys' }).click();
  await page.waitForURL(`${dash.url}/accounts/acct_bob/keys`);

  // The new password is the one now (checked through the owner API).
  const session = await signInApi(dash.gw, email, chosen);
  assert.equal(session.signIn.body.message.owner.mustChangePassword, false);
});

test('the sign-in page on a phone', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const page = await dash.newPage({ viewport: PHONE });
  await page.goto(`${dash.url}/sign-in`);
  await h1(page, 'Sign in').waitFor();
  await assertNoSidewaysScroll(page, 'sign-in on a phone');
  await screenshot(page, 'phone-sign-in');
  // Signed in, the header (switcher, who, password link, sign-out) fits too.
  await dash.signInAsOwnerWithForm(page, 'alice');
  await page.goto(`${dash.url}/accounts`);
  await h1(page, 'Accounts').waitFor();
  await assertNoSidewaysScroll(page, 'accounts on a phone, signed in');
  await page.getByRole('link', { name: 'Change password' }).click();
  await h1(page, 'Change password').waitFor();
});
