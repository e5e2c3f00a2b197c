/**
 * The contract of DpopProofStore (src/state/dpop-proofs/store.ts), run once per implementation:
 * a proof id is fresh once, a replay within its time is not, it is forgotten after its expiry,
 * and of concurrent uses exactly one is fresh. Every test uses ids of its own.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { DpopProofStore } from '../../src/state/dpop-proofs/store.js';

export interface DpopProofStoreUnderTest {
  store: DpopProofStore;
  close(): Promise<void>;
}

function id(): string {
  return randomBytes(32).toString('base64url');
}

export function runDpopProofContract(name: string, make: () => Promise<DpopProofStoreUnderTest>, options: { skip?: string | false } = {}): void {
  test(`DpopProofStore contract: ${name}`, options, async (t) => {
    const { store, close } = await make();
    t.after(close);
    const now = Date.now();

    await t.test('a proof is fresh once; again within its time it is a replay', async () => {
      const proof = id();
      assert.equal(await store.remember(proof, now + 60_000, now), true);
      assert.equal(await store.remember(proof, now + 60_000, now + 1000), false);
      assert.equal(await store.remember(id(), now + 60_000, now), true, 'another proof is its own');
    });

    await t.test('of 50 concurrent uses of one proof exactly one is fresh', async () => {
      const proof = id();
      const answers = await Promise.all(Array.from({ length: 50 }, () => store.remember(proof, now + 60_000, now)));
      assert.equal(answers.filter(Boolean).length, 1);
    });
  });
}
