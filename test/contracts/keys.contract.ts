/** The contract of KeyDirectory (src/state/keys/store.ts), run once per implementation. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dataFileSchema, type DataFile } from '../../src/state/data-file/data-file.js';
import type { KeyDirectory } from '../../src/state/keys/store.js';

const DIGEST = `sha256:${'ab'.repeat(32)}`;
const CERTIFICATE = '0f'.repeat(32);

export const KEY_FIXTURE: DataFile = dataFileSchema.parse({
  accounts: [
    {
      id: 'acct_a',
      apiKeys: [
        { id: 'key_1', apiKey: 'ak_first_key', secretDigest: DIGEST, disabled: false, scopes: ['orders:read', 'orders:write'] },
        { id: 'key_2', apiKey: 'ak_second_key', secretDigest: DIGEST, disabled: true, scopes: [] },
        { id: 'key_3', apiKey: 'ak_bound_key', secretDigest: DIGEST, disabled: false, scopes: [], certificateSha256: CERTIFICATE },
        { id: 'key_4', apiKey: 'ak_dpop_key', secretDigest: DIGEST, disabled: false, scopes: [], requireDpop: true },
      ],
      roles: [],
      signRecords: [],
    },
  ],
});

export function runKeyDirectoryContract(name: string, makeKeys: (data: DataFile) => Promise<{ keys: KeyDirectory; close(): Promise<void> }>): void {
  test(`KeyDirectory contract: ${name}`, async (t) => {
    const { keys, close } = await makeKeys(KEY_FIXTURE);
    t.after(close);

    await t.test('finds a key by its apiKey and by its id', async () => {
      const expected = { keyId: 'key_1', accountId: 'acct_a', secretDigest: DIGEST, disabled: false, scopes: ['orders:read', 'orders:write'] };
      assert.deepEqual(await keys.findByApiKey('ak_first_key'), expected);
      assert.deepEqual(await keys.findByKeyId('key_1'), expected);
    });

    await t.test('keeps a key\'s client-certificate binding (a key that lost it would sign in without the certificate)', async () => {
      const expected = { keyId: 'key_3', accountId: 'acct_a', secretDigest: DIGEST, disabled: false, scopes: [], certificateSha256: CERTIFICATE };
      assert.deepEqual(await keys.findByApiKey('ak_bound_key'), expected);
      assert.deepEqual(await keys.findByKeyId('key_3'), expected);
      assert.equal((await keys.findByKeyId('key_1'))?.certificateSha256, undefined);
    });

    await t.test('keeps a key\'s DPoP requirement (a key that lost it would sign in without a proof)', async () => {
      const expected = { keyId: 'key_4', accountId: 'acct_a', secretDigest: DIGEST, disabled: false, scopes: [], requireDpop: true };
      assert.deepEqual(await keys.findByApiKey('ak_dpop_key'), expected);
      assert.deepEqual(await keys.findByKeyId('key_4'), expected);
      assert.equal((await keys.findByKeyId('key_1'))?.requireDpop, undefined);
    });

    await t.test('reports a disabled key as disabled', async () => {
      assert.equal((await keys.findByApiKey('ak_second_key'))?.disabled, true);
      assert.deepEqual((await keys.findByApiKey('ak_second_key'))?.scopes, []);
    });

    await t.test('finds nothing for unknown values, ids passed as keys, or near misses', async () => {
      for (const apiKey of ['ak_nope', 'key_1', 'AK_FIRST_KEY', 'ak_first_key ', '', '__proto__', 'constructor']) {
        assert.equal(await keys.findByApiKey(apiKey), undefined, apiKey);
      }
      for (const keyId of ['key_9', 'ak_first_key', '__proto__']) assert.equal(await keys.findByKeyId(keyId), undefined, keyId);
    });
  });
}
