/**
 * The contract of RefreshTokenStore (src/state/tokens/store.ts), run once per implementation.
 * Time is passed in explicitly (`now`), so no test sleeps.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { RevocationStore } from '../../src/state/revocation/store.js';
import type { NewToken, RefreshTokenStore, RotateRequest } from '../../src/state/tokens/store.js';

export interface StoreUnderTest {
  store: RefreshTokenStore;
  /** The reset store the token store honours (memory: the one it was built with; Redis: the same server). */
  resets: RevocationStore;
  close(): Promise<void>;
}

const HOUR = 3_600_000;
/** Near the real clock: a Redis store sets real TTLs from these times (the checks use `now`). */

function newToken(expiresAt: number): NewToken {
  return { tokenId: randomBytes(16).toString('base64url'), secretHash: randomBytes(32).toString('hex'), expiresAt };
}

export function runTokenStoreContract(name: string, makeStore: () => Promise<StoreUnderTest>, options: { skip?: string | false } = {}): void {
  test(`RefreshTokenStore contract: ${name}`, options, async (t) => {
    // Near the real clock, taken when the contract runs (a shared test process may have loaded
    // this file minutes earlier): a Redis store sets real expiries from these times.
    const T0 = Date.now();
    const { store, resets, close } = await makeStore();
    t.after(close);

    /** A new family with its first token; returns helpers to rotate from it. */
    async function family(opts: { familyMs?: number; tokenMs?: number; accountId?: string; keyId?: string; startedAt?: number; scopes?: readonly string[]; dpopThumbprint?: string } = {}) {
      const start = opts.startedAt ?? T0;
      const first = newToken(start + (opts.tokenMs ?? 24 * HOUR));
      const fam = {
        familyId: randomBytes(16).toString('base64url'),
        accountId: opts.accountId ?? `acct_${randomBytes(4).toString('hex')}`,
        keyId: opts.keyId ?? 'key_1',
      };
      await store.createFamily({ ...fam, familyExpiresAt: start + (opts.familyMs ?? 48 * HOUR), token: first, ...(opts.scopes === undefined ? {} : { scopes: opts.scopes }), ...(opts.dpopThumbprint === undefined ? {} : { dpopThumbprint: opts.dpopThumbprint }) }, start);
      const rotate = (token: NewToken, now: number, extra: Partial<RotateRequest> = {}) => {
        const successor = newToken(now + 24 * HOUR);
        const request: RotateRequest = {
          tokenId: token.tokenId, accountId: fam.accountId, keyId: fam.keyId, familyId: fam.familyId, secretHash: token.secretHash,
          successor, sealedPair: `sealed:${successor.tokenId}`, now, graceMs: 10_000, ...(opts.scopes === undefined ? {} : { scopes: opts.scopes }), ...extra,
        };
        return store.rotate(request).then((result) => ({ result, successor: request.successor }));
      };
      return { ...fam, first, rotate };
    }

    await t.test('rotates an active token once, and its successor after it', async () => {
      const f = await family();
      const a = await f.rotate(f.first, T0 + 1000);
      assert.deepEqual(a.result, { outcome: 'rotated' });
      const b = await f.rotate(a.successor, T0 + 2000);
      assert.deepEqual(b.result, { outcome: 'rotated' });
    });

    await t.test('refuses a wrong secret, account, key or family without consuming the token', async () => {
      const f = await family();
      const other = await family();
      assert.deepEqual((await f.rotate(f.first, T0 + 1, { secretHash: 'ff'.repeat(32) })).result, { outcome: 'invalid' });
      assert.deepEqual((await f.rotate(f.first, T0 + 1, { accountId: 'acct_other' })).result, { outcome: 'invalid' });
      assert.deepEqual((await f.rotate(f.first, T0 + 1, { keyId: 'key_other' })).result, { outcome: 'invalid' });
      assert.deepEqual((await f.rotate(f.first, T0 + 1, { familyId: other.familyId })).result, { outcome: 'invalid' });
      assert.deepEqual((await f.rotate(f.first, T0 + 2)).result, { outcome: 'rotated' });
    });

    await t.test('keeps a narrowed family\'s grant: a rotation naming another grant, or none, is invalid and consumes nothing', async () => {
      const f = await family({ scopes: ['orders:read'] });
      assert.deepEqual((await f.rotate(f.first, T0 + 1, { scopes: undefined })).result, { outcome: 'invalid' });
      assert.deepEqual((await f.rotate(f.first, T0 + 1, { scopes: ['orders:read', 'orders:write'] })).result, { outcome: 'invalid' });
      const a = await f.rotate(f.first, T0 + 2);
      assert.deepEqual(a.result, { outcome: 'rotated' });
      assert.deepEqual((await f.rotate(a.successor, T0 + 3)).result, { outcome: 'rotated' }, 'the successor keeps the grant');
      const plain = await family();
      assert.deepEqual((await plain.rotate(plain.first, T0 + 1, { scopes: ['orders:read'] })).result, { outcome: 'invalid' }, 'a family not narrowed cannot be named narrowed');
      assert.deepEqual((await plain.rotate(plain.first, T0 + 2)).result, { outcome: 'rotated' });
    });

    await t.test('a DPoP-bound family rotates only with its key\'s thumbprint; refusals consume nothing', async () => {
      const jkt = randomBytes(32).toString('base64url');
      const f = await family({ dpopThumbprint: jkt });
      assert.deepEqual((await f.rotate(f.first, T0 + 1)).result, { outcome: 'dpop_mismatch' }, 'no proof');
      assert.deepEqual((await f.rotate(f.first, T0 + 2, { dpopThumbprint: randomBytes(32).toString('base64url') })).result, { outcome: 'dpop_mismatch' }, 'another key');
      assert.deepEqual((await f.rotate(f.first, T0 + 3, { secretHash: 'ff'.repeat(32), dpopThumbprint: jkt })).result, { outcome: 'invalid' }, 'a wrong secret is invalid first');
      const a = await f.rotate(f.first, T0 + 4, { dpopThumbprint: jkt });
      assert.deepEqual(a.result, { outcome: 'rotated' });
      assert.deepEqual((await f.rotate(a.successor, T0 + 5)).result, { outcome: 'dpop_mismatch' }, 'the successor is bound too');
      assert.deepEqual((await f.rotate(a.successor, T0 + 6, { dpopThumbprint: jkt })).result, { outcome: 'rotated' });
    });

    await t.test('an unbound family rotates without a thumbprint, and is bound by its first rotation with one', async () => {
      const f = await family();
      const a = await f.rotate(f.first, T0 + 1);
      assert.deepEqual(a.result, { outcome: 'rotated' });
      const jkt = randomBytes(32).toString('base64url');
      const b = await f.rotate(a.successor, T0 + 2, { dpopThumbprint: jkt });
      assert.deepEqual(b.result, { outcome: 'rotated' });
      assert.deepEqual((await f.rotate(b.successor, T0 + 3)).result, { outcome: 'dpop_mismatch' }, 'bound from then on');
      assert.deepEqual((await f.rotate(b.successor, T0 + 4, { dpopThumbprint: jkt })).result, { outcome: 'rotated' });
    });

    await t.test('refuses an unknown token', async () => {
      const f = await family();
      assert.deepEqual((await f.rotate(newToken(T0 + HOUR), T0 + 1)).result, { outcome: 'invalid' });
    });

    await t.test('refuses a token past its idle expiry', async () => {
      const f = await family({ tokenMs: HOUR });
      assert.deepEqual((await f.rotate(f.first, T0 + HOUR + 1)).result, { outcome: 'invalid' });
    });

    await t.test('caps every token at the family lifetime', async () => {
      const f = await family({ familyMs: 2 * HOUR, tokenMs: HOUR });
      const a = await f.rotate(f.first, T0 + HOUR - 1); // successor asks for 24 h more
      assert.equal(a.result.outcome, 'rotated');
      assert.deepEqual((await f.rotate(a.successor, T0 + 2 * HOUR + 1)).result, { outcome: 'invalid' });
    });

    await t.test('answers a duplicate within the grace window (graceMs exclusive) with the same sealed pair', async () => {
      const f = await family();
      const a = await f.rotate(f.first, T0 + 1000);
      assert.equal(a.result.outcome, 'rotated');
      const dup = await f.rotate(f.first, T0 + 1000 + 9_999);
      assert.deepEqual(dup.result, { outcome: 'replayed', sealedPair: `sealed:${a.successor.tokenId}` });
      // The duplicate stored nothing: the first successor is still the live one.
      assert.deepEqual((await f.rotate(dup.successor, T0 + 20_000)).result, { outcome: 'invalid' });
      assert.equal((await f.rotate(a.successor, T0 + 20_000)).result.outcome, 'rotated');
    });

    await t.test('revokes the family on reuse after the grace window', async () => {
      const f = await family();
      const a = await f.rotate(f.first, T0 + 1000);
      const reuse = await f.rotate(f.first, T0 + 1000 + 10_000);
      assert.deepEqual(reuse.result, { outcome: 'reused', familyId: f.familyId });
      assert.deepEqual((await f.rotate(a.successor, T0 + 12_000)).result, { outcome: 'invalid' });
    });

    await t.test('revokes the family on reuse once the successor was itself rotated, even within the window', async () => {
      const f = await family();
      const a = await f.rotate(f.first, T0 + 1000);
      const b = await f.rotate(a.successor, T0 + 2000);
      assert.equal(b.result.outcome, 'rotated');
      assert.equal((await f.rotate(f.first, T0 + 3000)).result.outcome, 'reused');
      assert.deepEqual((await f.rotate(b.successor, T0 + 4000)).result, { outcome: 'invalid' });
    });

    await t.test('with no grace window, any duplicate is reuse', async () => {
      const f = await family();
      await f.rotate(f.first, T0 + 1000, { graceMs: 0 });
      assert.equal((await f.rotate(f.first, T0 + 1000, { graceMs: 0 })).result.outcome, 'reused');
    });

    await t.test('a reset of the key kills families started at or before it, and nothing else', async () => {
      const accountId = `acct_${randomBytes(4).toString('hex')}`;
      const before = await family({ accountId, keyId: 'key_1' });
      const atReset = await family({ accountId, keyId: 'key_1', startedAt: T0 + 5000 });
      const otherKey = await family({ accountId, keyId: 'key_2' });
      const a = await before.rotate(before.first, T0 + 1000);
      assert.equal(a.result.outcome, 'rotated');
      await resets.reset({ accountId, keyId: 'key_1' }, T0 + 5000);
      const after = await family({ accountId, keyId: 'key_1', startedAt: T0 + 5001 });
      // The successor was minted before the reset: dead with its family, and reuse is no longer detectable.
      assert.deepEqual((await before.rotate(a.successor, T0 + 6000)).result, { outcome: 'invalid' });
      assert.deepEqual((await before.rotate(before.first, T0 + 6000)).result, { outcome: 'invalid' });
      assert.deepEqual((await atReset.rotate(atReset.first, T0 + 6000)).result, { outcome: 'invalid' });
      assert.equal((await otherKey.rotate(otherKey.first, T0 + 6000)).result.outcome, 'rotated');
      assert.equal((await after.rotate(after.first, T0 + 6000)).result.outcome, 'rotated');
    });

    await t.test('a reset of the account kills every key\'s families started before it', async () => {
      const accountId = `acct_${randomBytes(4).toString('hex')}`;
      const one = await family({ accountId, keyId: 'key_1' });
      const two = await family({ accountId, keyId: 'key_2' });
      const elsewhere = await family({ keyId: 'key_1' });
      await resets.reset({ accountId }, T0 + 1000);
      assert.deepEqual((await one.rotate(one.first, T0 + 2000)).result, { outcome: 'invalid' });
      assert.deepEqual((await two.rotate(two.first, T0 + 2000)).result, { outcome: 'invalid' });
      assert.equal((await elsewhere.rotate(elsewhere.first, T0 + 2000)).result.outcome, 'rotated');
      const later = await family({ accountId, keyId: 'key_1', startedAt: T0 + 1001 });
      assert.equal((await later.rotate(later.first, T0 + 2000)).result.outcome, 'rotated');
    });

    await t.test('of 100 concurrent rotations of one token exactly one rotates; the rest get its pair', async () => {
      const f = await family();
      const results = await Promise.all(Array.from({ length: 100 }, () => f.rotate(f.first, T0 + 5000)));
      const winners = results.filter((r) => r.result.outcome === 'rotated');
      assert.equal(winners.length, 1);
      const sealed = `sealed:${winners[0]!.successor.tokenId}`;
      for (const r of results) {
        if (r !== winners[0]) assert.deepEqual(r.result, { outcome: 'replayed', sealedPair: sealed });
      }
    });

    /** The presented form of one of a family's tokens. */
    const presented = (f: { accountId: string; keyId: string; familyId: string }, token: NewToken, secretHash = token.secretHash) =>
      ({ tokenId: token.tokenId, accountId: f.accountId, keyId: f.keyId, familyId: f.familyId, secretHash });

    await t.test('revokeFamily: any token of the family, consumed or current, ends it whole', async () => {
      const f = await family();
      const a = await f.rotate(f.first, T0 + 1000);
      assert.equal(await store.revokeFamily(presented(f, f.first)), true, 'the consumed first token proves the family');
      assert.deepEqual((await f.rotate(a.successor, T0 + 2000)).result, { outcome: 'invalid' }, 'the successor is dead');
      assert.equal(await store.revokeFamily(presented(f, a.successor)), false, 'already revoked');
      const other = await family({ accountId: f.accountId, keyId: f.keyId });
      assert.equal((await other.rotate(other.first, T0 + 2000)).result.outcome, 'rotated', 'another family lives on');
    });

    await t.test('revokeFamily: a wrong secret, family, key or account, or an unknown token, ends nothing', async () => {
      const f = await family();
      const wrong = randomBytes(32).toString('hex');
      assert.equal(await store.revokeFamily(presented(f, f.first, wrong)), false);
      assert.equal(await store.revokeFamily({ ...presented(f, f.first), familyId: 'other' }), false);
      assert.equal(await store.revokeFamily({ ...presented(f, f.first), keyId: 'key_other' }), false);
      assert.equal(await store.revokeFamily({ ...presented(f, f.first), accountId: 'acct_other' }), false);
      assert.equal(await store.revokeFamily(presented(f, newToken(T0 + HOUR))), false);
      assert.equal((await f.rotate(f.first, T0 + 1000)).result.outcome, 'rotated');
    });

    await t.test('inspect: active until consumed, expired, revoked or reset; unknown for a wrong secret', async () => {
      const f = await family({ tokenMs: HOUR });
      assert.deepEqual(await store.inspect(presented(f, f.first), T0 + 1000), { active: true, expiresAt: T0 + HOUR });
      assert.deepEqual(await store.inspect(presented(f, f.first), T0 + HOUR), { active: false, expiresAt: T0 + HOUR }, 'expired');
      assert.equal(await store.inspect(presented(f, f.first, randomBytes(32).toString('hex')), T0 + 1000), undefined);
      assert.equal(await store.inspect({ ...presented(f, f.first), familyId: 'other' }, T0 + 1000), undefined);
      assert.equal(await store.inspect(presented(f, newToken(T0 + HOUR)), T0 + 1000), undefined);
      const a = await f.rotate(f.first, T0 + 1000);
      assert.equal((await store.inspect(presented(f, f.first), T0 + 2000))?.active, false, 'consumed');
      assert.equal((await store.inspect(presented(f, a.successor), T0 + 2000))?.active, true);
      await store.revokeFamily(presented(f, a.successor));
      assert.equal((await store.inspect(presented(f, a.successor), T0 + 3000))?.active, false, 'revoked');

      const r = await family();
      await resets.reset({ accountId: r.accountId, keyId: r.keyId }, T0 + 500);
      assert.equal((await store.inspect(presented(r, r.first), T0 + 1000))?.active, false, 'reset');
    });

    await t.test('inspect changes nothing', async () => {
      const f = await family();
      for (let i = 0; i < 3; i++) await store.inspect(presented(f, f.first), T0 + 1000);
      assert.equal((await f.rotate(f.first, T0 + 1000)).result.outcome, 'rotated');
    });
  });
}
