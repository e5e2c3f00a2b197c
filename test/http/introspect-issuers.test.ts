/**
 * POST /api/introspect of another issuer's access token (`trustedIssuers`): a real OpenID
 * provider (node-oidc-provider) mints it; the gateway verifies it as a route accepting that
 * issuer would, and answers its claims; a tampered or foreign one is inactive.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { DEMO, signIn, call } from '../helpers/gateway.js';
import { CLIENT_ID, EXTRA_CLAIMS, startProvider } from '../helpers/oidc-provider.js';
import { startOwnerGateway } from '../helpers/owner-keys.js';

const AUDIENCE = 'https://orders.example';

test('introspection of a trusted issuer\'s access token', async (t) => {
  const provider = await startProvider(t, { audience: AUDIENCE });
  const gw = await startOwnerGateway(t, {
    overrides: { trustedIssuers: [{ issuer: provider.issuer, audience: AUDIENCE, accountClaim: 'account', tokenType: 'at+jwt' }] },
    edit: (data) => {
      for (const account of data.accounts) for (const key of account.apiKeys) if (key.id === DEMO.bob.keyId) key.scopes = ['introspect'];
    },
  });
  const checker = (await signIn(gw, DEMO.bob)).accessToken;
  const introspect = (token: string) => call(`${gw.url}/api/introspect`, {
    method: 'POST', token: checker, headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token }).toString(),
  });

  const token = await provider.token({ scope: 'orders:read orders:write' });
  const claims = decodeJwt(token);
  const res = await introspect(token);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(res.body, {
    active: true, scope: 'orders:read orders:write', client_id: CLIENT_ID, sub: claims.sub ?? EXTRA_CLAIMS.account,
    exp: claims.exp, iat: claims.iat, jti: claims.jti, iss: provider.issuer, aud: claims.aud, token_type: 'Bearer', token_use: 'access_token',
  });

  const [h, p, s] = token.split('.');
  const tampered = `${h}.${p}.${s!.slice(0, -4)}${s!.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
  assert.deepEqual((await introspect(tampered)).body, { active: false });
  const otherAudience = await provider.token({ resource: 'https://elsewhere.example' });
  assert.deepEqual((await introspect(otherAudience)).body, { active: false });
  // Revoking another issuer's token here does nothing (its issuer decides how long it lives).
  const revoked = await call(`${gw.url}/api/revoke`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token }).toString() });
  assert.equal(revoked.status, 200);
  assert.equal((await introspect(token)).body.active, true);
});
