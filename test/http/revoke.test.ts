/**
 * POST /api/revoke (RFC 7009) and POST /api/introspect (RFC 7662) on one gateway with the
 * embedded default (memory) state: what each kind of token becomes once revoked, reset or its
 * key disabled, on every path an access token opens; who may introspect; bad input.
 * The same across two instances on one Redis: test/redis/revocation-instances.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { startBackend } from '../helpers/backend.js';
import { makeProof, makeProofKey } from '../helpers/dpop.js';
import { call, DEMO, metricsText, postJson, sha256Hex, signIn, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner-keys.js';
import { openClient, roundTrip, startWsBackend, whenClosed } from '../helpers/ws-backend.js';

function form(fields: Record<string, string>): string {
  return new URLSearchParams(fields).toString();
}

export function revoke(gw: { url: string }, token: string, extra: Record<string, string> = {}): Promise<JsonResponse> {
  return call(`${gw.url}/api/revoke`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form({ token, ...extra }) });
}

export function introspect(gw: { url: string }, caller: string | undefined, token: string): Promise<JsonResponse> {
  return call(`${gw.url}/api/introspect`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form({ token }),
    ...(caller === undefined ? {} : { token: caller }),
  });
}

function refresh(gw: TestGateway, refreshToken: string) {
  return postJson(`${gw.url}/api/refresh`, { refreshToken });
}

function assertRevokedAnswer(res: JsonResponse, what: string): void {
  assert.equal(res.status, 200, what);
  assert.deepEqual(res.body, { success: true, message: {} }, what);
  assert.equal(res.headers.get('cache-control'), 'no-store', what);
}

test('revocation and introspection (memory)', async (t) => {
  const backend = await startBackend(t);
  const wsBackend = await startWsBackend(t);
  // bob's key is the backend that introspects; alice's is the client.
  const gw = await startOwnerGateway(t, {
    overrides: { routes: [{ name: 'things', prefix: '/things', targets: [backend.url] }, { name: 'ws', prefix: '/ws', targets: [wsBackend.url], websocket: true }], proxy: { trustedProxies: ['127.0.0.1'] } },
    edit: (data) => {
      for (const account of data.accounts) for (const key of account.apiKeys) if (key.id === DEMO.bob.keyId) key.scopes = ['introspect'];
    },
  });
  const checker = (await signIn(gw, DEMO.bob)).accessToken;

  await t.test('a revoked refresh token ends its whole family: the token, its successors, and nothing else', async () => {
    const first = await signIn(gw);
    const second = (await refresh(gw, first.refreshToken)).body.message;
    const other = await signIn(gw);
    // The consumed first token still proves the family: revoking it ends the successor too.
    assert.equal((await call(`${gw.url}/api/roles`, { token: second.accessToken })).status, 200);
    assertRevokedAnswer(await revoke(gw, first.refreshToken, { token_type_hint: 'refresh_token' }), 'revoke');
    assert.equal((await refresh(gw, second.refreshToken)).status, 401, 'the successor is dead');
    // RFC 7009 §2.1: the access tokens minted in the family go too, the cached one included.
    for (const token of [first.accessToken, second.accessToken]) {
      const res = await call(`${gw.url}/api/roles`, { token });
      assert.equal(res.status, 401);
      assert.equal(res.body.message.code, 'invalid_token');
      assert.deepEqual((await introspect(gw, checker, token)).body, { active: false });
    }
    assert.equal((await call(`${gw.url}/api/roles`, { token: other.accessToken })).status, 200, 'another family\'s access token lives on');
    assert.deepEqual((await introspect(gw, checker, second.refreshToken)).body, { active: false });
    assertRevokedAnswer(await revoke(gw, second.refreshToken), 'already revoked: 200 all the same');
    assert.equal((await refresh(gw, other.refreshToken)).status, 200, 'another family of the key lives on');
  });

  await t.test('a DPoP-bound access token introspects as DPoP with its key\'s thumbprint, and is revoked like any other', async () => {
    const key = await makeProofKey();
    const iat = Math.floor(gw.clock.now() / 1000);
    const signedIn = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) }, { headers: { dpop: await makeProof(key, { htm: 'POST', htu: `${gw.url}/api/signin`, iat }) } });
    assert.equal(signedIn.body.message.token_type, 'DPoP');
    const { accessToken } = signedIn.body.message;
    const answer = (await introspect(gw, checker, accessToken)).body;
    assert.deepEqual([answer.active, answer.token_type, answer.cnf?.jkt], [true, 'DPoP', key.thumbprint], 'RFC 9449 §6.2');
    const proofFor = async () => makeProof(key, { htm: 'GET', htu: `${gw.url}/api/roles`, iat, accessToken });
    assert.equal((await call(`${gw.url}/api/roles`, { headers: { authorization: `DPoP ${accessToken}`, dpop: await proofFor() } })).status, 200);
    assertRevokedAnswer(await revoke(gw, accessToken), 'revoke');
    assert.deepEqual((await introspect(gw, checker, accessToken)).body, { active: false });
    const refused = await call(`${gw.url}/api/roles`, { headers: { authorization: `DPoP ${accessToken}`, dpop: await proofFor() } });
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /^DPoP error="invalid_token"/, 'refused in DPoP\'s terms');
  });

  await t.test('a wrong secret revokes nothing', async () => {
    const pair = await signIn(gw);
    const forged = `${pair.refreshToken.split('.')[0]}.${'A'.repeat(43)}`;
    assertRevokedAnswer(await revoke(gw, forged), 'forged secret');
    assert.equal((await refresh(gw, pair.refreshToken)).status, 200);
  });

  await t.test('a revoked access token is refused on own endpoints, proxied routes and forward-auth, until it expires', async () => {
    const pair = await signIn(gw);
    assert.equal((await call(`${gw.url}/api/roles`, { token: pair.accessToken })).status, 200);
    assert.equal((await call(`${gw.url}/things/a`, { token: pair.accessToken })).status, 200, 'cached as verified first');
    const seen = backend.received.length;
    assertRevokedAnswer(await revoke(gw, pair.accessToken, { token_type_hint: 'access_token' }), 'revoke');
    for (const path of ['/api/roles', '/things/a', '/api/forward-auth/things/a']) {
      const res = await call(`${gw.url}${path}`, { token: pair.accessToken });
      assert.equal(res.status, 401, path);
      assert.equal(res.body.message.code, 'invalid_token', path);
      assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/, path);
    }
    assert.equal(backend.received.length, seen, 'no byte reached the backend');
    assert.deepEqual((await introspect(gw, checker, pair.accessToken)).body, { active: false });
    // The refresh token is another credential: revoking the access token leaves it.
    assert.equal((await refresh(gw, pair.refreshToken)).status, 200);
  });

  await t.test('an open WebSocket of a revoked access token is closed (4003), another token\'s is not', async () => {
    const revoked = await signIn(gw);
    const kept = await signIn(gw);
    const doomed = await openClient(gw.url, '/ws/a', { token: revoked.accessToken });
    const other = await openClient(gw.url, '/ws/b', { token: kept.accessToken });
    const closed = whenClosed(doomed, 5000);
    assertRevokedAnswer(await revoke(gw, revoked.accessToken), 'revoke');
    const { code } = await closed;
    assert.equal(code, 4003);
    assert.equal((await roundTrip(other, 'still here')).data.toString(), 'still here');
    other.terminate();
  });

  await t.test('unknown, malformed, expired and foreign tokens: 200, nothing revoked; hints are hints', async () => {
    const pair = await signIn(gw);
    const [h, p] = pair.accessToken.split('.');
    for (const token of ['x', 'abc.def', `${h}.${p}.${'A'.repeat(86)}`, 'e30.e30.', 'a'.repeat(4000), `${'A'.repeat(40)}.${'B'.repeat(43)}`]) {
      assertRevokedAnswer(await revoke(gw, token, { token_type_hint: 'something_else' }), token.slice(0, 20));
    }
    assert.equal((await call(`${gw.url}/api/roles`, { token: pair.accessToken })).status, 200, 'the real token lives on');
    // Client credentials an OAuth library sends along are not needed, and change nothing.
    assertRevokedAnswer(await revoke(gw, 'nope', { client_id: 'ak_demo_alice', client_secret: 'wrong' }), 'with client credentials');
  });

  await t.test('bad requests are 4xx in the envelope, never a 500', async () => {
    const cases: [string, RequestInit, number, string][] = [
      ['no body', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 400, 'invalid_request'],
      ['no token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'token_type_hint=access_token' }, 400, 'invalid_request'],
      ['empty token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'token=' }, 400, 'invalid_request'],
      ['past the body limit', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `token=${'a'.repeat(5000)}` }, 413, 'payload_too_large'],
      ['json', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"token":"x"}' }, 415, 'unsupported_media_type'],
    ];
    for (const [what, init, status, code] of cases) {
      for (const path of ['/api/revoke', '/api/introspect']) {
        const res = await call(`${gw.url}${path}`, { ...init, token: checker });
        assert.equal(res.status, status, `${path} ${what}`);
        assert.equal(res.body.message.code, code, `${path} ${what}`);
        // Only the OAuth library's endpoint carries RFC 6749's members; the others keep the envelope alone.
        assert.equal(res.body.error, path === '/api/revoke' ? 'invalid_request' : undefined, `${path} ${what}`);
      }
    }
    for (const body of ['token=%E0%A4%A', 'token=%00%ff', 'token=a&token=b', `token=${'%'.repeat(3000)}`]) {
      for (const path of ['/api/revoke', '/api/introspect']) {
        const res = await call(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body, token: checker });
        assert.ok(res.status < 500, `${path} ${body.slice(0, 20)}: ${res.status}`);
      }
    }
    const get = await call(`${gw.url}/api/revoke`);
    assert.equal(get.status, 405);
  });

  await t.test('API settings tokens are revoked in the owner API, not here', async () => {
    const created = await operator(gw).post(`/accounts/${DEMO.alice.accountId}/settings-tokens`, { name: 'ci', scopes: [] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const token = created.body.message.token as string;
    const tokenId = created.body.message.settingsToken.id as string;
    const res = await revoke(gw, token);
    assert.equal(res.status, 400);
    assert.equal(res.body.message.code, 'unsupported_token_type');
    assert.equal(res.body.error, 'unsupported_token_type', 'RFC 7009 §2.2.1, beside the envelope');
    assert.equal(typeof res.body.error_description, 'string');
    const active = await introspect(gw, checker, token);
    assert.equal(active.body.active, true);
    assert.equal(active.body.token_use, 'settings_token');
    assert.equal(active.body.sub, DEMO.alice.accountId);
    assert.ok(!JSON.stringify(active.body).includes(token), 'the token is not in the answer');
    assert.equal((await operator(gw).delete(`/accounts/${DEMO.alice.accountId}/settings-tokens/${tokenId}`)).status, 200);
    assert.deepEqual((await introspect(gw, checker, token)).body, { active: false });
  });

  await t.test('introspection of an access token: RFC 7662 members, and inactive after a reset', async () => {
    const pair = await signIn(gw);
    const res = await introspect(gw, checker, pair.accessToken);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const claims = decodeJwt(pair.accessToken);
    assert.deepEqual(res.body, {
      active: true, scope: '', client_id: DEMO.alice.keyId, sub: DEMO.alice.accountId,
      exp: claims.exp, iat: claims.iat, jti: claims.jti, iss: claims.iss, aud: claims.aud,
      token_type: 'Bearer', token_use: 'access_token',
    });
    const reset = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
    assert.equal(reset.status, 200);
    // The clock is frozen: tokens issued in the reset's very millisecond would be covered by it.
    gw.clock.advance(1000);
    assert.deepEqual((await introspect(gw, checker, pair.accessToken)).body, { active: false });
    assert.deepEqual((await introspect(gw, checker, pair.refreshToken)).body, { active: false }, 'the family is reset too');
  });

  await t.test('introspection of a refresh token: active until consumed, never its secret', async () => {
    const pair = await signIn(gw);
    const res = await introspect(gw, checker, pair.refreshToken);
    assert.equal(res.body.active, true);
    assert.equal(res.body.token_use, 'refresh_token');
    assert.equal(res.body.client_id, DEMO.alice.keyId);
    assert.equal(res.body.sub, DEMO.alice.accountId);
    assert.ok(res.body.exp > gw.clock.now() / 1000);
    const secret = pair.refreshToken.split('.')[1]!;
    assert.ok(!JSON.stringify(res.body).includes(secret) && !JSON.stringify(res.body).includes(sha256Hex(secret)), 'no secret, no digest');
    const next = (await refresh(gw, pair.refreshToken)).body.message;
    assert.deepEqual((await introspect(gw, checker, pair.refreshToken)).body, { active: false }, 'consumed');
    assert.equal((await introspect(gw, checker, next.refreshToken)).body.active, true);
    const forged = `${pair.refreshToken.split('.')[0]}.${'A'.repeat(43)}`;
    assert.deepEqual((await introspect(gw, checker, forged)).body, { active: false }, 'wrong secret');
  });

  await t.test('a disabled key makes its tokens inactive', async () => {
    const pair = await signIn(gw);
    assert.equal((await introspect(gw, checker, pair.accessToken)).body.active, true);
    const off = await operator(gw).patch(`/accounts/${DEMO.alice.accountId}/keys/${DEMO.alice.keyId}`, { enabled: false });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    assert.deepEqual((await introspect(gw, checker, pair.accessToken)).body, { active: false });
    assert.deepEqual((await introspect(gw, checker, pair.refreshToken)).body, { active: false });
    assert.equal((await operator(gw).patch(`/accounts/${DEMO.alice.accountId}/keys/${DEMO.alice.keyId}`, { enabled: true })).status, 200);
    // Disabling reset the key's tokens at this (frozen) millisecond: later ones are new.
    gw.clock.advance(1000);
  });

  await t.test('unknown and malformed tokens are {active: false} and nothing more', async () => {
    for (const token of ['x', 'abc.def', 'e30.e30.', 'gwst_nothing', `${'A'.repeat(40)}.${'B'.repeat(43)}`]) {
      const res = await introspect(gw, checker, token);
      assert.equal(res.status, 200, token);
      assert.deepEqual(res.body, { active: false }, token);
    }
  });

  await t.test('only a caller whose key has the scope introspect may ask', async () => {
    const pair = await signIn(gw);
    const none = await introspect(gw, undefined, pair.accessToken);
    assert.equal(none.status, 401);
    assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer realm=/);
    const bad = await introspect(gw, 'not-a-token', pair.accessToken);
    assert.equal(bad.status, 401);
    assert.equal(bad.body.message.code, 'invalid_token');
    const unscoped = await introspect(gw, pair.accessToken, pair.accessToken);
    assert.equal(unscoped.status, 403);
    assert.equal(unscoped.body.message.code, 'insufficient_scope');
    assert.match(unscoped.headers.get('www-authenticate') ?? '', /error="insufficient_scope".*scope="introspect"/);
  });

  await t.test('counted in gateway_revocations_total and gateway_introspections_total', async () => {
    const text = await metricsText(gw);
    assert.match(text, /gateway_revocations_total\{type="refresh_token",outcome="revoked"\} [1-9]/);
    assert.match(text, /gateway_revocations_total\{type="access_token",outcome="revoked"\} [1-9]/);
    assert.match(text, /gateway_revocations_total\{type="unknown",outcome="ignored"\} [1-9]/);
    assert.match(text, /gateway_introspections_total\{type="refresh_token",active="true"\} [1-9]/);
    assert.match(text, /gateway_introspections_total\{type="access_token",active="false"\} [1-9]/);
  });

  await t.test('nothing secret in the logs', async () => {
    const pair = await signIn(gw);
    await revoke(gw, pair.refreshToken);
    await revoke(gw, pair.accessToken);
    const text = gw.logs.join('\n');
    assert.ok(!text.includes(pair.refreshToken.split('.')[1]!), 'no refresh secret');
    assert.ok(!text.includes(pair.accessToken.split('.')[2]!), 'no access token');
  });
});

test('revocations are throttled: every presented token is a guess', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { limits: { mode: 'enforce', refresh: { perAddress: [{ limit: 3, seconds: 60 }] } } } });
  for (let i = 0; i < 3; i++) assert.equal((await revoke(gw, `guess-${i}`)).status, 200);
  const limited = await revoke(gw, 'guess-4');
  assert.equal(limited.status, 429);
  assert.equal(limited.body.message.code, 'rate_limited');
  assert.equal(limited.body.error, 'temporarily_unavailable');
  assert.ok(Number(limited.headers.get('retry-after')) > 0);
});
