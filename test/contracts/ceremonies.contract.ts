/**
 * The contract of CeremonyStore (src/state/ceremonies/store.ts), run once per implementation:
 * a ceremony is taken once, by one of concurrent takers, and not after its end.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { CeremonyStore } from '../../src/state/ceremonies/store.js';

export interface CeremonyStoreUnderTest {
  ceremonies: CeremonyStore;
  /** The time the store reads (epoch ms). */
  now(): number;
  /** Lets `ms` of time pass for the store (memory: the clock; Redis: a real wait). */
  elapse(ms: number): Promise<void>;
  close(): Promise<void>;
}

const id = (): string => randomBytes(16).toString('hex');

export function runCeremonyStoreContract(name: string, make: () => Promise<CeremonyStoreUnderTest>, options: { skip?: string | false } = {}): void {
  test(`CeremonyStore contract: ${name}`, options, async (t) => {
    const { ceremonies, now, elapse, close } = await make();
    t.after(close);

    await t.test('a ceremony is taken as it was put, once', async () => {
      const key = id();
      const ceremony = { kind: 'registration' as const, challenge: 'Y2hhbGxlbmdl', ownerId: 'own_ann', expiresAt: now() + 60_000 };
      await ceremonies.put(key, ceremony);
      assert.deepEqual(await ceremonies.take(key), ceremony);
      assert.equal(await ceremonies.take(key), undefined);
      const signIn = { kind: 'authentication' as const, challenge: 'b3RoZXI', expiresAt: now() + 60_000 };
      const other = id();
      await ceremonies.put(other, signIn);
      assert.deepEqual(await ceremonies.take(other), signIn, 'no ownerId comes back for a sign-in');
    });

    await t.test('unknown ids, and ceremonies put already ended, are undefined', async () => {
      assert.equal(await ceremonies.take(id()), undefined);
      const key = id();
      await ceremonies.put(key, { kind: 'authentication', challenge: 'x', expiresAt: now() - 1 });
      assert.equal(await ceremonies.take(key), undefined);
    });

    await t.test('of concurrent takers, exactly one gets the ceremony', async () => {
      const key = id();
      await ceremonies.put(key, { kind: 'authentication', challenge: 'c', expiresAt: now() + 60_000 });
      const taken = await Promise.all(Array.from({ length: 8 }, () => ceremonies.take(key)));
      assert.equal(taken.filter((c) => c !== undefined).length, 1);
    });

    await t.test('a ceremony past its end is gone', async () => {
      const key = id();
      await ceremonies.put(key, { kind: 'authentication', challenge: 'c', expiresAt: now() + 300 });
      await elapse(400);
      assert.equal(await ceremonies.take(key), undefined);
    });
  });
}
