/**
 * The verified-access-token cache over real HTTP (src/auth/verified-tokens.ts, docs/tokens.md):
 * a token answered from the cache is still refused once expired, once its signing key is
 * removed, once a reset covers it; a one-byte sibling of a cached token is a 401 that reaches
 * no backend; scopes and rate limits still apply on a hit; a hit forwards the same identity as
 * a fresh verification; floods of invalid and of valid tokens keep the cache under its bounds.
 * The signer's own cases (every byte, re-bound kids, bad key sets): test/unit/verified-tokens.test.ts.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import type { SigningKeyConfig } from '../../src/config/schema.js';
import { startBackend, type Backend } from '../helpers/backend.js';
import { call, DEMO, postJson, sha256Hex, signIn, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { newKey, startProxy, writeDataFile } from '../helpers/proxy.js';

function edKey(kid: string): SigningKeyConfig {
  const { privateKey } = generateKeyPairSync('ed25519');
  return { kid, alg: 'EdDSA', pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

function assertInvalidToken(res: JsonResponse, label: string): void {
  assert.equal(res.status, 401, `${label}: ${JSON.stringify(res.body)}`);
  assert.equal(res.body.success, false, label);
  assert.equal(res.body.message.code, 'invalid_token', label);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer .*error="invalid_token"/, label);
}

/** A gateway proxying /svc to an echo backend, with these overrides. */
async function proxyGateway(t: TestContext, overrides: Record<string, unknown> = {}, routeExtra: Record<string, unknown> = {}): Promise<{ gw: TestGateway; backend: Backend }> {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/svc', targets: [backend.url], ...routeExtra }], overrides);
  return { gw, backend };
}

const cached = (gw: TestGateway) => gw.services.signer.verifiedTokenStats().entries;

test('a hit forwards the identity a fresh verification forwards', async (t) => {
  const { gw, backend } = await proxyGateway(t);
  const { accessToken } = await signIn(gw);
  const identityOf = (i: number) => {
    const h = backend.received[i]!.headers;
    return { account: h['x-account-id'], key: h['x-key-id'], token: h['x-token-id'] };
  };
  assert.equal((await call(`${gw.url}/svc/a`, { token: accessToken })).status, 200, 'the miss');
  assert.equal(cached(gw), 1);
  assert.equal((await call(`${gw.url}/svc/b`, { token: accessToken })).status, 200, 'the hit');
  assert.equal(cached(gw), 1, 'the same entry');
  assert.deepEqual(identityOf(1), identityOf(0));
  assert.deepEqual(identityOf(0).account, [DEMO.alice.accountId]);
  assert.deepEqual(identityOf(0).key, [DEMO.alice.keyId]);
});

test('a cached token is refused once it expires, and reaches no backend', async (t) => {
  const { gw, backend } = await proxyGateway(t, { tokens: { memoryStoreMaxTokens: 10_000, accessTokenTtlSeconds: 300, clockSkewSeconds: 5 } });
  const { accessToken } = await signIn(gw);
  for (let i = 0; i < 3; i++) assert.equal((await call(`${gw.url}/svc/${i}`, { token: accessToken })).status, 200, `call ${i}`);
  gw.clock.advance(300_000 + 4_000);
  assert.equal((await call(`${gw.url}/svc/late`, { token: accessToken })).status, 200, 'within the skew');
  gw.clock.advance(1_000);
  assertInvalidToken(await call(`${gw.url}/svc/expired`, { token: accessToken }), 'at exp + skew');
  assert.deepEqual(backend.received.map((r) => r.url), ['/svc/0', '/svc/1', '/svc/2', '/svc/late']);
});

test('a cached token is refused once its signing key is removed; the remaining key keeps working', async (t) => {
  const [a, b] = [edKey('a'), edKey('b')];
  const { gw, backend } = await proxyGateway(t, { signing: { keys: [a, b], activeKid: 'a' } });
  const byA = (await signIn(gw)).accessToken;
  assert.equal((await call(`${gw.url}/svc/1`, { token: byA })).status, 200);
  assert.deepEqual((await call(`${gw.url}/.well-known/jwks.json`)).body.keys.map((k: { kid: string }) => k.kid), ['a', 'b']);
  gw.services.signer.useKeys({ keys: [a, b], activeKid: 'b' });
  const byB = (await signIn(gw)).accessToken;
  assert.equal((await call(`${gw.url}/svc/2`, { token: byA })).status, 200, 'a still verifies while configured');
  assert.equal((await call(`${gw.url}/svc/3`, { token: byB })).status, 200);
  assert.equal(cached(gw), 2);

  gw.services.signer.useKeys({ keys: [b], activeKid: 'b' });
  assertInvalidToken(await call(`${gw.url}/svc/4`, { token: byA }), 'a token of the removed key');
  assertInvalidToken(await call(`${gw.url}/api/roles`, { token: byA }), 'on the gateway\'s own routes too');
  assert.equal((await call(`${gw.url}/svc/5`, { token: byB })).status, 200);
  const jwks = await call(`${gw.url}/.well-known/jwks.json`);
  assert.deepEqual(jwks.body.keys.map((k: { kid: string }) => k.kid), ['b'], 'the published keys follow');
  assert.deepEqual(backend.received.map((r) => r.url), ['/svc/1', '/svc/2', '/svc/3', '/svc/5']);
});

test('a cached token is refused after a reset of its key', async (t) => {
  const { gw, backend } = await proxyGateway(t);
  const before = (await signIn(gw)).accessToken;
  const bob = (await signIn(gw, DEMO.bob)).accessToken;
  for (const token of [before, before, bob]) assert.equal((await call(`${gw.url}/svc/x`, { token })).status, 200);
  gw.clock.advance(1);
  const reset = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret), scope: 'key' });
  assert.equal(reset.status, 200, JSON.stringify(reset.body));
  gw.clock.advance(1);
  assertInvalidToken(await call(`${gw.url}/svc/after`, { token: before }), 'the reset covers the cached token');
  assert.equal(cached(gw), 2, 'the entry is still cached: the reset check is what refuses it, on every request');
  assert.equal((await call(`${gw.url}/svc/bob`, { token: bob })).status, 200, 'another account\'s cached token lives');
  assert.equal((await call(`${gw.url}/svc/new`, { token: (await signIn(gw)).accessToken })).status, 200, 'a token issued after the reset lives');
  assert.deepEqual(backend.received.map((r) => r.url), ['/svc/x', '/svc/x', '/svc/x', '/svc/bob', '/svc/new']);
});

test('a tampered token with a cached sibling is a 401 that reaches no backend', async (t) => {
  const { gw, backend } = await proxyGateway(t);
  const { accessToken } = await signIn(gw);
  assert.equal((await call(`${gw.url}/svc/ok`, { token: accessToken })).status, 200);
  const [h, p, s] = accessToken.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
  const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
  const variants: [string, string][] = [
    ['a payload byte', `${h}.${flip(p, 10)}.${s}`],
    ['the last payload character', `${h}.${flip(p, p.length - 1)}.${s}`],
    ['a header byte', `${flip(h, 5)}.${p}.${s}`],
    ['a signature byte', `${h}.${p}.${flip(s, 20)}`],
    ['the last signature character', `${h}.${p}.${flip(s, s.length - 1)}`],
    ['the payload given another account', `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: DEMO.bob.accountId })).toString('base64url')}.${s}`],
  ];
  for (const [label, token] of variants) {
    assert.notEqual(token, accessToken, label);
    assertInvalidToken(await call(`${gw.url}/svc/tampered`, { token }), label);
  }
  assert.equal((await call(`${gw.url}/svc/ok`, { token: accessToken })).status, 200, 'the sibling still works');
  assert.deepEqual(backend.received.map((r) => r.url), ['/svc/ok', '/svc/ok']);
  assert.equal(cached(gw), 1, 'no failure was cached');
});

test('scopes still apply on a hit', async (t) => {
  const reader = newKey('reader', 'acct_shop', ['orders:read']);
  const plain = newKey('plain', 'acct_shop');
  const file = writeDataFile(t, [reader, plain]);
  const { gw, backend } = await proxyGateway(t, { data: { file } }, { requiredScope: 'orders:read' });
  const without = (await signIn(gw, plain)).accessToken;
  const withScope = (await signIn(gw, reader)).accessToken;
  for (let i = 0; i < 3; i++) {
    const res = await call(`${gw.url}/svc/${i}`, { token: without });
    assert.equal(res.status, 403, `call ${i}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.message.code, 'insufficient_scope');
    assert.equal((await call(`${gw.url}/svc/${i}`, { token: withScope })).status, 200, `call ${i} with the scope`);
  }
  assert.equal(cached(gw), 2, 'both tokens verified, hence cached: the scope check runs after');
  assert.deepEqual(backend.received.map((r) => r.headers['x-key-id']), [['reader'], ['reader'], ['reader']]);
});

test('rate limits still count and refuse on a hit', async (t) => {
  const { gw, backend } = await proxyGateway(t, {
    limits: { mode: 'enforce', calls: { perAccount: [{ limit: 3, seconds: 60 }] }, signIn: { perAddress: [{ limit: 1000, seconds: 60 }] } },
  });
  const { accessToken } = await signIn(gw);
  for (let i = 1; i <= 3; i++) assert.equal((await call(`${gw.url}/svc/${i}`, { token: accessToken })).status, 200, `call ${i}`);
  for (let i = 4; i <= 5; i++) {
    const res = await call(`${gw.url}/svc/${i}`, { token: accessToken });
    assert.equal(res.status, 429, `call ${i}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.message.code, 'rate_limited');
  }
  assert.equal(backend.received.length, 3);
  assert.equal(cached(gw), 1);
});

test('floods: distinct invalid tokens add nothing, distinct valid ones stay under the bounds', async (t) => {
  const gw = await startGateway(t, { overrides: { tokens: { memoryStoreMaxTokens: 10_000, verifiedCacheMaxEntries: 20 } } });
  const { accessToken } = await signIn(gw);
  assert.equal((await call(`${gw.url}/api/roles`, { token: accessToken })).status, 200);
  const [h, p] = accessToken.split('.') as [string, string];
  for (let i = 0; i < 200; i++) {
    const forged = `${h}.${p}.${Buffer.alloc(64, i).toString('base64url')}`;
    assertInvalidToken(await call(`${gw.url}/api/roles`, { token: forged }), `forgery ${i}`);
  }
  assert.equal(cached(gw), 1, 'forgeries are never cached');
  for (let i = 0; i < 60; i++) {
    const token = (await signIn(gw)).accessToken;
    assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200, `token ${i}`);
    assert.ok(cached(gw) <= 20, `after ${i + 1} tokens: ${cached(gw)} entries`);
  }
  assert.equal(cached(gw), 20);
  const { bytes } = gw.services.signer.verifiedTokenStats();
  assert.ok(bytes > 0 && bytes <= gw.services.config.tokens.verifiedCacheMaxBytes, `bytes ${bytes}`);
});

test('with the cache off, tokens verify as before and nothing is kept', async (t) => {
  const { gw } = await proxyGateway(t, { tokens: { memoryStoreMaxTokens: 10_000, verifiedCacheMaxEntries: 0 } });
  const { accessToken } = await signIn(gw);
  for (let i = 0; i < 3; i++) assert.equal((await call(`${gw.url}/svc/${i}`, { token: accessToken })).status, 200);
  assert.deepEqual(gw.services.signer.verifiedTokenStats(), { entries: 0, bytes: 0 });
  gw.clock.advance(15 * 60_000 + 10_000);
  assertInvalidToken(await call(`${gw.url}/svc/late`, { token: accessToken }), 'expired');
});
