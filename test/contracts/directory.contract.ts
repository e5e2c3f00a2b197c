/**
 * The contract of Directory (src/state/directory/store.ts), run once per implementation. Every
 * implementation is built from the same DataFile fixture, so all must answer alike.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dataFileSchema, type DataFile } from '../../src/state/data-file/data-file.js';
import type { Directory } from '../../src/state/directory/store.js';

export const DIRECTORY_FIXTURE: DataFile = dataFileSchema.parse({
  accounts: [
    {
      id: 'acct_a',
      apiKeys: [],
      roles: [3, 1, 2, 5, 4].map((id) => ({ id, slug: `r${id}`, name: id % 2 ? `Odd Role ${id}` : `Even role ${id}`, description: `role ${id}`, public: id === 1 })),
      signRecords: [
        { address: '0x52908400098527886E0F7030069857D2E4169EE7', signedNonce: 42, signedAt: '2026-03-01T12:00:00Z', signedExpiredAt: '2026-03-31T12:00:00+02:00' },
      ],
    },
    { id: 'acct_b', apiKeys: [], roles: [{ id: 9, slug: 'b', name: 'B role', description: '', public: false }], signRecords: [] },
  ],
});

export function runDirectoryContract(name: string, makeDirectory: (data: DataFile) => Promise<{ directory: Directory; close(): Promise<void> }>): void {
  test(`Directory contract: ${name}`, async (t) => {
    const { directory, close } = await makeDirectory(DIRECTORY_FIXTURE);
    t.after(close);

    await t.test('finds a sign record by lowercase address, with times as epoch ms', async () => {
      const record = await directory.findSignRecord('acct_a', '0x52908400098527886e0f7030069857d2e4169ee7');
      assert.deepEqual(record, {
        address: '0x52908400098527886e0f7030069857d2e4169ee7',
        signedNonce: 42,
        signedAt: Date.UTC(2026, 2, 1, 12),
        signedExpiredAt: Date.UTC(2026, 2, 31, 10),
      });
    });

    await t.test('finds nothing for another account, an unknown address or an unknown account', async () => {
      assert.equal(await directory.findSignRecord('acct_b', '0x52908400098527886e0f7030069857d2e4169ee7'), undefined);
      assert.equal(await directory.findSignRecord('acct_a', `0x${'0'.repeat(40)}`), undefined);
      assert.equal(await directory.findSignRecord('acct_none', '0x52908400098527886e0f7030069857d2e4169ee7'), undefined);
    });

    await t.test('lists roles in ascending id order, paged, with the total on every page', async () => {
      const first = await directory.listRoles('acct_a', { offset: 0, limit: 2 });
      assert.deepEqual(first.items.map((r) => r.id), [1, 2]);
      assert.equal(first.total, 5);
      const last = await directory.listRoles('acct_a', { offset: 4, limit: 2 });
      assert.deepEqual(last.items.map((r) => r.id), [5]);
      assert.equal(last.total, 5);
      assert.deepEqual(first.items[0], { id: 1, slug: 'r1', name: 'Odd Role 1', description: 'role 1', public: true });
    });

    await t.test('answers a page past the end with no items', async () => {
      assert.deepEqual(await directory.listRoles('acct_a', { offset: 10, limit: 2 }), { items: [], total: 5 });
    });

    await t.test('filters by a case-insensitive substring of the name, total included', async () => {
      const page = await directory.listRoles('acct_a', { offset: 0, limit: 10, nameContains: 'ROLE 3' });
      assert.deepEqual(page.items.map((r) => r.id), [3]);
      const even = await directory.listRoles('acct_a', { offset: 1, limit: 1, nameContains: 'even' });
      assert.deepEqual(even, { items: [(await directory.listRoles('acct_a', { offset: 3, limit: 1 })).items[0]], total: 2 });
    });

    await t.test('keeps accounts apart', async () => {
      assert.deepEqual((await directory.listRoles('acct_b', { offset: 0, limit: 10 })).items.map((r) => r.id), [9]);
      assert.deepEqual(await directory.listRoles('acct_none', { offset: 0, limit: 10 }), { items: [], total: 0 });
    });
  });
}
