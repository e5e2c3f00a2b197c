/**
 * The contract of KeyUseStore (src/state/key-use/store.ts), run once per implementation: a key's
 * last sign-in read back per account, the later of two times kept whatever order they arrive
 * in, accounts apart. Every test uses accounts of its own.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { KeyUseStore } from '../../src/state/key-use/store.js';

export interface KeyUseStoreUnderTest {
  store: KeyUseStore;
  close(): Promise<void>;
}

function account(): string {
  return `acct_${randomBytes(6).toString('hex')}`;
}

export function runKeyUseContract(name: string, make: () => Promise<KeyUseStoreUnderTest>, options: { skip?: string | false } = {}): void {
  test(`KeyUseStore contract: ${name}`, options, async (t) => {
    const { store, close } = await make();
    t.after(close);
    const at = Date.UTC(2026, 10, 28, 9, 30);

    await t.test('an account whose keys never signed in reads as empty', async () => {
      assert.deepEqual(await store.read(account()), new Map());
    });

    await t.test('each key\'s last sign-in, per account', async () => {
      const [a, b] = [account(), account()];
      await store.record(a, 'key_1', at);
      await store.record(a, 'key_2', at + 1000);
      await store.record(b, 'key_1', at + 2000);
      assert.deepEqual(await store.read(a), new Map([['key_1', at], ['key_2', at + 1000]]));
      assert.deepEqual(await store.read(b), new Map([['key_1', at + 2000]]), 'another account\'s key of the same id is its own');
    });

    await t.test('a later time replaces an earlier one; an earlier one arriving late changes nothing', async () => {
      const a = account();
      await store.record(a, 'key_1', at);
      await store.record(a, 'key_1', at + 60_000);
      await store.record(a, 'key_1', at + 30_000);
      assert.deepEqual(await store.read(a), new Map([['key_1', at + 60_000]]));
    });
  });
}
