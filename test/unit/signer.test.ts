/**
 * The access-token check of src/auth/signer.ts with one configured key, where the header is
 * not decoded before the signature is checked: the kid is still required to be that key's.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { SignJWT } from 'jose';
import { createSigner } from '../../src/auth/signer.js';
import { loadConfig } from '../../src/config/load.js';
import { InvalidToken } from '../../src/errors/errors.js';
import { systemClock } from '../../src/util/clock.js';

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
