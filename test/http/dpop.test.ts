/**
 * DPoP (RFC 9449, docs/dpop.md) end to end against one in-process gateway with a proxied route
 * and an echo backend, proofs made with jose (test/helpers/dpop.ts): binding at sign-in and
 * refresh, calls on a proxied route, an own endpoint and the forward-auth endpoint, and every
 * refusal with its `WWW-Authenticate: DPoP error=…`. The gateway's clock is frozen, so `iat` is
 * chosen exactly. Nonces are in their own gateway below (`dpop.nonce: required`).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { startBackend } from '../helpers/backend.js';
import { openClient, roundTrip, startWsBackend } from '../helpers/ws-backend.js';
import { makeProof, makeProofKey, unsignedProof, type ProofKey } from '../helpers/dpop.js';
import { call, DEMO, postJson, sha256Hex, show, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';

const ALGS = 'ES256 EdDSA RS256 PS256';

function now(gw: TestGateway): number {
  return Math.floor(gw.clock.now() / 1000);
}

/** Signs in as alice, with a proof by `key` when given. */
async function signInWith(gw: TestGateway, key: ProofKey | undefined, proof?: string): Promise<JsonResponse> {
  const headers: Record<string, string> = {};
  if (key !== undefined) headers.dpop = proof ?? await makeProof(key, { htm: 'POST', htu: `${gw.url}/api/signin`, iat: now(gw) });
  return postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) }, { headers });
}

/** A call with `Authorization: <scheme> <token>` and, when given, a DPoP header. */
function callWith(url: string, { token, scheme = 'DPoP', proof, method = 'GET', headers = {} }: { token: string; scheme?: string; proof?: string; method?: string; headers?: Record<string, string> }): Promise<JsonResponse> {
  return call(url, { method, headers: { authorization: `${scheme} ${token}`, ...(proof === undefined ? {} : { dpop: proof }), ...headers } });
}

/** 401 with the DPoP challenge of `error`, and the envelope code. */
function assertDpopRefusal(res: JsonResponse, error: 'invalid_dpop_proof' | 'invalid_token' | 'use_dpop_nonce', what: string): void {
  assert.equal(res.status, 401, `${what}: ${show(res)}`);
  assert.equal(res.body.success, false, what);
  assert.equal(res.body.message.code, error, what);
  const challenge = res.headers.get('www-authenticate') ?? '';
  assert.match(challenge, new RegExp(`^DPoP error="${error}", error_description="[^"]+", algs="${ALGS}"$`), `${what}: ${challenge}`);
}

test('DPoP: binding, use and refusals', async (t) => {
  const backend = await startBackend(t);
  const wsBackend = await startWsBackend(t);
  const gw = await startGateway(t, { overrides: {
    routes: [{ prefix: '/things', targets: [backend.url] }, { prefix: '/live', targets: [wsBackend.url], websocket: true }],
    proxy: { trustedProxies: ['127.0.0.1'] },
  } });
  const key = await makeProofKey('ES256');
  const other = await makeProofKey('ES256');
  const bound = await signInWith(gw, key);
  assert.equal(bound.status, 200, show(bound));
  const { accessToken, refreshToken } = bound.body.message as { accessToken: string; refreshToken: string };
  const roles = `${gw.url}/api/roles`;
  const proofFor = (url: string, options: Partial<Parameters<typeof makeProof>[1]> = {}, by = key) => makeProof(by, { htm: 'GET', htu: url, iat: now(gw), accessToken, ...options });

  await t.test('a sign-in with a proof binds the pair: cnf.jkt is the key\'s thumbprint, token_type DPoP', () => {
    assert.equal(bound.body.message.token_type, 'DPoP');
    assert.deepEqual(decodeJwt(accessToken).cnf, { jkt: key.thumbprint });
  });

  await t.test('a sign-in without one stays Bearer, with no cnf', async () => {
    const res = await signInWith(gw, undefined);
    assert.equal(res.status, 200, show(res));
    assert.equal(res.body.message.token_type, undefined, 'a bearer pair is the interface\'s two fields');
    assert.equal(decodeJwt(res.body.message.accessToken).cnf, undefined);
  });

  await t.test('an own endpoint answers a bound token with a fresh proof', async () => {
    const res = await callWith(roles, { token: accessToken, proof: await proofFor(roles) });
    assert.equal(res.status, 200, show(res));
  });

  await t.test('a proxied route passes it on: the backend gets the thumbprint, neither the token nor the proof', async () => {
    const url = `${gw.url}/things/1?q=2`;
    const res = await callWith(url, { token: accessToken, proof: await proofFor(`${gw.url}/things/1`), headers: { 'x-dpop-jkt': 'forged' } });
    assert.equal(res.status, 200, show(res));
    const received = backend.received.at(-1)!;
    assert.deepEqual(received.headers['x-dpop-jkt'], [key.thumbprint], 'the client\'s own X-DPoP-Jkt is replaced');
    assert.equal(received.headers.authorization, undefined);
    assert.equal(received.headers.dpop, undefined);
    const plain = (await signInWith(gw, undefined)).body.message.accessToken as string;
    const unbound = await callWith(url, { token: plain, scheme: 'Bearer', headers: { 'x-dpop-jkt': key.thumbprint, dpop: 'anything' } });
    assert.equal(unbound.status, 200, show(unbound));
    assert.equal(backend.received.at(-1)!.headers['x-dpop-jkt'], undefined, 'an unbound caller\'s X-DPoP-Jkt is removed');
  });

  await t.test('a WebSocket handshake is checked as any call: DPoP and a proof for GET on its URL', async () => {
    const ws = await openClient(gw.url, '/live', { headers: { authorization: `DPoP ${accessToken}`, dpop: await proofFor(`${gw.url}/live`) } });
    t.after(() => ws.terminate());
    assert.equal((await roundTrip(ws, 'ping')).data.toString(), 'ping');
    assert.deepEqual(wsBackend.handshakes.at(-1)!.headers['x-dpop-jkt'], [key.thumbprint]);
    await assert.rejects(openClient(gw.url, '/live', { token: accessToken }), /answered 401/, 'Bearer');
    await assert.rejects(openClient(gw.url, '/live', { headers: { authorization: `DPoP ${accessToken}`, dpop: await proofFor(`${gw.url}/things`) } }), /answered 401/, 'a proof for another URL');
  });

  await t.test('forward auth checks htm and htu against the original request the trusted proxy names', async () => {
    const ask = (proof: string, method = 'POST') => callWith(`${gw.url}/api/forward-auth`, {
      token: accessToken, proof,
      headers: { 'x-forwarded-method': method, 'x-forwarded-uri': '/things/7?x=1', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example' },
    });
    const allowed = await ask(await proofFor('https://app.example/things/7', { htm: 'POST' }));
    assert.equal(allowed.status, 200, show(allowed));
    assert.equal(allowed.headers.get('x-dpop-jkt'), key.thumbprint);
    assertDpopRefusal(await ask(await proofFor(`${gw.url}/api/forward-auth`, { htm: 'POST' })), 'invalid_dpop_proof', 'a proof for the asking request, not the original');
    assertDpopRefusal(await ask(await proofFor('https://app.example/things/7', { htm: 'GET' })), 'invalid_dpop_proof', 'the original method is POST');
  });

  await t.test('Bearer with a bound token is refused with invalid_token', async () => {
    assertDpopRefusal(await callWith(roles, { token: accessToken, scheme: 'Bearer', proof: await proofFor(roles) }), 'invalid_token', 'Bearer');
    assertDpopRefusal(await callWith(`${gw.url}/things/1`, { token: accessToken, scheme: 'Bearer' }), 'invalid_token', 'Bearer, proxied');
  });

  await t.test('a tampered or revoked token sent as DPoP is refused with a DPoP invalid_token challenge', async () => {
    // A character well inside the signature: the last one of an Ed25519 signature carries 2 bits
    // and 4 of padding, so a change there can decode to the same bytes (a 1-in-250 CI failure).
    const at = accessToken.length - 10;
    const tampered = `${accessToken.slice(0, at)}${accessToken[at] === 'A' ? 'B' : 'A'}${accessToken.slice(at + 1)}`;
    assertDpopRefusal(await callWith(roles, { token: tampered, proof: await proofFor(roles, { accessToken: tampered }) }), 'invalid_token', 'tampered');
  });

  await t.test('DPoP with an unbound token is refused with invalid_token', async () => {
    const plain = await signInWith(gw, undefined);
    const token = plain.body.message.accessToken as string;
    assertDpopRefusal(await callWith(roles, { token, proof: await proofFor(roles, { accessToken: token }) }), 'invalid_token', 'unbound as DPoP');
  });

  await t.test('each bad proof is refused with invalid_dpop_proof, and nothing reaches the backend', async () => {
    const seen = backend.received.length;
    const things = `${gw.url}/things/1`;
    const cases: [string, () => Promise<string | undefined>, string?][] = [
      ['no proof', async () => undefined],
      ['stale iat', () => proofFor(things, { iat: now(gw) - 61 })],
      ['future iat', () => proofFor(things, { iat: now(gw) + 6 })],
      ['wrong htm', () => proofFor(things, { htm: 'POST' })],
      ['wrong htu path', () => proofFor(`${gw.url}/things/2`)],
      ['wrong htu origin', () => proofFor(things.replace('127.0.0.1', 'localhost'))],
      ['wrong key', () => proofFor(things, {}, other)],
      ['missing ath', () => proofFor(things, { claims: { ath: undefined } })],
      ['wrong ath', () => proofFor(things, { accessToken: `${accessToken}x` })],
      ['no jti', () => proofFor(things, { claims: { jti: undefined } })],
      ['typ JWT', () => proofFor(things, { header: { typ: 'JWT' } })],
      ['private key in jwk', () => makeProof({ ...key, publicJwk: { ...key.publicJwk, d: 'AAAA' } }, { htm: 'GET', htu: things, iat: now(gw), accessToken })],
      ['alg none', async () => unsignedProof(key, { htm: 'GET', htu: things, iat: now(gw), jti: 'none-1' })],
      ['garbage', async () => 'not.a.proof'],
      ['huge', async () => 'a'.repeat(5000)],
    ];
    for (const [what, make] of cases) {
      assertDpopRefusal(await callWith(things, { token: accessToken, proof: await make() }), 'invalid_dpop_proof', what);
    }
    assert.equal(backend.received.length, seen, 'no refused call reached the backend');
  });

  await t.test('HS256 with a symmetric jwk is refused as a proof', async () => {
    const { SignJWT } = await import('jose');
    const secret = new Uint8Array(32).fill(7);
    const proof = await new SignJWT({ htm: 'GET', htu: roles, iat: now(gw), jti: 'hs-1' })
      // jose's types rightly refuse a symmetric jwk in a header: a hostile client is not held to them.
      .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: Buffer.from(secret).toString('base64url') } as never }).sign(secret);
    assertDpopRefusal(await callWith(roles, { token: accessToken, proof }), 'invalid_dpop_proof', 'HS256');
  });

  await t.test('a proof used once is refused the second time', async () => {
    const proof = await proofFor(roles);
    assert.equal((await callWith(roles, { token: accessToken, proof })).status, 200);
    assertDpopRefusal(await callWith(roles, { token: accessToken, proof }), 'invalid_dpop_proof', 'replayed');
  });

  await t.test('the verified-token cache keeps the token, never the proof: each call needs its own', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await callWith(roles, { token: accessToken, proof: await proofFor(roles) })).status, 200);
    assertDpopRefusal(await callWith(roles, { token: accessToken }), 'invalid_dpop_proof', 'cached token without a proof');
  });

  await t.test('refresh of a bound family needs a proof by its key; refused tries consume nothing', async () => {
    const refresh = `${gw.url}/api/refresh`;
    const refreshProof = (by: ProofKey) => makeProof(by, { htm: 'POST', htu: refresh, iat: now(gw) });
    assertDpopRefusal(await postJson(refresh, { refreshToken }), 'invalid_dpop_proof', 'no proof');
    assertDpopRefusal(await postJson(refresh, { refreshToken }, { headers: { dpop: await refreshProof(other) } }), 'invalid_dpop_proof', 'another key');
    const res = await postJson(refresh, { refreshToken }, { headers: { dpop: await refreshProof(key) } });
    assert.equal(res.status, 200, show(res));
    assert.equal(res.body.message.token_type, 'DPoP');
    assert.deepEqual(decodeJwt(res.body.message.accessToken).cnf, { jkt: key.thumbprint });
  });

  await t.test('an unbound family\'s first refresh with a proof binds the token and the family', async () => {
    const refresh = `${gw.url}/api/refresh`;
    const plain = await signInWith(gw, undefined);
    const first = await postJson(refresh, { refreshToken: plain.body.message.refreshToken }, { headers: { dpop: await makeProof(other, { htm: 'POST', htu: refresh, iat: now(gw) }) } });
    assert.equal(first.status, 200, show(first));
    assert.equal(first.body.message.token_type, 'DPoP');
    assert.deepEqual(decodeJwt(first.body.message.accessToken).cnf, { jkt: other.thumbprint });
    assertDpopRefusal(await postJson(refresh, { refreshToken: first.body.message.refreshToken }), 'invalid_dpop_proof', 'the family is bound now');
  });

  await t.test('bad proofs at sign-in are 401 invalid_dpop_proof, never a 500', async () => {
    const signin = `${gw.url}/api/signin`;
    const cases: [string, string][] = [
      ['garbage', 'eyJhbGciOiJFUzI1NiJ9.e30.x'],
      ['over dpop.maxProofBytes', 'b'.repeat(6000)],
      ['wrong htu', await makeProof(key, { htm: 'POST', htu: `${gw.url}/api/refresh`, iat: now(gw) })],
      ['alg none', unsignedProof(key, { htm: 'POST', htu: signin, iat: now(gw), jti: 'none-2' })],
    ];
    for (const [what, proof] of cases) assertDpopRefusal(await signInWith(gw, key, proof), 'invalid_dpop_proof', what);
    // Larger than the whole head may be: Node's parser refuses it before any route (431).
    assert.equal((await signInWith(gw, key, 'b'.repeat(20_000))).status, 431);
  });

  // Last: the reset ends every token of the key.
  await t.test('a token revoked by a reset, sent as DPoP with a good proof, is refused with a DPoP invalid_token challenge', async () => {
    const reset = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
    assert.equal(reset.status, 200, show(reset));
    assertDpopRefusal(await callWith(roles, { token: accessToken, proof: await proofFor(roles) }), 'invalid_token', 'revoked');
  });
});

test('DPoP nonces: required, given on refusal, accepted on retry, stale after two steps', async (t) => {
  const gw = await startGateway(t, { overrides: { dpop: { nonce: 'required', nonceStepSeconds: 60 } } });
  const key = await makeProofKey('EdDSA');
  const signin = `${gw.url}/api/signin`;
  const first = await signInWith(gw, key);
  assertDpopRefusal(first, 'use_dpop_nonce', 'no nonce');
  const nonce = first.headers.get('dpop-nonce');
  assert.ok(nonce !== null && /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(nonce), `a DPoP-Nonce: ${nonce}`);
  const res = await signInWith(gw, key, await makeProof(key, { htm: 'POST', htu: signin, iat: now(gw), nonce }));
  assert.equal(res.status, 200, show(res));
  const accessToken = res.body.message.accessToken as string;
  const roles = `${gw.url}/api/roles`;
  const used = await callWith(roles, { token: accessToken, proof: await makeProof(key, { htm: 'GET', htu: roles, iat: now(gw), accessToken, nonce }) });
  assert.equal(used.status, 200, show(used));
  assert.equal(used.headers.get('dpop-nonce'), nonce, 'a successful answer hands out the current nonce');
  assertDpopRefusal(await callWith(roles, { token: accessToken, proof: await makeProof(key, { htm: 'GET', htu: roles, iat: now(gw), accessToken, nonce: `${nonce}x` }) }), 'use_dpop_nonce', 'a forged nonce');
  gw.clock.advance(60_000);
  const next = await callWith(roles, { token: accessToken, proof: await makeProof(key, { htm: 'GET', htu: roles, iat: now(gw), accessToken, nonce }) });
  assert.equal(next.status, 200, `a nonce is good in the next step too: ${show(next)}`);
  const fresh = next.headers.get('dpop-nonce');
  assert.ok(fresh !== null && fresh !== nonce, 'and the answer hands out the new step\'s');
  gw.clock.advance(65_000);
  const stale = await callWith(roles, { token: accessToken, proof: await makeProof(key, { htm: 'GET', htu: roles, iat: now(gw), accessToken, nonce }) });
  assertDpopRefusal(stale, 'use_dpop_nonce', 'two steps later');
  assert.notEqual(stale.headers.get('dpop-nonce'), nonce);
});

test('with dpop.enabled off a proof at sign-in is refused, not ignored', async (t) => {
  const gw = await startGateway(t, { overrides: { dpop: { enabled: false, algorithms: ['ES256'] } } });
  const key = await makeProofKey('ES256');
  const res = await signInWith(gw, key);
  assert.equal(res.status, 401, show(res));
  assert.equal(res.body.message.code, 'invalid_dpop_proof');
  assert.match(res.headers.get('www-authenticate') ?? '', /^DPoP error="invalid_dpop_proof", error_description="[^"]+", algs="ES256"$/);
  assert.equal((await signInWith(gw, undefined)).status, 200, 'without a proof, as before');
});
