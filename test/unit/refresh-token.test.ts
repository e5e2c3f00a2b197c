import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import fc from 'fast-check';
import { hashRefreshSecret, mintRefreshToken, parseRefreshToken, sealPair, unsealPair } from '../../src/auth/refresh.js';

const SECRET = 'A'.repeat(43);

/** A token with the given handle value (JSON, then base64url) and secret. */
function tokenWith(handle: unknown, secret = SECRET): string {
  return `${Buffer.from(JSON.stringify(handle)).toString('base64url')}.${secret}`;
}

test('mintRefreshToken and parseRefreshToken', async (t) => {
  await t.test('round trip: the parts come back as minted', () => {
    for (const [accountId, keyId] of [
      ['acct_alice', 'key_alice_1'],
      ['acct.with.dots', 'key.1'],
      ['a:b@c', 'k-1_x'],
      ['.', '..'],
    ] as const) {
      const minted = mintRefreshToken(accountId, keyId, 'fam_1');
      assert.equal(minted.accountId, accountId);
      assert.equal(minted.keyId, keyId);
      assert.equal(minted.familyId, 'fam_1');
      assert.equal(minted.token.split('.').length, 2, minted.token);
      assert.deepEqual(parseRefreshToken(minted.token), { accountId, keyId, familyId: 'fam_1', tokenId: minted.tokenId, secret: minted.secret });
    }
  });

  await t.test('round trip for arbitrary ids of the data file alphabet (property)', () => {
    const id = fc.stringMatching(/^[A-Za-z0-9._:@-]{1,40}$/);
    fc.assert(fc.property(id, id, id, (accountId, keyId, familyId) => {
      const minted = mintRefreshToken(accountId, keyId, familyId);
      assert.deepEqual(parseRefreshToken(minted.token), { accountId, keyId, familyId, tokenId: minted.tokenId, secret: minted.secret });
    }), { numRuns: 300 });
  });

  await t.test('a token minted for ids at the data file limit (128 characters) parses back', () => {
    // state/data-file/data-file.ts allows account and key ids of up to 128 plain characters.
    const id = 'a:b@c.d-e_'.repeat(13).slice(0, 128);
    const minted = mintRefreshToken(id, id, id);
    assert.deepEqual(parseRefreshToken(minted.token), { accountId: id, keyId: id, familyId: id, tokenId: minted.tokenId, secret: minted.secret });
  });

  await t.test('the secret is 256 random bits in 43 base64url characters, hashed with SHA-256', () => {
    const a = mintRefreshToken('acct', 'key', 'fam');
    const b = mintRefreshToken('acct', 'key', 'fam');
    for (const minted of [a, b]) {
      assert.match(minted.secret, /^[A-Za-z0-9_-]{43}$/);
      const bytes = Buffer.from(minted.secret, 'base64url');
      assert.equal(bytes.length, 32);
      assert.equal(bytes.toString('base64url'), minted.secret);
      assert.ok(minted.token.endsWith(`.${minted.secret}`));
      assert.equal(minted.secretHash, createHash('sha256').update(minted.secret).digest('hex'));
      assert.equal(hashRefreshSecret(minted.secret), minted.secretHash);
    }
    assert.notEqual(a.secret, b.secret);
    assert.notEqual(a.tokenId, b.tokenId);
    assert.notEqual(a.token, b.token);
    assert.notEqual(a.secretHash, b.secretHash);
  });

  await t.test('ids and secrets drawn in blocks never repeat, across many blocks', () => {
    // Each token takes 48 random bytes of a 4 KiB block: 2,000 tokens span about 24 blocks.
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const { tokenId, secret } = mintRefreshToken('acct', 'key', 'fam');
      assert.equal(Buffer.from(tokenId, 'base64url').length, 16);
      for (const value of [tokenId, secret]) {
        assert.ok(!seen.has(value), `drawn twice: ${value}`);
        seen.add(value);
      }
    }
    // Not stuck on a value either (as an unfilled block of zeros would be).
    assert.ok(![...seen].some((v) => /^A+$/.test(v)));
  });

  await t.test('parse refuses malformed tokens', () => {
    const good = tokenWith(['acct', 'key', 'fam', 'tid']);
    assert.deepEqual(parseRefreshToken(good), { accountId: 'acct', keyId: 'key', familyId: 'fam', tokenId: 'tid', secret: SECRET });
    const handle = good.split('.')[0]!;

    const cases: [string, string][] = [
      ['empty', ''],
      ['no dot', `${handle}${SECRET}`],
      ['two dots', `${handle}.${SECRET}.${SECRET}`],
      ['two dots in the handle', `${handle}.x.${SECRET}`],
      ['empty handle', `.${SECRET}`],
      ['empty secret', `${handle}.`],
      ['42-character secret', `${handle}.${SECRET.slice(1)}`],
      ['44-character secret', `${handle}.${SECRET}A`],
      ['secret with "+"', `${handle}.${SECRET.slice(1)}+`],
      ['secret with "/"', `${handle}.${SECRET.slice(1)}/`],
      ['secret with "="', `${handle}.${SECRET.slice(1)}=`],
      ['handle not JSON', `${Buffer.from('not json').toString('base64url')}.${SECRET}`],
      ['handle a JSON object', tokenWith({ accountId: 'acct', keyId: 'key', tokenId: 'tid' })],
      ['handle a JSON string', tokenWith('acct')],
      ['handle null', tokenWith(null)],
      ['handle of three (the first format)', tokenWith(['acct', 'key', 'tid'])],
      ['handle of six', tokenWith(['acct', 'key', 'fam', 'tid', 'x', 'y'])],
      // The fifth element is a narrowed grant (the token endpoint's scope): scope tokens, sorted, once each.
      ['grant a number', tokenWith(['acct', 'key', 'fam', 'tid', 1])],
      ['grant an array', tokenWith(['acct', 'key', 'fam', 'tid', ['a']])],
      ['grant empty', tokenWith(['acct', 'key', 'fam', 'tid', ''])],
      ['grant with two spaces', tokenWith(['acct', 'key', 'fam', 'tid', 'a  b'])],
      ['grant with a quote', tokenWith(['acct', 'key', 'fam', 'tid', 'a"b'])],
      ['grant unsorted', tokenWith(['acct', 'key', 'fam', 'tid', 'b a'])],
      ['grant repeated', tokenWith(['acct', 'key', 'fam', 'tid', 'a a'])],
      ['grant over 512 characters', tokenWith(['acct', 'key', 'fam', 'tid', 'a'.repeat(513)])],
      ['handle with a number', tokenWith(['acct', 1, 'fam', 'tid'])],
      ['handle with null', tokenWith(['acct', 'key', 'fam', null])],
      ['handle with a nested array', tokenWith([['acct'], 'key', 'fam', 'tid'])],
      ['handle with an empty account', tokenWith(['', 'key', 'fam', 'tid'])],
      ['handle with an empty key', tokenWith(['acct', '', 'fam', 'tid'])],
      ['handle with an empty family', tokenWith(['acct', 'key', '', 'tid'])],
      ['handle with an empty token id', tokenWith(['acct', 'key', 'fam', ''])],
      // Ids become parts of store key names: braces would move a Redis Cluster hash tag.
      ['account with braces', tokenWith(['}acct{', 'key', 'fam', 'tid'])],
      ['account with a space', tokenWith(['acct x', 'key', 'fam', 'tid'])],
      ['key with a colon and star', tokenWith(['acct', 'key*', 'fam', 'tid'])],
      ['family with a newline', tokenWith(['acct', 'key', 'fam\n', 'tid'])],
      ['non-ASCII account', tokenWith(['アカウント', 'key', 'fam', 'tid'])],
      ['id of 129 characters', tokenWith(['a'.repeat(129), 'key', 'fam', 'tid'])],
    ];
    for (const [name, token] of cases) assert.equal(parseRefreshToken(token), undefined, name);
  });

  await t.test('a narrowed grant round-trips as the fifth element', () => {
    const minted = mintRefreshToken('acct', 'key', 'fam', ['orders:read', 'reports']);
    assert.deepEqual(parseRefreshToken(minted.token), { accountId: 'acct', keyId: 'key', familyId: 'fam', tokenId: minted.tokenId, secret: minted.secret, scopes: ['orders:read', 'reports'] });
    assert.equal(mintRefreshToken('acct', 'key', 'fam').scopes, undefined, 'a family not narrowed names no grant');
  });

  await t.test('parse refuses tokens longer than 2048 characters, and ids longer than 128', () => {
    const grant = ['e', 'f', 'g', 'h'].map((c) => c.repeat(127)).join(' ');
    assert.equal(grant.length, 511);
    const longest = tokenWith(['a'.repeat(128), 'b'.repeat(128), 'c'.repeat(128), 'd'.repeat(128), grant]);
    assert.ok(longest.length < 2048, 'a token of four ids and a grant at their limits fits');
    assert.equal(parseRefreshToken(longest)?.tokenId, 'd'.repeat(128));
    assert.equal(parseRefreshToken(`${'a'.repeat(100_000)}.${SECRET}`), undefined);
    assert.equal(parseRefreshToken(`${'a'.repeat(2005)}.${SECRET}`), undefined);
  });
});

test('sealPair and unsealPair', async (t) => {
  const pair = { accessToken: 'eyJhbGciOiJFZERTQSJ9.e30.sig', refreshToken: 'aGFuZGxl.secret-ü' };
  const secret = mintRefreshToken('acct', 'key', 'fam').secret;

  await t.test('round trip with the same secret', () => {
    const sealed = sealPair(pair, secret);
    assert.match(sealed, /^[A-Za-z0-9_-]+$/);
    assert.ok(!sealed.includes(pair.accessToken));
    assert.deepEqual(unsealPair(sealed, secret), pair);
  });

  await t.test('two seals of the same pair differ (fresh IV)', () => {
    assert.notEqual(sealPair(pair, secret), sealPair(pair, secret));
  });

  await t.test('a different secret opens nothing', () => {
    const sealed = sealPair(pair, secret);
    assert.equal(unsealPair(sealed, mintRefreshToken('acct', 'key', 'fam').secret), undefined);
    assert.equal(unsealPair(sealed, ''), undefined);
  });

  await t.test('a changed byte anywhere opens nothing', () => {
    const bytes = Buffer.from(sealPair(pair, secret), 'base64url');
    // IV (0-11), tag (12-27), ciphertext (28-).
    for (const at of [0, 11, 12, 27, 28, bytes.length - 1]) {
      const tampered = Buffer.from(bytes);
      tampered[at]! ^= 0x01;
      assert.equal(unsealPair(tampered.toString('base64url'), secret), undefined, `byte ${at}`);
    }
    assert.equal(unsealPair(bytes.subarray(0, bytes.length - 1).toString('base64url'), secret), undefined, 'truncated');
    assert.equal(unsealPair('', secret), undefined, 'empty');
    assert.equal(unsealPair('not base64url at all!', secret), undefined, 'garbage');
  });
});
