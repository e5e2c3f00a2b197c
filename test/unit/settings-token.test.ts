/**
 * The settings-token format (src/domain/settings-token.ts): what is minted always checks out,
 * and a change of any one character, a cut or an extension never does, so a typo or a
 * made-up token is refused without asking a store.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { BASE62 } from '../../src/domain/random.js';
import {
  isWellFormedSettingsToken, mintSettingsToken, SETTINGS_TOKEN_LENGTH, settingsTokenDigest, settingsTokenStart,
} from '../../src/domain/settings-token.js';

const base62Char = fc.constantFrom(...BASE62.split(''));

test('a minted token: gwst_, 43 base62, 6 base62 of the CRC32 of the 43', () => {
  for (let i = 0; i < 200; i++) {
    const token = mintSettingsToken();
    assert.match(token, /^gwst_[0-9A-Za-z]{49}$/);
    assert.equal(token.length, SETTINGS_TOKEN_LENGTH);
    assert.ok(isWellFormedSettingsToken(token), token);
    const body = token.slice(5, 48);
    const sum = [...token.slice(48)].reduce((n, c) => n * 62 + BASE62.indexOf(c), 0);
    assert.equal(sum, crc32(body), 'the checksum is the CRC32 of the body, in base62');
    assert.equal(settingsTokenStart(token), token.slice(0, 9));
  }
  assert.notEqual(mintSettingsToken(), mintSettingsToken());
});

test('changing any one character after the prefix makes a token fail the check', () => {
  // The family before `st_` is not under the checksum (tokens.prefix, domain/token-prefix.ts): a
  // token of another family is another token, whose digest no store holds.
  fc.assert(fc.property(fc.integer({ min: 4, max: SETTINGS_TOKEN_LENGTH - 1 }), base62Char, (position, replacement) => {
    const token = mintSettingsToken();
    fc.pre(token[position] !== replacement);
    const changed = token.slice(0, position) + replacement + token.slice(position + 1);
    // CRC32 detects every single-character change of the body; a changed mark or checksum fails outright.
    assert.equal(isWellFormedSettingsToken(changed), false, changed);
  }), { numRuns: 2000 });
});

test('a token of any family has the shape; the mark and the family\'s spelling are checked', () => {
  const token = mintSettingsToken('acme');
  assert.match(token, /^acmest_[0-9A-Za-z]{49}$/);
  assert.ok(isWellFormedSettingsToken(token));
  assert.equal(settingsTokenStart(token), token.slice(0, 11));
  for (const bad of [token.replace('acmest_', 'Acmest_'), token.replace('acmest_', 'st_'), token.replace('acmest_', 'acmesk_'), token.replace('acmest_', `${'a'.repeat(17)}st_`)]) {
    assert.equal(isWellFormedSettingsToken(bad), false, bad);
  }
});

test('cut, extended or arbitrary strings fail the check', () => {
  fc.assert(fc.property(fc.integer({ min: 0, max: SETTINGS_TOKEN_LENGTH - 1 }), fc.string({ minLength: 1, maxLength: 8 }), (cut, extra) => {
    const token = mintSettingsToken();
    assert.equal(isWellFormedSettingsToken(token.slice(0, cut)), false);
    assert.equal(isWellFormedSettingsToken(token + extra), false);
  }));
  fc.assert(fc.property(fc.string({ maxLength: 80 }), (text) => {
    assert.equal(isWellFormedSettingsToken(`gwst_${text}`), false);
  }));
  // Right shape, random checksum: one in 62^6 passes by chance, so these never do.
  fc.assert(fc.property(fc.array(base62Char, { minLength: 49, maxLength: 49 }), (chars) => {
    const token = `gwst_${chars.join('')}`;
    const body = token.slice(5, 48);
    let value = crc32(body);
    let sum = '';
    for (let i = 0; i < 6; i++) { sum = BASE62[value % 62] + sum; value = Math.floor(value / 62); }
    assert.equal(isWellFormedSettingsToken(token), token.slice(48) === sum);
  }));
});

test('the digest is sha256: and the hex SHA-256 of the whole token, and differs per token', () => {
  const token = mintSettingsToken();
  assert.match(settingsTokenDigest(token), /^sha256:[0-9a-f]{64}$/);
  assert.equal(settingsTokenDigest(token), settingsTokenDigest(token));
  assert.notEqual(settingsTokenDigest(token), settingsTokenDigest(mintSettingsToken()));
});
