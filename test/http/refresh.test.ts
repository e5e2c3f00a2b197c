import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { parseRefreshToken } from '../../src/auth/refresh.js';
import type { RotateRequest, RotateResult } from '../../src/state/tokens/store.js';
import { call, DEMO, postJson, signIn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { refreshHandleOf, refreshTokenOf, type RefreshHandle } from '../helpers/refresh-token.js';

const DAY = 86_400_000;

function refresh(gw: TestGateway, refreshToken: string) {
  return postJson(`${gw.url}/api/refresh`, { refreshToken });
}

function assertInvalidGrant(res: { status: number; body: any }, what?: string) {
  assert.equal(res.status, 401, what);
  assert.equal(res.body.success, false, what);
  assert.equal(res.body.message.code, 'invalid_grant', what);
}

type Rotation = { request: RotateRequest; result: RotateResult };

/** Records every rotate call the gateway's token store answers; the auth service holds this very object. */
function watchRotations(gw: TestGateway): Rotation[] {
  const seen: Rotation[] = [];
  const store = gw.services.tokens;
  const rotate = store.rotate.bind(store);
  store.rotate = async (request) => {
    const result = await rotate(request);
    seen.push({ request, result });
    return result;
  };
  return seen;
}

test('POST /api/refresh', async (t) => {
  const gw = await startGateway(t);

  await t.test('rotates: a new pair for the same account, and the old token is spent', async () => {
    const first = await signIn(gw);
    const res = await refresh(gw, first.refreshToken);
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    const next = res.body.message;
    assert.deepEqual(Object.keys(next).sort(), ['accessToken', 'refreshToken', 'token_type']);
    assert.notEqual(next.refreshToken, first.refreshToken);
    assert.notEqual(next.accessToken, first.accessToken);
    assert.equal(decodeJwt(next.accessToken).sub, DEMO.alice.accountId);
    assert.equal(decodeJwt(next.accessToken).client_id, DEMO.alice.keyId);
    const roles = await call(`${gw.url}/api/roles`, { token: next.accessToken });
    assert.equal(roles.status, 200);

    gw.clock.advance(11_000); // past the 10 s grace window
    assertInvalidGrant(await refresh(gw, first.refreshToken));
  });

  await t.test('reuse of a rotated token after the grace window revokes the whole family', async () => {
    const first = await signIn(gw);
    const second = (await refresh(gw, first.refreshToken)).body.message;
    gw.clock.advance(11_000);
    assertInvalidGrant(await refresh(gw, first.refreshToken));
    assertInvalidGrant(await refresh(gw, second.refreshToken));
    // Another family of the same key is untouched.
    const other = await signIn(gw);
    assert.equal((await refresh(gw, other.refreshToken)).status, 200);
  });

  await t.test('a duplicate within the grace window gets the very same pair', async () => {
    const first = await signIn(gw);
    const a = await refresh(gw, first.refreshToken);
    gw.clock.advance(9_000);
    const b = await refresh(gw, first.refreshToken);
    assert.equal(b.status, 200);
    assert.deepEqual(b.body.message, a.body.message);
    // The family did not fork: the one successor keeps working.
    assert.equal((await refresh(gw, a.body.message.refreshToken)).status, 200);
  });

  await t.test('50 concurrent refreshes with one token all get one and the same successor pair', async () => {
    const first = await signIn(gw);
    const answers = await Promise.all(Array.from({ length: 50 }, () => refresh(gw, first.refreshToken)));
    for (const res of answers) {
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.message, answers[0]!.body.message);
    }
    assert.equal((await refresh(gw, answers[0]!.body.message.refreshToken)).status, 200);
  });

  await t.test('reads JSON, a form, JSON without Content-Type, and JSON that curl labels a form', async () => {
    const bodies: [string, Record<string, string>][] = [
      ['json', { 'content-type': 'application/json' }],
      ['form', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['json', {}],
      ['json', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['json', { 'content-type': 'application/json; charset=utf-8' }],
    ];
    for (const [kind, headers] of bodies) {
      const { refreshToken } = await signIn(gw);
      const text = kind === 'json' ? JSON.stringify({ refreshToken }) : new URLSearchParams({ refreshToken }).toString();
      // A Uint8Array body makes fetch send no Content-Type of its own.
      const res = await call(`${gw.url}/api/refresh`, { method: 'POST', headers, body: new TextEncoder().encode(text) });
      assert.equal(res.status, 200, `${kind} ${JSON.stringify(headers)}: ${JSON.stringify(res.body)}`);
    }
  });

  await t.test('answers bad input with a 4xx envelope', async () => {
    const cases: [RequestInit, number, string][] = [
      [{ body: '{"refreshToken":', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: '{}', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: '{"refreshToken":42}', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: 'refreshToken=a&refreshToken=b', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 400, 'invalid_request'],
      [{ body: '{"refreshToken":"x"}', headers: { 'content-type': 'text/plain' } }, 415, 'unsupported_media_type'],
      [{ body: JSON.stringify({ refreshToken: 'x'.repeat(5000) }), headers: { 'content-type': 'application/json' } }, 413, 'payload_too_large'],
    ];
    for (const [init, status, code] of cases) {
      const res = await call(`${gw.url}/api/refresh`, { method: 'POST', ...init });
      assert.equal(res.status, status, JSON.stringify(init));
      assert.equal(res.body.message.code, code);
    }
  });

  await t.test('refuses garbage, forged and access tokens with 401 invalid_grant', async () => {
    const { accessToken, refreshToken } = await signIn(gw);
    const [handle, secret] = refreshToken.split('.') as [string, string];
    const otherSecret = Buffer.alloc(32, 7).toString('base64url');
    for (const token of ['nonsense', `${handle}.${otherSecret}`, accessToken, `${refreshToken}x`, `.${secret}`, 'a'.repeat(2000)]) {
      assertInvalidGrant(await refresh(gw, token));
    }

    // Forged handles: well-formed, each naming ids that exist, with this token's real secret.
    // Each must be refused by the check it is about, so the store's rotate calls are watched:
    // a handle whose key is not its account's, or is disabled, is refused before the store; the
    // others reach the store, which finds the token belongs to another account, family or id.
    const real = refreshHandleOf(refreshToken);
    const bobs = refreshHandleOf((await signIn(gw, DEMO.bob)).refreshToken);
    const alicesOther = refreshHandleOf((await signIn(gw)).refreshToken);
    const forgeries: [string, RefreshHandle, 'store' | 'key check'][] = [
      ['another account, with that account\'s own key', { ...real, accountId: DEMO.bob.accountId, keyId: DEMO.bob.keyId }, 'store'],
      ['another account, with this account\'s key', { ...real, accountId: DEMO.bob.accountId }, 'key check'],
      ['the live family of another account', { ...real, familyId: bobs.familyId }, 'store'],
      ['another live family of this key', { ...real, familyId: alicesOther.familyId }, 'store'],
      ['another live token of this key', { ...real, tokenId: alicesOther.tokenId }, 'store'],
      ['this account\'s disabled key', { ...real, keyId: DEMO.aliceDisabled.keyId }, 'key check'],
    ];
    const rotations = watchRotations(gw);
    for (const [what, forged, refusedBy] of forgeries) {
      const token = refreshTokenOf(forged, secret);
      assert.deepEqual(parseRefreshToken(token), { ...forged, secret }, `${what}: a well-formed refresh token`);
      rotations.length = 0;
      assertInvalidGrant(await refresh(gw, token), what);
      if (refusedBy === 'key check') {
        assert.deepEqual(rotations, [], `${what}: refused before the store`);
      } else {
        assert.equal(rotations.length, 1, `${what}: reached the store`);
        const [{ request, result }] = rotations as [Rotation];
        assert.deepEqual({ accountId: request.accountId, keyId: request.keyId, familyId: request.familyId, tokenId: request.tokenId }, forged, what);
        assert.deepEqual(result, { outcome: 'invalid' }, `${what}: the store refused it`);
      }
    }
    // None of those attempts touched the real token.
    rotations.length = 0;
    assert.equal((await refresh(gw, refreshToken)).status, 200);
    assert.deepEqual(rotations.map((r) => r.result), [{ outcome: 'rotated' }]);
  });

  await t.test('a refresh token expires after 14 idle days', async () => {
    const { refreshToken } = await signIn(gw);
    gw.clock.advance(14 * DAY + 1);
    assertInvalidGrant(await refresh(gw, refreshToken));
  });

  await t.test('a family ends 30 days after sign-in however often it is refreshed', async () => {
    let { refreshToken } = await signIn(gw);
    for (let day = 10; day < 30; day += 10) {
      gw.clock.advance(10 * DAY);
      const res = await refresh(gw, refreshToken);
      assert.equal(res.status, 200, `day ${day}`);
      refreshToken = res.body.message.refreshToken;
    }
    gw.clock.advance(10 * DAY);
    assertInvalidGrant(await refresh(gw, refreshToken));
  });

  await t.test('never writes refresh tokens to the log', async () => {
    const { refreshToken } = await signIn(gw);
    const next = (await refresh(gw, refreshToken)).body.message;
    gw.clock.advance(11_000);
    await refresh(gw, refreshToken); // reuse: logged as a security event
    const log = gw.logs.join('');
    assert.match(log, /refresh token reused/);
    for (const token of [refreshToken, next.refreshToken]) assert.ok(!log.includes(token.split('.')[1]!));
  });
});

test('POST /api/refresh with the grace window off answers a duplicate as reuse', async (t) => {
  const gw = await startGateway(t, { overrides: { tokens: { refreshGraceSeconds: 0 } } });
  const { refreshToken } = await signIn(gw);
  const next = (await refresh(gw, refreshToken)).body.message;
  assertInvalidGrant(await refresh(gw, refreshToken));
  assertInvalidGrant(await refresh(gw, next.refreshToken));
});
