/**
 * An API key that requires DPoP (`requireDpop`, docs/dpop.md), set through the owner API: it
 * signs in only with a proof (401 invalid_dpop_proof without one, once the secret matched; a
 * wrong secret is the usual invalid_credentials), and turning the requirement on stops the
 * tokens it got without one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeProof, makeProofKey } from '../helpers/dpop.js';
import { call, postJson, sha256Hex, show, type TestGateway } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner-keys.js';

function signInAs(gw: TestGateway, apiKey: string, secret: string, proof?: string) {
  return postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: sha256Hex(secret) }, { headers: proof === undefined ? {} : { dpop: proof } });
}

test('a key with requireDpop signs in only with a DPoP proof', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = operator(gw);
  const proofKey = await makeProofKey('ES256');
  const proof = () => makeProof(proofKey, { htm: 'POST', htu: `${gw.url}/api/signin`, iat: Math.floor(gw.clock.now() / 1000) });

  const created = await owner.post('/accounts/acct_alice/keys', { name: 'dpop only', requireDpop: true });
  assert.equal(created.status, 201, show(created));
  assert.equal(created.body.message.key.requireDpop, true);
  const { apiKey } = created.body.message.key as { apiKey: string };
  const keyId = created.body.message.key.id as string;
  const secret = created.body.message.apiSecret as string;

  await t.test('without a proof: 401 invalid_dpop_proof with the DPoP challenge', async () => {
    const res = await signInAs(gw, apiKey, secret);
    assert.equal(res.status, 401, show(res));
    assert.equal(res.body.message.code, 'invalid_dpop_proof');
    assert.match(res.headers.get('www-authenticate') ?? '', /^DPoP error="invalid_dpop_proof"/);
  });

  await t.test('a wrong secret is invalid_credentials, proof or not: nothing told about the key', async () => {
    for (const dpop of [undefined, await proof()]) {
      const res = await signInAs(gw, apiKey, 'gwsk_wrong', dpop);
      assert.equal(res.status, 401, show(res));
      assert.equal(res.body.message.code, 'invalid_credentials');
    }
  });

  await t.test('with a proof: a DPoP-bound pair', async () => {
    const res = await signInAs(gw, apiKey, secret, await proof());
    assert.equal(res.status, 200, show(res));
    assert.equal(res.body.message.token_type, 'DPoP');
  });

  await t.test('off again: a plain sign-in works; on again: the unbound tokens stop', async () => {
    const off = await owner.patch(`/accounts/acct_alice/keys/${keyId}`, { requireDpop: false });
    assert.equal(off.status, 200, show(off));
    assert.equal(off.body.message.requireDpop, undefined);
    const plain = await signInAs(gw, apiKey, secret);
    assert.equal(plain.status, 200, show(plain));
    const token = plain.body.message.accessToken as string;
    assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200);
    gw.clock.advance(1);
    const on = await owner.patch(`/accounts/acct_alice/keys/${keyId}`, { requireDpop: true });
    assert.equal(on.status, 200, show(on));
    assert.equal(on.body.message.requireDpop, true);
    const refused = await call(`${gw.url}/api/roles`, { token });
    assert.equal(refused.status, 401, show(refused));
    assert.equal(refused.body.message.code, 'invalid_token');
  });
});
