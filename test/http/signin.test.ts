import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { call, DEMO, postJson, sha256Hex, startGateway } from '../helpers/gateway.js';

test('POST /api/signin', async (t) => {
  const gw = await startGateway(t);
  const signin = `${gw.url}/api/signin`;

  await t.test('returns a token pair in the envelope for lowercase hex', async () => {
    const res = await postJson(signin, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^application\/json/);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.body.success, true);
    assert.deepEqual(Object.keys(res.body.message).sort(), ['accessToken', 'refreshToken', 'token_type']);
    const header = decodeProtectedHeader(res.body.message.accessToken);
    assert.equal(header.alg, 'EdDSA');
    assert.equal(header.typ, 'at+jwt');
    assert.equal(typeof header.kid, 'string');
    const claims = decodeJwt(res.body.message.accessToken);
    assert.equal(claims.sub, DEMO.alice.accountId);
    assert.equal(claims.client_id, DEMO.alice.keyId);
    assert.equal(claims.iss, 'auth-gateway');
    assert.equal(claims.aud, 'auth-gateway');
    assert.equal(typeof claims.jti, 'string');
    assert.equal(claims.exp! - claims.iat!, 900);
  });

  await t.test('accepts uppercase hex, base64 and base64url of the same hash', async () => {
    const hash = Buffer.from(sha256Hex(DEMO.alice.secret), 'hex');
    for (const apiSecret of [hash.toString('hex').toUpperCase(), hash.toString('base64'), hash.toString('base64url')]) {
      const res = await postJson(signin, { apiKey: DEMO.alice.apiKey, apiSecret });
      assert.equal(res.status, 200, apiSecret);
    }
  });

  await t.test('gives the same 401 for an unknown key, a wrong secret and a disabled key', async () => {
    const answers = await Promise.all([
      postJson(signin, { apiKey: 'ak_nobody_here', apiSecret: sha256Hex(DEMO.alice.secret) }),
      postJson(signin, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex('wrong') }),
      postJson(signin, { apiKey: DEMO.bob.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) }),
      postJson(signin, { apiKey: DEMO.aliceDisabled.apiKey, apiSecret: sha256Hex(DEMO.aliceDisabled.secret) }),
    ]);
    for (const res of answers) {
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, answers[0]!.body);
      assert.equal(res.body.success, false);
      assert.equal(res.body.message.code, 'invalid_credentials');
      assert.equal(res.headers.get('www-authenticate'), answers[0]!.headers.get('www-authenticate'));
    }
  });

  await t.test('refuses the plain secret and other non-hash values with 400', async () => {
    for (const apiSecret of [DEMO.alice.secret, sha256Hex(DEMO.alice.secret).slice(1), `${sha256Hex(DEMO.alice.secret)}0`, '', 'zz'.repeat(32)]) {
      const res = await postJson(signin, { apiKey: DEMO.alice.apiKey, apiSecret });
      assert.equal(res.status, 400, apiSecret);
      assert.equal(res.body.message.code, 'invalid_request');
    }
  });

  await t.test('answers bad bodies with a 4xx envelope', async () => {
    const cases: [RequestInit, number, string][] = [
      [{ body: '{"apiKey":', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: '[]', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: 'null', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: '', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: '{"apiKey":1,"apiSecret":true}', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: '{"apiKey":"ak_demo_alice"}', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request'],
      [{ body: 'apiKey=a&apiSecret=b', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, 'unsupported_media_type'],
      [{ body: '{}', headers: { 'content-type': 'text/plain' } }, 415, 'unsupported_media_type'],
      [{ body: '{}', headers: { 'content-type': 'application/json; charset=latin1' } }, 415, 'unsupported_media_type'],
      [{ body: '{}', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } }, 415, 'unsupported_media_type'],
      [{ body: JSON.stringify({ apiKey: 'x'.repeat(5000), apiSecret: 'y' }), headers: { 'content-type': 'application/json' } }, 413, 'payload_too_large'],
    ];
    for (const [init, status, code] of cases) {
      const res = await call(signin, { method: 'POST', ...init });
      assert.equal(res.status, status, JSON.stringify(init));
      assert.equal(res.body.success, false);
      assert.equal(res.body.message.code, code);
      assert.equal(typeof res.body.message.description, 'string');
    }
  });

  await t.test('refuses a huge streamed body with 413 without reading it all', async () => {
    const chunk = new Uint8Array(64 * 1024);
    let sent = 0;
    const body = new ReadableStream({
      pull(controller) {
        if (sent >= 64 * 1024 * 1024) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const res = await call(signin, { method: 'POST', body, headers: { 'content-type': 'application/json' }, duplex: 'half' } as RequestInit);
    assert.equal(res.status, 413);
    assert.equal(res.body.message.code, 'payload_too_large');
    assert.ok(sent < 64 * 1024 * 1024, 'the gateway answered before the whole body was sent');
  });

  await t.test('only POST is served', async () => {
    const res = await call(signin);
    assert.equal(res.status, 405);
    assert.equal(res.body.message.code, 'method_not_allowed');
    assert.match(res.headers.get('allow')!, /POST/);
  });

  await t.test('never writes the secret hash or the tokens to the log', async () => {
    const apiSecret = sha256Hex(DEMO.alice.secret);
    const res = await postJson(signin, { apiKey: DEMO.alice.apiKey, apiSecret });
    const log = gw.logs.join('');
    assert.ok(gw.logs.length > 0);
    assert.ok(!log.includes(apiSecret));
    assert.ok(!log.includes(res.body.message.accessToken));
    assert.ok(!log.includes(res.body.message.refreshToken.split('.')[1]));
  });
});
