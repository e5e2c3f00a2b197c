/**
 * The access-token check of src/auth/signer.ts with one configured key, where the header is
 * not decoded before the signature is checked: the kid is still required to be that key's;
 * and, for every algorithm, that a token has one accepted spelling of its signature.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { createLocalJWKSet, jwtVerify, SignJWT } from 'jose';
import { createSigner, type Signer } from '../../src/auth/signer.js';
import { loadConfig } from '../../src/config/load.js';
import { SIGNING_ALGORITHMS, type SigningKeyConfig } from '../../src/config/schema.js';
import { InvalidToken } from '../../src/errors/errors.js';
import { systemClock } from '../../src/util/clock.js';
import { ED25519_ORDER, hasLowS, signatureOf, toBigInt, toBytes, withFlippedS, withSignature } from '../helpers/jws.js';

test('with one configured key, a token of that key verifies only under its own kid', async () => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const config = loadConfig({ env: { SIGNING_KEYS: JSON.stringify([{ kid: 'only-1', alg: 'EdDSA', pem }]) }, cwd: process.cwd() });
  const signer = createSigner(config, systemClock);
  const now = Math.floor(Date.now() / 1000);
  const mint = (header: { kid?: string }) => new SignJWT({ client_id: 'key_1', iat_ms: now * 1000 })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', ...header })
    .setIssuer(config.tokens.issuer).setAudience(config.tokens.audience).setSubject('acct_1')
    .setJti(randomBytes(16).toString('base64url')).setIssuedAt(now).setExpirationTime(now + 60)
    .sign(privateKey);

  const issued = await signer.issueAccessToken({ accountId: 'acct_1', keyId: 'key_1' });
  assert.equal((await signer.verifyAccessToken(issued)).sub, 'acct_1', 'the gateway\'s own token');
  assert.equal((await signer.verifyAccessToken(await mint({ kid: 'only-1' }))).client_id, 'key_1', 'signed here under the right kid');
  for (const [what, header] of [['another kid', { kid: 'other' }], ['no kid', {}]] as const) {
    await assert.rejects(signer.verifyAccessToken(await mint(header)), InvalidToken, `the right key, ${what}`);
  }
});

test('the reset epoch a token is issued under is its reset_epoch claim; one that is not an integer is refused', async () => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const config = loadConfig({ env: { SIGNING_KEYS: JSON.stringify([{ kid: 'epoch-1', alg: 'EdDSA', pem }]) }, cwd: process.cwd() });
  const signer = createSigner(config, systemClock);
  const epoch = Date.UTC(2026, 0, 1);
  assert.equal((await signer.verifyAccessToken(await signer.issueAccessToken({ accountId: 'acct_1', keyId: 'key_1', epoch }))).reset_epoch, epoch);
  assert.equal((await signer.verifyAccessToken(await signer.issueAccessToken({ accountId: 'acct_1', keyId: 'key_1' }))).reset_epoch, undefined, 'none known: none carried');
  const now = Math.floor(Date.now() / 1000);
  const forged = await new SignJWT({ client_id: 'key_1', iat_ms: now * 1000, reset_epoch: '1' })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: 'epoch-1' })
    .setIssuer(config.tokens.issuer).setAudience(config.tokens.audience).setSubject('acct_1')
    .setJti(randomBytes(16).toString('base64url')).setIssuedAt(now).setExpirationTime(now + 60)
    .sign(privateKey);
  await assert.rejects(signer.verifyAccessToken(forged), InvalidToken);
});

test('a binding is the cnf claim: {"x5t#S256"} (a certificate), {"jkt"} (a DPoP key), or both, of 43 base64url characters; any other cnf is refused', async () => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const config = loadConfig({ env: { SIGNING_KEYS: JSON.stringify([{ kid: 'cnf-1', alg: 'EdDSA', pem }]) }, cwd: process.cwd() });
  const signer = createSigner(config, systemClock);
  const thumbprint = randomBytes(32).toString('base64url');
  const bound = await signer.verifyAccessToken(await signer.issueAccessToken({ accountId: 'acct_1', keyId: 'key_1', certificateThumbprint: thumbprint }));
  assert.deepEqual(bound.cnf, { 'x5t#S256': thumbprint });
  assert.equal((await signer.verifyAccessToken(await signer.issueAccessToken({ accountId: 'acct_1', keyId: 'key_1' }))).cnf, undefined, 'unbound: no cnf');
  const now = Math.floor(Date.now() / 1000);
  const mint = (cnf: unknown) => new SignJWT({ client_id: 'key_1', iat_ms: now * 1000, cnf })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: 'cnf-1' })
    .setIssuer(config.tokens.issuer).setAudience(config.tokens.audience).setSubject('acct_1')
    .setJti(randomBytes(16).toString('base64url')).setIssuedAt(now).setExpirationTime(now + 60)
    .sign(privateKey);
  assert.deepEqual((await signer.verifyAccessToken(await mint({ 'x5t#S256': thumbprint }))).cnf, { 'x5t#S256': thumbprint });
  assert.deepEqual((await signer.verifyAccessToken(await mint({ jkt: thumbprint }))).cnf, { jkt: thumbprint });
  assert.deepEqual((await signer.verifyAccessToken(await mint({ 'x5t#S256': thumbprint, jkt: thumbprint }))).cnf, { 'x5t#S256': thumbprint, jkt: thumbprint });
  const dpopBound = await signer.verifyAccessToken(await signer.issueAccessToken({ accountId: 'acct_1', keyId: 'key_1', dpopThumbprint: thumbprint }));
  assert.deepEqual(dpopBound.cnf, { jkt: thumbprint });
  const refused: unknown[] = [null, 'x', [], {}, { 'x5t#S256': thumbprint.slice(1) }, { 'x5t#S256': `${thumbprint}=` }, { 'x5t#S256': thumbprint, other: thumbprint },
    { jkt: thumbprint.slice(1) }, { jkt: 42 }, { 'x5t#S256': 42 }];
  for (const cnf of refused) await assert.rejects(signer.verifyAccessToken(await mint(cnf)), InvalidToken, JSON.stringify(cnf));
});

/** A signer whose one configured key is a fresh key of `alg`. */
function signerWithKey(alg: SigningKeyConfig['alg']) {
  const { privateKey } = alg === 'EdDSA' ? generateKeyPairSync('ed25519')
    : alg === 'ES256' || alg === 'ES384' ? generateKeyPairSync('ec', { namedCurve: alg === 'ES256' ? 'prime256v1' : 'secp384r1' })
      : generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const config = loadConfig({ env: { SIGNING_KEYS: JSON.stringify([{ kid: `${alg}-1`, alg, pem }]) }, cwd: process.cwd() });
  const signer = createSigner(config, systemClock);
  return { signer, issue: () => signer.issueAccessToken({ accountId: 'acct_1', keyId: 'key_1' }) };
}

async function assertRefused(signer: Signer, token: string, label: string): Promise<void> {
  await assert.rejects(signer.verifyAccessToken(token), InvalidToken, label);
}

test('every algorithm: a signature with a byte added in front or behind is refused', async () => {
  for (const alg of SIGNING_ALGORITHMS) {
    const { signer, issue } = signerWithKey(alg);
    const token = await issue();
    assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1', `${alg}: the control`);
    const signature = signatureOf(token);
    await assertRefused(signer, withSignature(token, Buffer.concat([Buffer.from([0]), signature])), `${alg}: a zero byte in front`);
    await assertRefused(signer, withSignature(token, Buffer.concat([signature, Buffer.from([0])])), `${alg}: a zero byte behind`);
  }
});

test('ES256 and ES384: tokens are signed with low S, and the high-S twin of each is refused', async () => {
  // ECDSA verifies (r, s) and (r, n − s) alike; the gateway signs with the low one only and
  // refuses the other, over many tokens since a signer's S is high half of the time.
  for (const alg of ['ES256', 'ES384'] as const) {
    const { signer, issue } = signerWithKey(alg);
    // What a backend does with the JWKS, with a standard library: low S is an ordinary signature.
    const jwks = createLocalJWKSet(signer.jwks);
    for (let i = 0; i < 64; i++) {
      const token = await issue();
      assert.ok(hasLowS(token, alg), `${alg} token ${i} is signed with a high S`);
      assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1', `${alg} token ${i}`);
      assert.equal((await jwtVerify(token, jwks)).payload.sub, 'acct_1', `${alg} token ${i}, verified by jose`);
      await assertRefused(signer, withFlippedS(token, alg), `${alg} token ${i} with S replaced by n − S`);
    }
    for (let i = 0; i < 16; i++) {
      const assertion = await signer.issueAssertion({ accountId: 'acct_1', keyId: 'key_1', tokenId: 'jti_1', scopes: [], audience: 'orders', requestId: 'req_1' });
      assert.ok(hasLowS(assertion, alg), `${alg} assertion ${i} is signed with a high S`);
      assert.equal((await jwtVerify(assertion, jwks, { audience: 'orders' })).payload.sub, 'acct_1', `${alg} assertion ${i}, verified by jose`);
    }
  }
});

test('RS256 and PS256: the signature is the modulus-length integer below the modulus, nothing else', async () => {
  for (const alg of ['RS256', 'PS256'] as const) {
    const { signer, issue } = signerWithKey(alg);
    const jwk = signer.jwks.keys[0]!;
    const modulus = toBigInt(Buffer.from(jwk.n!, 'base64url'));
    const length = Buffer.from(jwk.n!, 'base64url').length;
    const token = await issue();
    const s = toBigInt(signatureOf(token));
    assert.equal(signatureOf(token).length, length, `${alg}: RFC 7518 §3.3: as long as the modulus`);
    await assertRefused(signer, withSignature(token, toBytes(s + modulus, length)), `${alg}: s + n`);
    // One signature in 128 to 256 starts with a zero byte; without it, it is the same integer.
    let stripped: string | undefined;
    for (let i = 0; i < 20_000 && stripped === undefined; i++) {
      const candidate = await issue();
      const signature = signatureOf(candidate);
      if (signature[0] === 0) {
        assert.equal((await signer.verifyAccessToken(candidate)).sub, 'acct_1', `${alg}: the control`);
        stripped = withSignature(candidate, signature.subarray(1));
      }
    }
    assert.ok(stripped !== undefined, `${alg}: no signature with a leading zero byte found`);
    await assertRefused(signer, stripped, `${alg}: the leading zero byte left out`);
  }
});

test('EdDSA: a signature whose S is not reduced below the group order is refused', async () => {
  // RFC 8032 §5.1.7: S ≥ L must be rejected; S + L would otherwise verify as S does.
  const { signer, issue } = signerWithKey('EdDSA');
  for (let i = 0; i < 16; i++) {
    const token = await issue();
    const signature = signatureOf(token);
    const s = toBigInt(Buffer.from(signature.subarray(32)).reverse());
    const unreduced = Buffer.from(toBytes(s + ED25519_ORDER, 32)).reverse();
    assert.equal(unreduced.length, 32, 'S + L still fits in 32 bytes');
    assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1', `token ${i}: the control`);
    await assertRefused(signer, withSignature(token, Buffer.concat([signature.subarray(0, 32), unreduced])), `token ${i}: S + L`);
  }
});

test('every algorithm: what the gateway signs verifies with jose against the JWKS, header as jose wrote it', async () => {
  // Signing moved from jose's SignJWT to node:crypto; backends still verify with standard libraries.
  for (const alg of SIGNING_ALGORITHMS) {
    const { signer, issue } = signerWithKey(alg);
    const jwks = createLocalJWKSet(signer.jwks);
    for (let i = 0; i < 4; i++) {
      const token = await issue();
      const { payload, protectedHeader } = await jwtVerify(token, jwks, { typ: 'at+jwt', algorithms: [alg] });
      assert.deepEqual(protectedHeader, { alg, kid: `${alg}-1`, typ: 'at+jwt' }, `${alg}: the header`);
      assert.equal(Buffer.from(token.split('.')[0]!, 'base64url').toString(), JSON.stringify({ alg, kid: `${alg}-1`, typ: 'at+jwt' }), `${alg}: the header's bytes`);
      assert.deepEqual(Object.keys(payload), ['client_id', 'iat_ms', 'iss', 'aud', 'sub', 'jti', 'iat', 'exp'], `${alg}: the claims`);
      assert.equal((await signer.verifyAccessToken(token)).sub, 'acct_1', `${alg}: verified by the gateway`);
      const assertion = await signer.issueAssertion({ accountId: 'acct_1', keyId: 'key_1', tokenId: 'jti_1', scopes: ['a', 'b'], audience: 'orders', requestId: 'req_1' });
      const verified = await jwtVerify(assertion, jwks, { typ: 'gateway-assertion+jwt', audience: 'orders', algorithms: [alg] });
      assert.equal(verified.payload.scope, 'a b', `${alg}: the assertion`);
    }
  }
});
