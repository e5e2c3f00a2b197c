/**
 * The verified-access-token cache behind signer.verifyAccessToken (src/auth/verified-tokens.ts):
 * a hit answers what a fresh verification answers, never past the token's times, never for a
 * key that was removed or re-bound by useKeys, never for a string that differs by one byte;
 * failures are not cached; entries and bytes stay under their bounds whatever is sent.
 * Over real HTTP (resets, scopes, limits on a hit): test/http/token-cache.test.ts.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { createSigner, SigningKeyError, type Signer } from '../../src/auth/signer.js';
import { entryBytes } from '../../src/auth/verified-tokens.js';
import { loadConfig } from '../../src/config/load.js';
import type { SigningKeyConfig } from '../../src/config/schema.js';
import { InvalidToken } from '../../src/errors/errors.js';
import { ManualClock } from '../helpers/clock.js';

function edKey(kid: string): SigningKeyConfig {
  const { privateKey } = generateKeyPairSync('ed25519');
  return { kid, alg: 'EdDSA', pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

function makeSigner(keys: SigningKeyConfig[], tokens: Record<string, unknown> = {}, activeKid?: string, clock = new ManualClock(Date.UTC(2026, 0, 1))) {
  const config = loadConfig({ env: {}, cwd: process.cwd(), overrides: { signing: { keys, ...(activeKid === undefined ? {} : { activeKid }) }, tokens } });
  return { signer: createSigner(config, clock), clock, config };
}

const subject = (i: number) => ({ accountId: `acct_${i}`, keyId: `key_${i}`, scopes: i % 2 === 0 ? ['orders:read'] : [] });

async function refused(signer: Signer, token: string, label: string): Promise<void> {
  await assert.rejects(signer.verifyAccessToken(token), InvalidToken, label);
}

test('a hit answers the claims a fresh verification answers, frozen', async () => {
  const key = edKey('k1');
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const { signer } = makeSigner([key], {}, undefined, clock);
  // The same key, cache off: every call a full verification.
  const { signer: uncached } = makeSigner([key], { verifiedCacheMaxEntries: 0 }, undefined, clock);
  for (let i = 0; i < 4; i++) {
    const token = await signer.issueAccessToken(subject(i));
    const fresh = await signer.verifyAccessToken(token);
    const hit = await signer.verifyAccessToken(token);
    assert.equal(hit, fresh, `token ${i}: the second answer is the cached one`);
    assert.deepEqual(hit, await uncached.verifyAccessToken(token), `token ${i}: as the uncached signer verifies it`);
    assert.ok(Object.isFrozen(hit), `token ${i}: callers cannot change what later hits get`);
  }
  assert.equal(signer.verifiedTokenStats().entries, 4);
  assert.deepEqual(uncached.verifiedTokenStats(), { entries: 0, bytes: 0 }, 'maxEntries 0: nothing kept');
});

test('a hit is refused once the token has expired, by the gateway clock, with the configured skew', async () => {
  const { signer, clock } = makeSigner([edKey('k1')], { accessTokenTtlSeconds: 600, clockSkewSeconds: 5 });
  const token = await signer.issueAccessToken(subject(1));
  await signer.verifyAccessToken(token);
  clock.advance(600_000 + 4_000);
  assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1', 'inside the skew: still good');
  assert.equal(signer.verifiedTokenStats().entries, 1);
  clock.advance(1_000);
  await assert.rejects(signer.verifyAccessToken(token), (err: unknown) => err instanceof InvalidToken && /expired/.test(err.message), 'at exp + skew');
  assert.equal(signer.verifiedTokenStats().entries, 0, 'the expired entry is gone, not only refused');
  // A clock moved back does not revive it from the cache: it is verified in full again.
  clock.advance(-1_000);
  assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1');
});

test('a hit is refused when the gateway clock falls behind its iat by more than the skew, as a fresh check would', async () => {
  const { signer, clock } = makeSigner([edKey('k1')], { clockSkewSeconds: 5 });
  const token = await signer.issueAccessToken(subject(1));
  await signer.verifyAccessToken(token);
  clock.advance(-5_000);
  assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1', 'within the skew');
  clock.advance(-1_000);
  await refused(signer, token, 'issued in the future by more than the skew');
  clock.advance(6_000);
  assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1', 'good again once the clock is back');
});

test('every one-character change of a cached token is refused', async () => {
  const { signer } = makeSigner([edKey('k1')]);
  const token = await signer.issueAccessToken(subject(2));
  await signer.verifyAccessToken(token);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let at = 0; at < token.length; at++) {
    if (token[at] === '.') continue;
    // The neighbouring character: for the last one of a segment, it may differ only in
    // base64url's spare bits, the case a lenient decoder would let through.
    const other = alphabet[(alphabet.indexOf(token[at]!) + 1) % alphabet.length]!;
    await refused(signer, token.slice(0, at) + other + token.slice(at + 1), `character ${at} changed`);
  }
  await refused(signer, `${token}A`, 'a character added');
  await refused(signer, token.slice(0, -1), 'a character removed');
  assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_2', 'the cached sibling still verifies');
  assert.equal(signer.verifiedTokenStats().entries, 1, 'no failure was cached');
});

test('useKeys: a removed key\'s tokens stop verifying at once, a kept key\'s stay cached', async () => {
  const [a, b] = [edKey('a'), edKey('b')];
  const { signer } = makeSigner([a, b], {}, 'a');
  const byA = await signer.issueAccessToken(subject(1));
  await signer.verifyAccessToken(byA);
  signer.useKeys({ keys: [a, b], activeKid: 'b' });
  const byB = await signer.issueAccessToken(subject(2));
  await signer.verifyAccessToken(byB);
  assert.equal(signer.verifiedTokenStats().entries, 2, 'a reload that keeps a key keeps its entries');
  const cachedA = await signer.verifyAccessToken(byA);
  assert.equal(await signer.verifyAccessToken(byA), cachedA, 'still a hit after the reload');

  signer.useKeys({ keys: [b], activeKid: 'b' });
  assert.equal(signer.verifiedTokenStats().entries, 1, 'the removed key\'s entry is dropped eagerly');
  await refused(signer, byA, 'a token of the removed key');
  assert.equal((await signer.verifyAccessToken(byB)).sub, 'acct_2');
  assert.deepEqual(signer.jwks.keys.map((k) => k.kid), ['b'], 'the JWKS follows');
});

test('useKeys: a kid re-bound to another key refuses the old key\'s tokens, cached or not', async () => {
  const { signer } = makeSigner([edKey('k1')]);
  const old = await signer.issueAccessToken(subject(1));
  await signer.verifyAccessToken(old);
  signer.useKeys({ keys: [edKey('k1')] });
  assert.equal(signer.verifiedTokenStats().entries, 0);
  await refused(signer, old, 'signed by the key that k1 named before');
  const fresh = await signer.issueAccessToken(subject(2));
  assert.equal((await signer.verifyAccessToken(fresh)).sub, 'acct_2', 'the new key signs and verifies');
});

test('useKeys: a bad key set is refused with SigningKeyError and the old one stays in use', async () => {
  const key = edKey('k1');
  const { signer } = makeSigner([key]);
  const token = await signer.issueAccessToken(subject(1));
  await signer.verifyAccessToken(token);
  const bad: [string, Parameters<Signer['useKeys']>[0]][] = [
    ['a PEM that is no key', { keys: [{ kid: 'x', alg: 'EdDSA', pem: 'nonsense' }] }],
    ['a key that does not fit its alg', { keys: [{ ...edKey('y'), alg: 'ES256' }] }],
    ['an activeKid that is not there', { keys: [key], activeKid: 'gone' }],
    ['two private keys, no activeKid', { keys: [key, edKey('k2')] }],
  ];
  for (const [label, signing] of bad) assert.throws(() => signer.useKeys(signing), SigningKeyError, label);
  assert.equal(signer.verifiedTokenStats().entries, 1, 'nothing dropped');
  assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1');
  assert.equal((await signer.verifyAccessToken(await signer.issueAccessToken(subject(2)))).sub, 'acct_2', 'still signing with the old key');
});

test('an ephemeral key survives a reload that still configures no keys', async () => {
  const { signer } = makeSigner([]);
  assert.ok(signer.isEphemeral);
  const token = await signer.issueAccessToken(subject(1));
  await signer.verifyAccessToken(token);
  signer.useKeys({ keys: [] });
  assert.equal(await signer.verifyAccessToken(token), await signer.verifyAccessToken(token), 'still cached');
  signer.useKeys({ keys: [edKey('real')] });
  assert.equal(signer.isEphemeral, false);
  await refused(signer, token, 'the ephemeral key is gone');
});

test('a flood of distinct invalid tokens leaves nothing in the cache', async () => {
  const { signer } = makeSigner([edKey('k1')], { verifiedCacheMaxEntries: 100 });
  const good = await signer.issueAccessToken(subject(1));
  await signer.verifyAccessToken(good);
  const [h, p] = good.split('.') as [string, string];
  for (let i = 0; i < 2_000; i++) {
    // Well-formed, canonical, each one different: a forged signature over the real payload.
    const forged = `${h}.${p}.${Buffer.alloc(64, i % 251).fill(i >> 8, 0, 1).toString('base64url')}`;
    await refused(signer, forged, `forgery ${i}`);
  }
  assert.equal(signer.verifiedTokenStats().entries, 1, 'only the one valid token');
  assert.equal(await signer.verifyAccessToken(good), await signer.verifyAccessToken(good), 'and it is still a hit');
});

test('a flood of distinct valid tokens stays under the entry bound and the byte bound', async () => {
  const byEntries = makeSigner([edKey('k1')], { verifiedCacheMaxEntries: 50 }).signer;
  const budget = 65_536;
  const byBytes = makeSigner([edKey('k2')], { verifiedCacheMaxEntries: 100_000, verifiedCacheMaxBytes: budget }).signer;
  let largest = 0;
  for (let i = 0; i < 400; i++) {
    for (const signer of [byEntries, byBytes]) {
      // Long scope claims make big entries, so the byte bound is what binds in byBytes.
      const token = await signer.issueAccessToken({ accountId: `acct_${i}`, keyId: `key_${i}`, scopes: Array.from({ length: i % 40 }, (_, j) => `scope-${j}:read`) });
      largest = Math.max(largest, entryBytes(token));
      assert.equal((await signer.verifyAccessToken(token)).sub, `acct_${i}`);
    }
    assert.ok(byEntries.verifiedTokenStats().entries <= 50, `after ${i + 1}: ${JSON.stringify(byEntries.verifiedTokenStats())}`);
    assert.ok(byBytes.verifiedTokenStats().bytes <= budget, `after ${i + 1}: ${JSON.stringify(byBytes.verifiedTokenStats())}`);
  }
  assert.equal(byEntries.verifiedTokenStats().entries, 50, 'full, not emptied');
  assert.ok(byBytes.verifiedTokenStats().bytes > budget - largest, 'full to within one entry');
});

test('a token refused before its time is not remembered as refused', async () => {
  // iat in the future (another instance's clock ahead): refused now, good once ours catches up.
  const key = edKey('k2');
  const { signer: issuer } = makeSigner([key], {}, undefined, new ManualClock(Date.UTC(2026, 0, 1) + 60_000));
  const { signer, clock: ours } = makeSigner([key]);
  const token = await issuer.issueAccessToken(subject(3));
  await refused(signer, token, 'issued a minute in our future');
  assert.equal(signer.verifiedTokenStats().entries, 0);
  ours.advance(60_000);
  assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_3');
});
