/**
 * The dashboard's pages of the mail flows in Chromium: asking for a reset, the reset link's
 * page (token read from the fragment and taken out of the address bar, a new password set, on
 * to sign-in) and the verification link's page, each checked by axe. The gateway runs without
 * mail: the tokens a mail would carry are made here and kept on the owner as the gateway keeps
 * them (test/http/owner-mail.test.ts follows the real mails' links).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RESET_TOKEN_PREFIX } from '../../src/owner/password-reset.js';
import { VERIFY_TOKEN_PREFIX } from '../../src/owner/email-verification.js';
import { makeOneTimeToken } from '../../src/owner/one-time-tokens.js';
import { browserSuite, checkAccessibility, OWNERS, screenshot, startDashboard } from '../helpers/dashboard.js';
import { anonymous } from '../helpers/owner.js';

test('forgot password, the reset link\'s page and the verification link\'s page', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const store = dash.gw.services.ownerStore;
  const alice = (await store.findOwnerByEmail(OWNERS.alice.email))!;
  const expiresAt = new Date(dash.gw.clock.now() + 600_000).toISOString();

  const page = await dash.newPage();
  await page.goto(`${dash.url}/forgot-password`);
  await page.getByRole('heading', { level: 1, name: 'Forgot your password?' }).waitFor();
  await checkAccessibility(page, 'forgot-password');
  await page.getByLabel('Email').fill(OWNERS.alice.email);
  await page.getByRole('button', { name: 'Send the reset link' }).click();
  await page.getByRole('status').filter({ hasText: 'a link to choose a new password is on its way' }).waitFor();

  const reset = makeOneTimeToken(RESET_TOKEN_PREFIX, alice.id);
  await store.updateOwner(alice.id, (owner) => ({ owner: { ...owner, passwordReset: { digest: reset.digest, expiresAt } }, result: undefined }));
  const requested: string[] = [];
  page.on('request', (request) => requested.push(request.url()));
  await page.goto(`${dash.gw.url}/owner/reset-password#${reset.token}`);
  await page.getByRole('heading', { level: 1, name: 'Choose a new password' }).waitFor();
  assert.equal(new URL(page.url()).pathname, '/dashboard/reset-password', 'redirected to the dashboard');
  assert.equal(await page.evaluate<string>('location.hash'), '', 'the token is out of the address bar');
  await checkAccessibility(page, 'reset-password');
  await screenshot(page, 'reset-password');
  const password = 'alice chose a new passphrase';
  await page.getByLabel('New password', { exact: true }).fill(password);
  await page.getByLabel('New password again').fill(password);
  await page.getByRole('button', { name: 'Set the new password' }).click();
  await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  await page.getByRole('main').getByRole('status').filter({ hasText: 'Your password is changed' }).waitFor();
  assert.deepEqual(requested.filter((address) => address.includes(reset.token)), [], 'no request URL holds the token');
  const signedIn = await anonymous(dash.gw).send('POST', '/session', { email: OWNERS.alice.email, password });
  assert.equal(signedIn.status, 200, 'the new password signs in');

  const verify = makeOneTimeToken(VERIFY_TOKEN_PREFIX, alice.id);
  await store.updateOwner(alice.id, (owner) => ({ owner: { ...owner, emailVerification: { digest: verify.digest, expiresAt, email: owner.email } }, result: undefined }));
  await page.goto(`${dash.gw.url}/owner/verify-email#${verify.token}`);
  await page.getByRole('status').filter({ hasText: 'Your email is confirmed.' }).waitFor();
  await checkAccessibility(page, 'verify-email');
  assert.ok((await store.findOwner(alice.id))!.emailVerifiedAt !== undefined);
});
