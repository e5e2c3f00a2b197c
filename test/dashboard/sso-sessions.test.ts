/**
 * Single sign-on and sessions in the dashboard, in Chromium: the sign-in page shows "Sign in
 * with <provider>" (a link to /owner/v1/sso/start) and a callback's refusal in words; the
 * invite page offers accepting with the provider; a session made through the provider (driven
 * with fetch: test/http/owner-sso.test.ts walks the provider itself) opens the dashboard; the
 * sessions page lists the owner's sessions with the current one marked and ends another. Each
 * page passes axe.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { browserSuite, checkAccessibility, OWNERS, screenshot, startDashboard } from '../helpers/dashboard.js';
import { show } from '../helpers/gateway.js';
import { drive, startLoginProvider, SSO_CLIENT_ID, SSO_CLIENT_SECRET } from '../helpers/oidc-login.js';
import { anonymous, operator, sessionFrom } from '../helpers/owner.js';

test('the sign-in page offers single sign-on; the sessions page lists and ends sessions', browserSuite(), async (t) => {
  const idp = await startLoginProvider(t, { alice: { email: OWNERS.alice.email, email_verified: true } });
  const dash = await startDashboard(t, { overrides: { owner: { sso: { issuer: idp.issuer, clientId: SSO_CLIENT_ID, clientSecret: SSO_CLIENT_SECRET, displayName: 'Test IdP' } } } });
  idp.register(`${dash.gw.url}/owner/v1/sso/callback`);

  await t.test('sign-in: the provider\'s button, and a refusal said in words', async () => {
    const page = await dash.newPage();
    await page.goto(`${dash.url}/sign-in?sso_error=sso_not_invited`);
    const button = page.getByRole('link', { name: 'Sign in with Test IdP' });
    await button.waitFor();
    assert.equal(await button.getAttribute('href'), '/owner/v1/sso/start');
    assert.match(await page.getByRole('alert').filter({ hasText: 'invite' }).innerText(), /No owner of this gateway has the email/);
    await checkAccessibility(page, 'sign-in (single sign-on, refused)');
    await screenshot(page, 'sign-in-sso');
  });

  await t.test('invite: accept with the provider, the token going to the gateway only', async () => {
    const made = await operator(dash.gw).send('POST', `/accounts/${OWNERS.bob.accountId}/invites`, { email: 'new.owner@example.com' });
    assert.equal(made.status, 201, show(made));
    const page = await dash.newPage();
    await page.goto(`${dash.url}/invite#${made.body.message.token}`);
    const button = page.getByRole('link', { name: 'Accept with Test IdP' });
    await button.waitFor();
    assert.equal(await button.getAttribute('href'), `/owner/v1/sso/start?invite=${made.body.message.token}`);
    await checkAccessibility(page, 'invite (single sign-on)');
  });

  await t.test('a session made through the provider opens the dashboard; the sessions page ends another', async () => {
    idp.loginAs('alice');
    const { location, jar } = await drive(`${dash.gw.url}/owner/v1/sso/start`);
    assert.equal(location, '/dashboard/');
    const token = jar.get(new URL(dash.gw.url), 'gw_session')!;
    // Another browser of alice's, by password.
    const phone = sessionFrom(dash.gw, await anonymous(dash.gw).send('POST', '/session', { email: OWNERS.alice.email, password: OWNERS.alice.password }, { 'user-agent': 'Alice\'s phone' }));

    const page = await dash.newPage();
    await page.context().addCookies([{ name: 'gw_session', value: token, url: dash.gw.url, httpOnly: true, sameSite: 'Strict' }]);
    await page.goto(`${dash.url}/sessions`);
    await page.getByRole('heading', { level: 1, name: 'Your sessions' }).waitFor();
    const rows = page.getByRole('region', { name: 'Your sessions' }).getByRole('row');
    await rows.filter({ hasText: 'Alice\'s phone' }).waitFor();
    assert.equal(await rows.count(), 3, 'a header and two sessions');
    assert.match(await rows.filter({ hasText: 'This session' }).innerText(), /sso-test-browser/, 'the provider-made session is this one');
    await checkAccessibility(page, 'sessions');
    await screenshot(page, 'sessions');

    await rows.filter({ hasText: 'Alice\'s phone' }).getByRole('button', { name: /^End/ }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'End session' }).click();
    await page.getByRole('status').filter({ hasText: 'Session ended' }).waitFor();
    assert.equal(await rows.count(), 2);
    assert.equal((await phone.get('/session')).status, 401, 'the phone is signed out');
    await checkAccessibility(page, 'sessions (one ended)');
  });
});
