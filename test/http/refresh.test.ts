import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { call, DEMO, postJson, signIn, startGateway, type TestGateway } from '../helpers/gateway.js';

const DAY = 86_400_000;

function refresh(gw: TestGateway, refreshToken: string) {
  return postJson(`${gw.url}/api/refresh`, { refreshToken });
}

function assertInvalidGrant(res: { status: number; body: any }) {
  assert.equal(res.status, 401);
  assert.equal(res.body.success, false);
  assert.equal(res.body.message.code, 'invalid_grant');
}

test('POST /api/refresh', async (t) => {
  const gw = await startGateway(t);

  await t.test('rotates: a new pair for the same account, and the old token is spent', async () => {
    const first = await signIn(gw);
    const res = await refresh(gw, first.refreshToken);
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    const next = res.body.message;
    assert.deepEqual(Object.keys(next).sort(), ['accessToken', 'refreshToken']);
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
    const [, keyId, tokenId] = JSON.parse(Buffer.from(handle, 'base64url').toString());
    const forgedHandle = Buffer.from(JSON.stringify([DEMO.bob.accountId, keyId, tokenId])).toString('base64url');
    const otherSecret = Buffer.alloc(32, 7).toString('base64url');
    for (const token of ['nonsense', `${handle}.${otherSecret}`, `${forgedHandle}.${secret}`, accessToken, `${refreshToken}x`, `.${secret}`, 'a'.repeat(2000)]) {
      assertInvalidGrant(await refresh(gw, token));
    }
    // None of those attempts touched the real token.
    assert.equal((await refresh(gw, refreshToken)).status, 200);
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
