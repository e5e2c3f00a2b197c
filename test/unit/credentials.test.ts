import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeSecretHash, verifyApiCredentials } from '../../src/auth/credentials.js';
import { GatewayError } from '../../src/errors/errors.js';
import { hashSecret, SECRET_DIGEST_PATTERN, secretDigest } from '../../src/domain/secrets.js';
import { dataFileSchema } from '../../src/state/data-file/data-file.js';
import { MemoryKeyDirectory } from '../../src/state/keys/memory.js';

/** SHA-256("abc"), FIPS 180-2 test vector. */
const ABC_SHA256_HEX = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
const ABC_BYTES = Buffer.from(ABC_SHA256_HEX, 'hex');
const NOW = Date.UTC(2026, 0, 1);

test('decodeSecretHash', async (t) => {
  await t.test('reads lowercase and uppercase hex', () => {
    assert.deepEqual(decodeSecretHash(ABC_SHA256_HEX), ABC_BYTES);
    assert.deepEqual(decodeSecretHash(ABC_SHA256_HEX.toUpperCase()), ABC_BYTES);
  });

  await t.test('reads base64 with and without padding, and base64url', () => {
    const padded = ABC_BYTES.toString('base64');
    assert.equal(padded.length, 44);
    assert.ok(padded.endsWith('='));
    assert.deepEqual(decodeSecretHash(padded), ABC_BYTES);
    assert.deepEqual(decodeSecretHash(padded.slice(0, -1)), ABC_BYTES);

    // Pick bytes whose base64 needs "+" and "/", so the base64url form really differs.
    const bytes = Buffer.alloc(32, 0xfb);
    const base64 = bytes.toString('base64');
    const base64url = bytes.toString('base64url');
    assert.match(base64, /[+/]/);
    assert.match(base64url, /[-_]/);
    assert.deepEqual(decodeSecretHash(base64), bytes);
    assert.deepEqual(decodeSecretHash(base64url), bytes);
    assert.deepEqual(decodeSecretHash(`${base64url}=`), bytes);
  });

  await t.test('refuses anything that is not 32 bytes in a known encoding', () => {
    const cases = [
      '',
      ABC_SHA256_HEX.slice(0, 63),
      `${ABC_SHA256_HEX}0`,
      `g${ABC_SHA256_HEX.slice(1)}`,
      'zz'.repeat(32),
      ` ${ABC_SHA256_HEX}`,
      `${ABC_SHA256_HEX}\n`,
      Buffer.alloc(31, 1).toString('base64'),
      Buffer.alloc(33, 1).toString('base64'),
      Buffer.alloc(31, 1).toString('base64url'),
      Buffer.alloc(33, 1).toString('base64url'),
      `${ABC_BYTES.toString('base64').slice(0, -1)}==`,
      // "+" and "_" together: neither alphabet.
      `+_${ABC_BYTES.toString('base64url').slice(2)}`,
      'sk_demo_alice_secret',
    ];
    for (const value of cases) assert.equal(decodeSecretHash(value), undefined, JSON.stringify(value));
  });
});

test('hashSecret is SHA-256 of the UTF-8 secret', () => {
  assert.deepEqual(hashSecret('abc'), ABC_BYTES);
  assert.equal(hashSecret('sk_é').length, 32);
  assert.notDeepEqual(hashSecret('sk_é'), hashSecret('sk_e'));
});

test('secretDigest is "sha256:" and 64 lowercase hex digits of SHA-256 over the 32 bytes', () => {
  const digest = secretDigest(ABC_BYTES);
  assert.match(digest, /^sha256:[0-9a-f]{64}$/);
  assert.match(digest, SECRET_DIGEST_PATTERN);
  // SHA-256(SHA-256("abc")).
  assert.equal(digest, 'sha256:4f8b42c22dd3729b519ba6f68d2da7cc5b2d606d05daed5ad5128cc03e6c6358');
  // The demo data file was made the same way.
  assert.equal(secretDigest(hashSecret('sk_demo_alice_secret')), 'sha256:00ef6cc9a2169ba7d55b5f641321f4aacb1205fc34d05f4c1312263a4a4112bd');
});

test('verifyApiCredentials', async (t) => {
  const keys = new MemoryKeyDirectory(dataFileSchema.parse({
    accounts: [
      {
        id: 'acct_one',
        apiKeys: [
          { id: 'key_one', apiKey: 'ak_test_one', secretDigest: secretDigest(hashSecret('secret-one')) },
          { id: 'key_off', apiKey: 'ak_test_off', secretDigest: secretDigest(hashSecret('secret-off')), disabled: true },
        ],
      },
      {
        id: 'acct_two',
        apiKeys: [{ id: 'key_two', apiKey: 'ak_test_two', secretDigest: secretDigest(hashSecret('secret-two')) }],
      },
    ],
  }));

  await t.test('returns the record for a matching key and secret, in every encoding', async () => {
    const hash = hashSecret('secret-one');
    for (const apiSecret of [hash.toString('hex'), hash.toString('hex').toUpperCase(), hash.toString('base64'), hash.toString('base64url')]) {
      const record = await verifyApiCredentials(keys, 'ak_test_one', apiSecret, NOW);
      assert.deepEqual(record, { keyId: 'key_one', accountId: 'acct_one', secretDigest: secretDigest(hash), disabled: false, scopes: [] }, apiSecret);
    }
  });

  await t.test('returns undefined for a wrong secret', async () => {
    assert.equal(await verifyApiCredentials(keys, 'ak_test_one', hashSecret('secret-two').toString('hex'), NOW), undefined);
  });

  await t.test('returns undefined for an unknown key', async () => {
    assert.equal(await verifyApiCredentials(keys, 'ak_nobody', hashSecret('secret-one').toString('hex'), NOW), undefined);
  });

  await t.test('returns undefined for a disabled key with its right secret', async () => {
    assert.equal(await verifyApiCredentials(keys, 'ak_test_off', hashSecret('secret-off').toString('hex'), NOW), undefined);
  });

  await t.test('refuses the plain secret (not a hash) with a 400 GatewayError', async () => {
    for (const apiSecret of ['secret-one', '', hashSecret('secret-one').toString('hex').slice(1)]) {
      await assert.rejects(verifyApiCredentials(keys, 'ak_test_one', apiSecret, NOW), (err: unknown) => {
        assert.ok(err instanceof GatewayError);
        assert.equal(err.status, 400);
        assert.equal(err.code, 'invalid_request');
        return true;
      });
    }
  });

  await t.test('refuses a malformed secret with 400 even for an unknown key', async () => {
    await assert.rejects(verifyApiCredentials(keys, 'ak_nobody', 'nope', NOW), (err: unknown) => err instanceof GatewayError && err.status === 400);
  });

  await t.test('a rolled key: the new secret, and the replaced one until previousValidUntil, not after', async () => {
    const until = Date.UTC(2026, 5, 1);
    const rolled = new MemoryKeyDirectory(dataFileSchema.parse({
      accounts: [{
        id: 'acct_roll',
        apiKeys: [{
          id: 'key_roll', apiKey: 'ak_test_roll', secretDigest: secretDigest(hashSecret('secret-new')),
          previousSecretDigest: secretDigest(hashSecret('secret-old')), previousValidUntil: new Date(until).toISOString(),
        }],
      }],
    }));
    const send = (secret: string) => hashSecret(secret).toString('hex');
    assert.equal((await verifyApiCredentials(rolled, 'ak_test_roll', send('secret-new'), until - 1))?.keyId, 'key_roll');
    assert.equal((await verifyApiCredentials(rolled, 'ak_test_roll', send('secret-old'), until - 1))?.keyId, 'key_roll', 'the old secret during the overlap');
    assert.equal(await verifyApiCredentials(rolled, 'ak_test_roll', send('secret-old'), until), undefined, 'the old secret once the overlap is over');
    assert.equal((await verifyApiCredentials(rolled, 'ak_test_roll', send('secret-new'), until + 1))?.keyId, 'key_roll', 'the new secret after it');
    assert.equal(await verifyApiCredentials(rolled, 'ak_test_roll', send('secret-other'), until - 1), undefined);
  });
});
