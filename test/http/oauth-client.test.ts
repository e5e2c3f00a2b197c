/**
 * POST /api/revoke and POST /api/introspect driven by a real OAuth client library
 * (openid-client), as an application written against RFC 7009 and RFC 7662 would call them: the
 * library's own request format, client authentication and answer parsing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as client from 'openid-client';
import { DEMO, postJson, signIn, call } from '../helpers/gateway.js';
import { ADMIN_TOKEN, startOwnerGateway } from '../helpers/owner-keys.js';

test('openid-client: tokenRevocation and tokenIntrospection against the gateway', async (t) => {
  const gw = await startOwnerGateway(t, {
    edit: (data) => {
      for (const account of data.accounts) for (const key of account.apiKeys) if (key.id === DEMO.bob.keyId) key.scopes = ['introspect'];
    },
  });
  const server = {
    issuer: gw.services.config.tokens.issuer,
    revocation_endpoint: `${gw.url}/api/revoke`,
    introspection_endpoint: `${gw.url}/api/introspect`,
  };
  // A client as a library makes one for revocation: client_secret_basic with the key's credentials,
  // which the gateway neither needs nor checks (the token is the proof).
  const revoker = new client.Configuration(server, DEMO.alice.apiKey, undefined, client.ClientSecretBasic(DEMO.alice.secret));
  client.allowInsecureRequests(revoker);
  const publicRevoker = new client.Configuration(server, DEMO.alice.apiKey, undefined, client.None());
  client.allowInsecureRequests(publicRevoker);
  // The backend authenticates to the introspection endpoint with a bearer token of a key with the scope introspect.
  const checker = (await signIn(gw, DEMO.bob)).accessToken;
  const introspector = new client.Configuration(server, DEMO.bob.apiKey, undefined, (_as, _client, _body, headers) => {
    headers.set('authorization', `Bearer ${checker}`);
  });
  client.allowInsecureRequests(introspector);

  const pair = await signIn(gw);
  const active = await client.tokenIntrospection(introspector, pair.accessToken, { token_type_hint: 'access_token' });
  assert.equal(active.active, true);
  assert.equal(active.client_id, DEMO.alice.keyId);
  assert.equal(active.sub, DEMO.alice.accountId);
  assert.equal(active.token_type, 'Bearer');
  assert.equal((await client.tokenIntrospection(introspector, pair.refreshToken)).active, true);

  await client.tokenRevocation(revoker, pair.refreshToken, { token_type_hint: 'refresh_token' });
  await client.tokenRevocation(publicRevoker, pair.accessToken, { token_type_hint: 'access_token' });
  await client.tokenRevocation(publicRevoker, 'a-token-nobody-issued');
  assert.deepEqual({ ...(await client.tokenIntrospection(introspector, pair.accessToken)) }, { active: false });
  assert.equal((await client.tokenIntrospection(introspector, pair.refreshToken)).active, false);
  assert.equal((await postJson(`${gw.url}/api/refresh`, { refreshToken: pair.refreshToken })).status, 401);
  assert.equal((await call(`${gw.url}/api/roles`, { token: pair.accessToken })).status, 401);

  // An API settings token: the library reads RFC 7009's error (RFC 6749 §5.2 members).
  const settings = await call(`${gw.url}/owner/v1/accounts/${DEMO.alice.accountId}/settings-tokens`, {
    method: 'POST', token: ADMIN_TOKEN, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'ci' }),
  });
  assert.equal(settings.status, 201);
  await assert.rejects(client.tokenRevocation(publicRevoker, settings.body.message.token), (err: Error & { error?: string; status?: number }) => {
    assert.equal(err.error, 'unsupported_token_type', `${err.name}: ${err.message}`);
    assert.equal(err.status, 400);
    return true;
  });

  // Without the scope the library gets the refusal (403 insufficient_scope), not an answer.
  const unscopedToken = (await signIn(gw)).accessToken;
  const unscoped = new client.Configuration(server, DEMO.alice.apiKey, undefined, (_as, _client, _body, headers) => {
    headers.set('authorization', `Bearer ${unscopedToken}`);
  });
  client.allowInsecureRequests(unscoped);
  await assert.rejects(client.tokenIntrospection(unscoped, checker), (err: Error & { status?: number; cause?: { status?: number } }) => {
    assert.ok(err.status === 403 || err.cause?.status === 403 || /403/.test(err.message), `${err.name}: ${err.message}`);
    return true;
  });
});
