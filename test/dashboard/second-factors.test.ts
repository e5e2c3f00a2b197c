/**
 * Second factors in Chromium against a real gateway (issue 30). TOTP: enrolled on the page (the
 * QR code and the key shown, a code computed here with otpauth at the gateway's clock, the
 * recovery codes shown once), then the sign-in page's second step asks for a code. Passkeys,
 * through the DevTools virtual authenticator (CDP `WebAuthn`: ctap2, internal, resident keys,
 * user verification): registered on the page, used passwordless and as the second factor after
 * the password, then removed. WebAuthn wants a domain as its relying party, so the pages are
 * opened at http://localhost:<port> (the gateway's own origin for a request there, as no
 * `owner.publicOrigin` is set). Each page passes the axe check.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Secret, TOTP } from 'otpauth';
import type { Page } from 'playwright-core';
import { sharedChromium } from '../helpers/browser.js';
import { browserSuite, checkAccessibility, OWNERS, screenshot, startDashboard, type Dashboard } from '../helpers/dashboard.js';
import { show } from '../helpers/gateway.js';
import { anonymous, operator } from '../helpers/owner.js';

/** A page in a fresh context at the dashboard's localhost address, failing the test on any script error or CSP violation. */
async function localhostPage(t: TestContext, dash: Dashboard): Promise<{ page: Page; base: string }> {
  const base = dash.url.replace('//127.0.0.1:', '//localhost:');
  const context = await (await sharedChromium()).newContext({ viewport: { width: 1280, height: 860 } });
  t.after(() => context.close());
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) problems.push(`console error: ${message.text()}`);
  });
  t.after(() => assert.deepEqual(problems, [], 'no script error and no Content-Security-Policy violation'));
  return { page, base };
}

async function signInWithForm(page: Page, base: string, who: keyof typeof OWNERS): Promise<void> {
  await page.goto(`${base}/sign-in`);
  await page.getByLabel('Email').fill(OWNERS[who].email);
  await page.getByLabel('Password', { exact: true }).fill(OWNERS[who].password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
}

async function signOut(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
}

test('second factors in the dashboard: TOTP enrolled and asked for; passkeys registered, used with and without the password, removed', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const { gw } = dash;

  await t.test('TOTP: enroll on the page, then sign in with a code at the second step', async (st) => {
    const { page, base } = await localhostPage(st, dash);
    await signInWithForm(page, base, 'bob');
    await page.waitForURL((url) => !url.pathname.endsWith('/sign-in'));
    await page.getByRole('link', { name: 'Second factors' }).click();
    await page.getByRole('heading', { level: 1, name: 'Second factors' }).waitFor();
    await checkAccessibility(page, 'second factors (none yet)');
    await page.getByRole('button', { name: 'Set up an authenticator app' }).click();
    const qr = page.getByRole('img', { name: /QR code/ });
    await qr.waitFor();
    assert.match((await qr.getAttribute('src')) ?? '', /^data:image\/svg\+xml;base64,/);
    const secret = (await page.locator('code.mono').first().innerText()).trim();
    assert.match(secret, /^[A-Z2-7]{32}$/);
    await checkAccessibility(page, 'second factors (enrolling)');
    await page.getByLabel('Code from the app').fill(TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: gw.clock.now() }));
    await page.getByRole('button', { name: 'Turn on' }).click();
    const codes = page.getByRole('list', { name: 'Recovery codes' });
    await codes.waitFor();
    assert.equal(await codes.getByRole('listitem').count(), 10);
    await checkAccessibility(page, 'second factors (recovery codes shown once)');
    await screenshot(page, 'second-factors-recovery-codes');
    await page.reload();
    await page.getByText(/An authenticator app is on since/).waitFor();
    assert.match(await page.locator('main').innerText(), /10 of 10 recovery codes are unused/);
    assert.ok(!(await page.content()).includes(secret), 'the key is not shown again');
    await checkAccessibility(page, 'second factors (TOTP on)');
    // The account's requirement, from the page.
    await page.getByLabel(/must use a second factor/).check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText(/without a second factor now set one up/).waitFor();
    assert.equal((await operator(gw).get(`/accounts/${OWNERS.bob.accountId}/second-factor-requirement`)).body.message.required, true);

    await signOut(page);
    gw.clock.advance(30_000);
    await page.getByLabel('Email').fill(OWNERS.bob.email);
    await page.getByLabel('Password', { exact: true }).fill(OWNERS.bob.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'Second factor' }).waitFor();
    await checkAccessibility(page, 'sign-in (second factor)');
    await page.getByLabel('Code', { exact: true }).fill('000000');
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.getByRole('alert').filter({ hasText: /.+/ }).waitFor();
    await page.getByLabel('Code', { exact: true }).fill(TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: gw.clock.now() }));
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.waitForURL((url) => !url.pathname.endsWith('/sign-in'));
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
  });

  await t.test('passkeys: register in a virtual authenticator, sign in with it alone and after the password, remove it', async (st) => {
    const { page, base } = await localhostPage(st, dash);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });

    // Alice's account requires a second factor and she has none: the dashboard sends her to enroll.
    assert.equal((await operator(gw).send('PUT', `/accounts/${OWNERS.alice.accountId}/second-factor-requirement`, { required: true })).status, 200);
    await signInWithForm(page, base, 'alice');
    await page.getByRole('heading', { level: 1, name: 'Second factors' }).waitFor();
    await page.getByText('Set up a second factor before anything else: it is required of you.').waitFor();
    await page.getByRole('link', { name: /Manage passkeys/ }).click();
    await page.getByRole('heading', { level: 1, name: 'Passkeys' }).waitFor();
    await page.getByText('You have no passkeys yet.').waitFor();
    await checkAccessibility(page, 'passkeys (none)');
    await page.getByLabel('Passkey name').fill('work laptop');
    await page.getByRole('button', { name: 'Register passkey' }).click();
    await page.getByText('Passkey work laptop registered.').waitFor();
    const row = page.getByRole('row').filter({ hasText: 'work laptop' });
    await row.waitFor();
    await checkAccessibility(page, 'passkeys (one)');
    await screenshot(page, 'passkeys');
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    assert.equal(credentials.length, 1);
    assert.equal(credentials[0]!.isResidentCredential, true, 'a discoverable credential');

    await page.goto(`${base}/accounts/${OWNERS.alice.accountId}`);
    await page.getByRole('navigation', { name: /Account/ }).waitFor();
    assert.equal((await operator(gw).send('PUT', `/accounts/${OWNERS.alice.accountId}/second-factor-requirement`, { required: false })).status, 200);

    // Passwordless.
    await signOut(page);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.waitForURL((url) => !url.pathname.endsWith('/sign-in'));
    await page.getByText(OWNERS.alice.email).waitFor();

    // After the password, as the second factor: the password alone is mfa_required now.
    const bare = await anonymous(gw).send('POST', '/session', { email: OWNERS.alice.email, password: OWNERS.alice.password });
    assert.equal(bare.body.message.code, 'mfa_required', show(bare));
    await signOut(page);
    await page.getByLabel('Email').fill(OWNERS.alice.email);
    await page.getByLabel('Password', { exact: true }).fill(OWNERS.alice.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'Second factor' }).waitFor();
    await page.getByRole('button', { name: 'Use a passkey instead' }).click();
    await page.waitForURL((url) => !url.pathname.endsWith('/sign-in'));

    // Removed: the password alone signs in again.
    await page.goto(`${base}/security/passkeys`);
    await row.waitFor();
    await page.getByRole('button', { name: 'Remove work laptop' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove passkey' }).click();
    await page.getByText('Passkey work laptop removed.').waitFor();
    await page.getByText('You have no passkeys yet.').waitFor();
    const plain = await anonymous(gw).send('POST', '/session', { email: OWNERS.alice.email, password: OWNERS.alice.password });
    assert.equal(plain.status, 200, show(plain));
    const audit = (await anonymous(gw).get(`/accounts/${OWNERS.alice.accountId}/audit`, { cookie: plain.headers.getSetCookie()[0]!.split(';')[0]! })).body.message.items as { action: string }[];
    assert.ok(audit.some((e) => e.action === 'owner.passkey_add') && audit.some((e) => e.action === 'owner.passkey_remove'), JSON.stringify(audit.map((e) => e.action)));
  });
});
