/**
 * The standard OAuth 2.0 face (docs/oauth.md) against a real in-process gateway, with
 * openid-client as the client a third party would use: discovery from the metadata, both
 * client authentication methods, scope narrowing kept by the refresh-token family, the errors
 * as openid-client reads them, the tokens at work on a proxied route and /api/roles, a reset
 * that ends them, the limits, and hostile bodies answered in RFC 6749's shape (never a 500).
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test, type TestContext } from 'node:test';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import * as oauth from 'openid-client';
import { startBackend, type Backend } from '../helpers/backend.js';
import { call, sha256Hex, startGateway, type TestGateway } from '../helpers/gateway.js';
import { scrape, valueOf } from '../helpers/metrics.js';
import { newKey, startProxy, writeDataFile, type KeyFixture } from '../helpers/proxy.js';

const shop = newKey('shop', 'acct_shop', ['orders:read', 'orders:write', 'reports']);
const clerk = newKey('clerk', 'acct_shop', ['orders:read']);
const plain = newKey('plain', 'acct_plain');

interface Fixture {
  gw: TestGateway;
  backend: Backend;
}

/** One gateway for the cases that share it (limits off): a route /orders in front of an echo backend. */
async function startFixture(t: TestContext): Promise<Fixture> {
  const backend = await startBackend(t);
  const file = writeDataFile(t, [shop, clerk, plain]);
  const gw = await startProxy(t, [{ name: 'orders', prefix: '/orders', targets: [backend.url] }], { data: { file } });
  return { gw, backend };
}

async function configFor(gw: TestGateway, key: KeyFixture, auth: 'basic' | 'post', algorithm: 'oauth2' | 'oidc' = 'oauth2'): Promise<oauth.Configuration> {
  const method = auth === 'basic' ? oauth.ClientSecretBasic(key.secret) : oauth.ClientSecretPost(key.secret);
  return oauth.discovery(new URL(gw.url), key.apiKey, undefined, method, { algorithm, execute: [oauth.allowInsecureRequests] });
}

/**
 * What openid-client threw, as an OAuth error: its code, status and headers. An answer with a
 * WWW-Authenticate header (invalid_client after HTTP Basic, RFC 6749 §5.2) it throws as a
 * challenge instead, leaving the body unread: the error is read from that body.
 */
async function oauthError(promise: Promise<unknown>): Promise<{ error: string; status: number; headers: Headers; challenge?: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof oauth.WWWAuthenticateChallengeError) {
      const body = await err.response.json() as { error: string };
      return { error: body.error, status: err.status, headers: err.response.headers, challenge: err.cause[0]?.scheme };
    }
    assert.ok(err instanceof oauth.ResponseBodyError, `an OAuth error object, not ${String(err)}`);
    return { error: err.error, status: err.status, headers: err.response.headers };
  }
  assert.fail('the grant succeeded');
}

/** GET with a Host header of the test's choosing (fetch sets its own). */
function rawGet(gw: TestGateway, path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${gw.url}${path}`, { headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => { body += chunk; }).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject).end();
  });
}

/** A raw POST to the token endpoint: a form unless `init` says otherwise. */
function tokenRequest(gw: TestGateway, form: Record<string, string> | string, headers: Record<string, string> = {}) {
  const body = typeof form === 'string' ? form : new URLSearchParams(form).toString();
  return call(`${gw.url}/api/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body });
}

function assertOAuthError(res: { status: number; headers: Headers; body: any }, status: number, error: string, what: string): void {
  assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
  assert.equal(res.body.error, error, what);
  assert.equal(res.body.success, undefined, `${what}: not the envelope`);
  assert.equal(typeof res.body.error_description, 'string', what);
  assert.doesNotMatch(res.body.error_description, /["\\]/, `${what}: RFC 6749's error_description characters`);
  assert.equal(res.headers.get('cache-control'), 'no-store', what);
}

test('the token endpoint and its metadata, with openid-client as the client', async (t) => {
  const f = await startFixture(t);

  await t.test('the metadata is discovered by openid-client at both well-known paths and names every endpoint', async () => {
    const { gw } = f;
    for (const algorithm of ['oauth2', 'oidc'] as const) {
      const config = await configFor(gw, shop, 'basic', algorithm);
      const meta = config.serverMetadata();
      assert.equal(meta.issuer, gw.url, 'tokens.issuer is no URL: the issuer is the origin');
      assert.equal(meta.token_endpoint, `${gw.url}/api/token`);
      assert.equal(meta.jwks_uri, `${gw.url}/.well-known/jwks.json`);
      assert.equal(meta.introspection_endpoint, `${gw.url}/api/introspect`);
      assert.equal(meta.revocation_endpoint, `${gw.url}/api/revoke`);
      assert.deepEqual(meta.grant_types_supported, ['client_credentials', 'refresh_token']);
      assert.deepEqual(meta.token_endpoint_auth_methods_supported, ['client_secret_basic', 'client_secret_post']);
      assert.deepEqual(meta.response_types_supported, []);
    }
    const jwks = await call(`${gw.url}/.well-known/jwks.json`);
    assert.ok(jwks.body.keys.length > 0, 'jwks_uri answers');
    // From a peer that is no trusted proxy, forwarding headers name nothing.
    const spoofed = await call(`${gw.url}/.well-known/oauth-authorization-server`, { headers: { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' } });
    assert.equal(spoofed.body.token_endpoint, `${gw.url}/api/token`);
    const badHost = await rawGet(gw, '/.well-known/oauth-authorization-server', 'bad_host!');
    assert.equal(badHost.status, 400, 'a Host that makes no URL is refused, not echoed');
  });

  await t.test('client credentials by client_secret_basic and client_secret_post give a pair that works on a proxied route and /api/roles', async () => {
    const { gw, backend } = f;
    for (const method of ['basic', 'post'] as const) {
      const config = await configFor(gw, shop, method);
      const tokens = await oauth.clientCredentialsGrant(config);
      assert.equal(tokens.token_type, 'bearer');
      assert.equal(tokens.expires_in, gw.services.config.tokens.accessTokenTtlSeconds);
      assert.equal(tokens.scope, 'orders:read orders:write reports', 'the key\'s own scopes when none is asked');
      assert.equal(typeof tokens.refresh_token, 'string');
      const claims = decodeJwt(tokens.access_token);
      assert.equal(claims.sub, 'acct_shop');
      assert.equal(claims.client_id, 'shop');

      const before = backend.received.length;
      const proxied = await call(`${gw.url}/orders/1`, { token: tokens.access_token });
      assert.equal(proxied.status, 200, JSON.stringify(proxied.body));
      assert.equal(backend.received.length, before + 1);
      const roles = await call(`${gw.url}/api/roles`, { token: tokens.access_token });
      assert.equal(roles.status, 200, JSON.stringify(roles.body));
    }
    const plainTokens = await oauth.clientCredentialsGrant(await configFor(gw, plain, 'post'));
    assert.equal(plainTokens.scope, undefined, 'a key without scopes gets no scope member');
  });

  await t.test('the answer is RFC 6749 §5.1 JSON with no-store, not the envelope', async () => {
    const { gw } = f;
    const res = await tokenRequest(gw, { grant_type: 'client_credentials', client_id: shop.apiKey, client_secret: shop.secret });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('pragma'), 'no-cache');
    assert.deepEqual(Object.keys(res.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'scope', 'token_type']);
    assert.equal(res.body.token_type, 'Bearer');
  });

  await t.test('scope narrows the key\'s scopes; refreshes keep the narrowed grant, may narrow one token further and never widen it', async () => {
    const { gw } = f;
    const config = await configFor(gw, shop, 'basic');
    const first = await oauth.clientCredentialsGrant(config, { scope: 'reports orders:read' });
    assert.equal(first.scope, 'orders:read reports');
    assert.equal(decodeJwt(first.access_token).scope, 'orders:read reports');

    const kept = await oauth.refreshTokenGrant(config, first.refresh_token!);
    assert.equal(kept.scope, 'orders:read reports', 'the family keeps the narrowed grant');
    assert.equal(decodeJwt(kept.access_token).scope, 'orders:read reports');

    const narrower = await oauth.refreshTokenGrant(config, kept.refresh_token!, { scope: 'reports' });
    assert.equal(narrower.scope, 'reports');
    assert.equal(decodeJwt(narrower.access_token).scope, 'reports');
    const again = await oauth.refreshTokenGrant(config, narrower.refresh_token!);
    assert.equal(again.scope, 'orders:read reports', 'a narrower refresh narrows its own access token, not the grant (RFC 6749 §6)');

    const wider = await oauthError(oauth.refreshTokenGrant(config, again.refresh_token!, { scope: 'orders:write' }));
    assert.deepEqual([wider.status, wider.error], [400, 'invalid_scope']);
    const still = await oauth.refreshTokenGrant(config, again.refresh_token!);
    assert.equal(still.scope, 'orders:read reports', 'the refused refresh consumed nothing');

    // A handle edited to drop its narrowing names another grant than the family's: refused.
    const [handle, secret] = still.refresh_token!.split('.') as [string, string];
    const parts = JSON.parse(Buffer.from(handle, 'base64url').toString('utf8')) as string[];
    const widened = `${Buffer.from(JSON.stringify(parts.slice(0, 4))).toString('base64url')}.${secret}`;
    const edited = await oauthError(oauth.refreshTokenGrant(config, widened));
    assert.deepEqual([edited.status, edited.error], [400, 'invalid_grant']);

    // /api/refresh keeps the grant as well: it is the family's, not the endpoint's.
    const viaApi = await call(`${gw.url}/api/refresh`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ refreshToken: still.refresh_token }) });
    assert.equal(viaApi.status, 200, JSON.stringify(viaApi.body));
    assert.equal(decodeJwt(viaApi.body.message.accessToken).scope, 'orders:read reports');
  });

  await t.test('errors reach openid-client as OAuth errors: invalid_client, invalid_grant, invalid_scope, unsupported_grant_type', async () => {
    const { gw } = f;
    const wrong = { ...shop, secret: 'sk_wrong' };
    const byBasic = await oauthError(oauth.clientCredentialsGrant(await configFor(gw, wrong, 'basic')));
    assert.deepEqual([byBasic.status, byBasic.error, byBasic.challenge], [401, 'invalid_client', 'basic'], 'Basic: 401 with a Basic challenge');
    const byPost = await oauthError(oauth.clientCredentialsGrant(await configFor(gw, wrong, 'post')));
    assert.deepEqual([byPost.status, byPost.error, byPost.headers.get('www-authenticate')], [401, 'invalid_client', null], 'in the body: no challenge');
    const unknown = await oauthError(oauth.clientCredentialsGrant(await configFor(gw, newKey('ghost', 'acct_shop'), 'basic')));
    assert.equal(unknown.error, 'invalid_client', 'an unknown key is answered as a wrong secret');

    const config = await configFor(gw, shop, 'basic');
    const scope = await oauthError(oauth.clientCredentialsGrant(config, { scope: 'orders:read admin' }));
    assert.deepEqual([scope.status, scope.error], [400, 'invalid_scope']);

    const garbage = await oauthError(oauth.refreshTokenGrant(config, 'not-a-refresh-token'));
    assert.deepEqual([garbage.status, garbage.error], [400, 'invalid_grant']);
    const clerkTokens = await oauth.clientCredentialsGrant(await configFor(gw, clerk, 'post'));
    const foreign = await oauthError(oauth.refreshTokenGrant(config, clerkTokens.refresh_token!));
    assert.deepEqual([foreign.status, foreign.error], [400, 'invalid_grant'], 'another client\'s refresh token');
    const untouched = await oauth.refreshTokenGrant(await configFor(gw, clerk, 'post'), clerkTokens.refresh_token!);
    assert.equal(untouched.scope, 'orders:read', 'and it was not consumed');

    const grant = await oauthError(oauth.genericGrantRequest(config, 'password', { username: 'a', password: 'b' }));
    assert.deepEqual([grant.status, grant.error], [400, 'unsupported_grant_type']);
  });

  await t.test('a reset (POST /api/reset) ends the tokens the token endpoint gave', async () => {
    const { gw } = f;
    const config = await configFor(gw, clerk, 'basic');
    const tokens = await oauth.clientCredentialsGrant(config);
    assert.equal((await call(`${gw.url}/api/roles`, { token: tokens.access_token })).status, 200);
    gw.clock.advance(1000);
    const reset = await call(`${gw.url}/api/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ apiKey: clerk.apiKey, apiSecret: sha256Hex(clerk.secret) }) });
    assert.equal(reset.status, 200, JSON.stringify(reset.body));
    assert.equal((await call(`${gw.url}/api/roles`, { token: tokens.access_token })).status, 401);
    const refreshed = await oauthError(oauth.refreshTokenGrant(config, tokens.refresh_token!));
    assert.equal(refreshed.error, 'invalid_grant');
    gw.clock.advance(1000);
    const fresh = await oauth.clientCredentialsGrant(config);
    assert.equal((await call(`${gw.url}/api/roles`, { token: fresh.access_token })).status, 200, 'signing in again works');
  });

  await t.test('sign-ins and refreshes through the token endpoint are counted in the same metrics as /api/signin and /api/refresh', async () => {
    const { gw } = f;
    const count = async () => {
      const { samples } = await scrape(gw.url);
      return { signIns: valueOf(samples, 'gateway_signins_total', { outcome: 'issued' }), refreshes: valueOf(samples, 'gateway_token_refreshes_total', { outcome: 'issued' }), scopes: valueOf(samples, 'gateway_signins_total', { outcome: 'invalid_scope' }) };
    };
    const before = await count();
    const config = await configFor(gw, shop, 'post');
    const tokens = await oauth.clientCredentialsGrant(config);
    await oauth.refreshTokenGrant(config, tokens.refresh_token!);
    await oauthError(oauth.clientCredentialsGrant(config, { scope: 'nope' }));
    const after = await count();
    assert.deepEqual([after.signIns - before.signIns, after.refreshes - before.refreshes, after.scopes - before.scopes], [1, 1, 1]);
  });

  await t.test('bad input is a 400 (or 401 without credentials) in RFC 6749\'s shape, never a 500', async () => {
    const { gw } = f;
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(shop.apiKey)}:${encodeURIComponent(shop.secret)}`).toString('base64')}`;
    const good = { grant_type: 'client_credentials', client_id: shop.apiKey, client_secret: shop.secret };
    const json = await call(`${gw.url}/api/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(good) });
    assertOAuthError(json, 400, 'invalid_request', 'JSON instead of a form');
    const none = await call(`${gw.url}/api/token`, { method: 'POST' });
    assertOAuthError(none, 400, 'invalid_request', 'no body');
    const huge = await tokenRequest(gw, { ...good, padding: 'x'.repeat(gw.services.config.server.bodyLimitBytes) });
    assertOAuthError(huge, 400, 'invalid_request', 'a body over the limit');
    assertOAuthError(await tokenRequest(gw, `${new URLSearchParams(good).toString()}&scope=reports&scope=orders:read`), 400, 'invalid_request', 'a repeated parameter');
    assertOAuthError(await tokenRequest(gw, { client_id: shop.apiKey, client_secret: shop.secret }), 400, 'invalid_request', 'no grant_type');
    assertOAuthError(await tokenRequest(gw, { grant_type: 'refresh_token', client_id: shop.apiKey, client_secret: shop.secret }), 400, 'invalid_request', 'no refresh_token');
    assertOAuthError(await tokenRequest(gw, { ...good, scope: 'a  b' }), 400, 'invalid_request', 'a malformed scope');
    assertOAuthError(await tokenRequest(gw, { ...good, scope: 'x'.repeat(600) }), 400, 'invalid_request', 'a scope too long');
    assertOAuthError(await tokenRequest(gw, good, { authorization: basic }), 400, 'invalid_request', 'Basic and client_secret both');
    assertOAuthError(await tokenRequest(gw, { grant_type: 'client_credentials', client_id: clerk.apiKey }, { authorization: basic }), 400, 'invalid_request', 'Basic and another client_id');
    assertOAuthError(await tokenRequest(gw, { grant_type: 'client_credentials' }, { authorization: 'Basic !!!' }), 400, 'invalid_request', 'Basic not base64');
    assertOAuthError(await tokenRequest(gw, { grant_type: 'client_credentials' }, { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` }), 400, 'invalid_request', 'Basic without a colon');
    assertOAuthError(await tokenRequest(gw, { grant_type: 'client_credentials' }, { authorization: `Basic ${Buffer.from('%zz:%zz').toString('base64')}` }), 400, 'invalid_request', 'Basic not form-encoded');
    const bearer = await tokenRequest(gw, { grant_type: 'client_credentials' }, { authorization: 'Bearer abc' });
    assertOAuthError(bearer, 401, 'invalid_client', 'another scheme');
    assert.match(bearer.headers.get('www-authenticate') ?? '', /^Basic realm="gateway"/);
    const anonymous = await tokenRequest(gw, { grant_type: 'client_credentials' });
    assertOAuthError(anonymous, 401, 'invalid_client', 'no client authentication');
    assertOAuthError(await tokenRequest(gw, { grant_type: 'client_credentials', client_id: shop.apiKey }), 401, 'invalid_client', 'client_id alone');
    // A parameter without a value is as if omitted (RFC 6749 §3.1); unknown ones are ignored (§3.2).
    const ok = await tokenRequest(gw, { ...good, scope: '', resource: 'https://api.example.com' }, {});
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const viaBasic = await tokenRequest(gw, { grant_type: 'client_credentials', client_id: shop.apiKey }, { authorization: basic });
    assert.equal(viaBasic.status, 200, 'Basic with the same client_id in the body');
    assert.ok(!gw.logs.some((line) => line.includes(shop.secret)), 'the secret is never logged');
  });
});

test('DPoP at the token endpoint: openid-client\'s pair is bound to its key (token_type DPoP, cnf.jkt), and a refresh without a proof by it is invalid_dpop_proof', async (t) => {
  const { gw } = await startFixture(t);
  const config = await configFor(gw, shop, 'basic');
  assert.ok(config.serverMetadata().dpop_signing_alg_values_supported?.includes('ES256'), 'the metadata names the proof algorithms');
  const keyPair = await oauth.randomDPoPKeyPair('ES256');
  const DPoP = oauth.getDPoPHandle(config, keyPair);
  const tokens = await oauth.clientCredentialsGrant(config, undefined, { DPoP });
  assert.equal(tokens.token_type, 'dpop');
  const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey));
  assert.equal((decodeJwt(tokens.access_token).cnf as { jkt?: string } | undefined)?.jkt, jkt);
  const refreshed = await oauth.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP });
  assert.equal(refreshed.token_type, 'dpop');
  assert.equal((decodeJwt(refreshed.access_token).cnf as { jkt?: string } | undefined)?.jkt, jkt, 'the refreshed token is bound to the same key');
  const refused = await oauthError(oauth.refreshTokenGrant(config, refreshed.refresh_token!));
  assert.deepEqual([refused.status, refused.error], [400, 'invalid_dpop_proof'], 'RFC 9449 §5: the family is bound to the key');
  // The pair was not spent by the refusal: a proof by the key still refreshes it.
  assert.equal((await oauth.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP })).token_type, 'dpop');
});

test('the limits hold at the token endpoint: a wrong secret locks the key out as on /api/signin, refreshes are counted per family, 429 in RFC 6749\'s shape', async (t) => {
  const backend = await startBackend(t);
  const key = newKey('limited', 'acct_limited', ['a']);
  const file = writeDataFile(t, [key]);
  const gw = await startProxy(t, [{ prefix: '/x', targets: [backend.url] }], {
    data: { file },
    limits: {
      mode: 'enforce',
      signIn: { failuresPerKeyAndAddress: [{ limit: 1, seconds: 60 }], failuresPerAddress: [{ limit: 5, seconds: 60 }] },
      refresh: { perFamily: [{ limit: 1, seconds: 60 }], perAddress: [{ limit: 50, seconds: 60 }] },
    },
  });
  const config = await configFor(gw, key, 'basic');
  const tokens = await oauth.clientCredentialsGrant(config);
  const next = await oauth.refreshTokenGrant(config, tokens.refresh_token!);
  const slow = await oauthError(oauth.refreshTokenGrant(config, next.refresh_token!));
  assert.deepEqual([slow.status, slow.error], [429, 'slow_down'], 'the family\'s one refresh a minute is spent');
  assert.ok(Number(slow.headers.get('retry-after')) > 0);

  const wrong = await configFor(gw, { ...key, secret: 'sk_wrong' }, 'post');
  assert.equal((await oauthError(oauth.clientCredentialsGrant(wrong))).error, 'invalid_client');
  const locked = await oauthError(oauth.clientCredentialsGrant(config));
  assert.deepEqual([locked.status, locked.error], [429, 'slow_down'], 'the right secret is refused too while the key is locked out');
  assert.ok(Number(locked.headers.get('retry-after')) > 0);
  const signin = await call(`${gw.url}/api/signin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ apiKey: key.apiKey, apiSecret: sha256Hex(key.secret) }) });
  assert.equal(signin.status, 429, '/api/signin shares the lockout');
});

test('a configured issuer URL and public origin are what the metadata names, and openid-client discovers the gateway by them', async (t) => {
  const origin = 'https://api.example.com';
  const key = newKey('configured', 'acct_configured', ['a']);
  const gw = await startGateway(t, { overrides: { data: { file: writeDataFile(t, [key]) }, tokens: { issuer: origin, memoryStoreMaxTokens: 10_000 }, oauth: { publicOrigin: origin }, proxy: { trustedProxies: ['127.0.0.1'] } } });
  // The client reaches the gateway at its public origin: here, every request to it goes to the test gateway.
  const toGateway: oauth.CustomFetch = (url, options) => fetch(url.replace(origin, gw.url), options as RequestInit);
  const config = await oauth.discovery(new URL(origin), key.apiKey, undefined, oauth.ClientSecretBasic(key.secret), { algorithm: 'oauth2', [oauth.customFetch]: toGateway });
  config[oauth.customFetch] = toGateway;
  const meta = config.serverMetadata();
  assert.equal(meta.issuer, origin);
  assert.equal(meta.token_endpoint, `${origin}/api/token`);
  assert.equal(meta.jwks_uri, `${origin}/.well-known/jwks.json`);
  const tokens = await oauth.clientCredentialsGrant(config);
  assert.equal(decodeJwt(tokens.access_token).iss, origin, 'the metadata\'s issuer is the tokens\' iss');
  const forwarded = await call(`${gw.url}/.well-known/openid-configuration`, { headers: { 'x-forwarded-host': 'other.example', 'x-forwarded-proto': 'http' } });
  assert.equal(forwarded.body.token_endpoint, `${origin}/api/token`, 'a configured origin wins over a trusted proxy\'s headers');
});

test('without a configured origin, a trusted proxy\'s X-Forwarded-Proto and -Host (or Forwarded) name it; anything else is ignored', async (t) => {
  const plainGw = await startGateway(t, { overrides: { tokens: { memoryStoreMaxTokens: 10_000 }, proxy: { trustedProxies: ['127.0.0.1'] } } });
  const metadata = (headers: Record<string, string>, gw = plainGw) => call(`${gw.url}/.well-known/oauth-authorization-server`, { headers }).then((res) => res.body);
  const named = await metadata({ 'x-forwarded-proto': 'https, http', 'x-forwarded-host': 'api.example.com:8443, inner.local' });
  assert.equal(named.token_endpoint, 'https://api.example.com:8443/api/token', 'the outermost proxy\'s view');
  assert.equal(named.issuer, 'https://api.example.com:8443');
  const junk = await metadata({ 'x-forwarded-proto': 'gopher', 'x-forwarded-host': 'evil.example/path' });
  assert.equal(junk.token_endpoint, `${plainGw.url}/api/token`, 'values that are no scheme or host are ignored');

  const forwardedGw = await startGateway(t, { overrides: { tokens: { memoryStoreMaxTokens: 10_000 }, proxy: { trustedProxies: ['127.0.0.1'], clientAddressHeader: 'forwarded' } } });
  const byForwarded = await metadata({ forwarded: 'for=203.0.113.9;proto=https;host=api.example.com, for=10.0.0.1', 'x-forwarded-host': 'ignored.example' }, forwardedGw);
  assert.equal(byForwarded.token_endpoint, 'https://api.example.com/api/token');
});
