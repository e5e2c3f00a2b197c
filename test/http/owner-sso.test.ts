/**
 * Owners' single sign-on end to end against a real OpenID provider (oidc-provider, started
 * here; test/helpers/oidc-login.ts): the documented config (docs/owner.md, "Single sign-on")
 * with this provider's issuer and client; a sign-in matched by verified email that makes the
 * same session as a password's; refused for an unverified email, for an unknown email without
 * an invite, for a forged state, a missing transaction and a replayed code (never a 500); an
 * invite accepted through the provider; the callback throttled as sign-ins are. One gateway,
 * one provider.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { show } from '../helpers/gateway.js';
import { drive, startLoginProvider, SSO_CLIENT_ID, SSO_CLIENT_SECRET } from '../helpers/oidc-login.js';
import { accountWithOwner, anonymous, operator, startOwnerGateway } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';

/** The JSON block docs/owner.md marks as the single sign-on config example. */
function documentedConfig(): { owner: { sso: Record<string, unknown> } & Record<string, unknown> } {
  const doc = readFileSync('docs/owner.md', 'utf8');
  const block = /<!-- sso-config:[^>]*-->\n```json\n([\s\S]*?)\n```/.exec(doc);
  assert.ok(block !== null, 'docs/owner.md has the sso-config block');
  return JSON.parse(block[1]!);
}

test('owners sign in through an OpenID provider: by verified email or an invite, nobody else', async (t) => {
  const documented = documentedConfig();
  // The documented block is a valid configuration as it stands.
  const checked = loadConfig({ env: {}, overrides: documented });
  assert.equal(checked.owner.sso.displayName, 'Acme Keycloak');
  assert.deepEqual(checked.owner.sso.scopes, ['openid', 'email']);

  const idp = await startLoginProvider(t, {
    alice: { email: 'Alice.SSO@example.com', email_verified: true },
    mallory: { email: 'alice.sso@example.com', email_verified: false },
    stranger: { email: 'stranger@example.com', email_verified: true },
    carol: { email: 'carol@example.com', email_verified: true },
  });
  const gw = await startOwnerGateway(t, {
    overrides: {
      // Failures per address: enough for the refusals below, then the throttle.
      limits: { mode: 'enforce', ownerSignIn: { failuresPerAddress: [{ limit: 8, seconds: 600 }] } },
      owner: { sso: { ...documented.owner.sso, issuer: idp.issuer, clientId: SSO_CLIENT_ID, clientSecret: SSO_CLIENT_SECRET } },
    },
  });
  idp.register(`${gw.url}/owner/v1/sso/callback`);
  await accountWithOwner(gw, { accountId: 'acct_sso', email: 'alice.sso@example.com', password: PASSWORD });
  const start = `${gw.url}/owner/v1/sso/start`;
  const refusal = (location: string | null) => new URL(location ?? '/', gw.url).searchParams.get('sso_error');

  await t.test('the sign-in page learns the button\'s name', async () => {
    const res = await anonymous(gw).get('/sso');
    assert.equal(res.status, 200, show(res));
    assert.deepEqual(res.body.message, { enabled: true, displayName: 'Acme Keycloak', startPath: '/owner/v1/sso/start' });
  });

  await t.test('a verified email of an owner signs in: the same session as a password sign-in', async () => {
    idp.loginAs('alice');
    const { callback, location, jar } = await drive(start);
    assert.equal(callback.status, 303);
    assert.equal(location, '/dashboard/');
    const cookie = jar.get(new URL(gw.url), 'gw_session');
    assert.match(cookie ?? '', /^[0-9A-Za-z]{43}$/, 'a session cookie as a sign-in sets');
    assert.equal(jar.get(new URL(gw.url), 'gw_sso'), undefined, 'the transaction cookie is cleared');
    const session = await anonymous(gw).get('/session', { cookie: `gw_session=${cookie}` });
    assert.equal(session.status, 200, show(session));
    assert.equal(session.body.message.owner.email, 'alice.sso@example.com');
    assert.deepEqual(session.body.message.accounts.map((a: { id: string }) => a.id), ['acct_sso']);
    const listed = await anonymous(gw).get('/sessions', { cookie: `gw_session=${cookie}` });
    const current = listed.body.message.items.find((s: { current: boolean }) => s.current);
    assert.equal(current.userAgent, 'sso-test-browser');
  });

  await t.test('an email the provider has not verified is refused', async () => {
    idp.loginAs('mallory');
    const { callback, location, jar } = await drive(start);
    assert.equal(callback.status, 303);
    assert.equal(refusal(location), 'sso_email_unverified');
    assert.equal(jar.get(new URL(gw.url), 'gw_session'), undefined);
  });

  await t.test('an unknown email without an invite is refused', async () => {
    idp.loginAs('stranger');
    const { location, jar } = await drive(start);
    assert.equal(refusal(location), 'sso_not_invited');
    assert.equal(jar.get(new URL(gw.url), 'gw_session'), undefined);
  });

  await t.test('a state that is not the transaction\'s, or no transaction, is refused before the provider is asked', async () => {
    idp.loginAs('alice');
    const before = idp.tokenRequests;
    const forged = await drive(start, { beforeCallback: (url) => { url.searchParams.set('state', 'forged-state'); return url; } });
    assert.equal(refusal(forged.location), 'sso_state_mismatch');
    assert.equal(forged.jar.get(new URL(gw.url), 'gw_session'), undefined);
    const bare = await fetch(`${gw.url}/owner/v1/sso/callback?code=abc&state=xyz`, { redirect: 'manual' });
    assert.equal(bare.status, 303);
    assert.equal(refusal(bare.headers.get('location')), 'sso_state_mismatch');
    assert.equal(idp.tokenRequests, before, 'no code was exchanged');
  });

  await t.test('a code used once is refused the second time (sso_failed, not a 500)', async () => {
    idp.loginAs('alice');
    let replay: URL | undefined;
    const first = await drive(start, { beforeCallback: (url) => { replay = new URL(url); return url; } });
    assert.equal(first.callback.status, 303);
    // A new sign-in whose callback carries the first one's code: used already (and bound to
    // another PKCE verifier), so the provider refuses it.
    const again = await drive(start, { beforeCallback: (url) => { url.searchParams.set('code', replay!.searchParams.get('code')!); return url; } });
    assert.equal(refusal(again.location), 'sso_failed');
  });

  await t.test('an invite is accepted through the provider for its verified email, making the owner', async () => {
    const made = await operator(gw).send('POST', '/accounts/acct_sso/invites', { email: 'carol@example.com' });
    assert.equal(made.status, 201, show(made));
    idp.loginAs('carol');
    const { location, jar } = await drive(`${start}?invite=${encodeURIComponent(made.body.message.token)}`);
    assert.equal(location, '/dashboard/');
    const session = await anonymous(gw).get('/session', { cookie: `gw_session=${jar.get(new URL(gw.url), 'gw_session')}` });
    assert.equal(session.status, 200, show(session));
    assert.equal(session.body.message.owner.email, 'carol@example.com');
    assert.deepEqual(session.body.message.accounts.map((a: { id: string }) => a.id), ['acct_sso']);
    const invites = await operator(gw).get('/accounts/acct_sso/invites');
    assert.equal(invites.body.message.items[0].status, 'used');
    // Used: the invite no longer lets another email, or the same one again, in by it.
    idp.loginAs('stranger');
    const reused = await drive(`${start}?invite=${encodeURIComponent(made.body.message.token)}`);
    assert.equal(refusal(reused.location), 'sso_not_invited');
  });

  await t.test('callbacks are throttled as sign-ins: past the failures per address, even a good one waits', async () => {
    let throttled: string | null = null;
    for (let i = 0; i < 10 && throttled === null; i++) {
      const res = await fetch(`${gw.url}/owner/v1/sso/callback?code=abc&state=xyz`, { redirect: 'manual' });
      assert.equal(res.status, 303);
      const code = refusal(res.headers.get('location'));
      if (code === 'rate_limited') throttled = res.headers.get('retry-after');
      else assert.equal(code, 'sso_state_mismatch');
    }
    assert.ok(throttled !== null && Number(throttled) > 0, 'throttled, with Retry-After');
    idp.loginAs('alice');
    const before = idp.tokenRequests;
    const { location } = await drive(start);
    assert.equal(refusal(location), 'rate_limited');
    assert.equal(idp.tokenRequests, before, 'a throttled callback asks the provider nothing');
  });
});
