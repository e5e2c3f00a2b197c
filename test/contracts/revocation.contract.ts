/**
 * The contract of RevocationStore (src/state/revocation/store.ts), run once per implementation.
 *
 * `a` and `b` are two handles on one shared state, as two gateway instances would hold them
 * (memory: the same instance twice; Redis: two connections to one server). `make` gives new
 * state (a new instance, an empty Redis or a prefix of its own), so its epoch begins then.
 * Every test uses accounts of its own, so the tests do not see each other's resets. Times are
 * near the real clock, because a store keeps a reset only for a while after it (`retainMs`).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { latestReset, type ResetScope, type RevocationListener, type RevocationStore } from '../../src/state/revocation/store.js';

export interface RevocationStoresUnderTest {
  a: RevocationStore;
  b: RevocationStore;
  close(): Promise<void>;
}

/** How long a notice may take to reach a listener (Redis pub/sub is asynchronous). */
const DELIVERY_MS = 2000;
const T0 = Date.now();

function account(label = 'acct'): string {
  return `${label}_${randomBytes(6).toString('hex')}`;
}

interface Heard {
  scope: ResetScope;
  at: number;
}

/** A listener that writes down what it hears. */
function recorder(): RevocationListener & { heard: Heard[]; gaps: number; epochs: number[] } {
  const rec = {
    heard: [] as Heard[],
    gaps: 0,
    epochs: [] as number[],
    onEpoch(startedAt: number) {
      rec.epochs.push(startedAt);
    },
    onReset(scope: ResetScope, at: number) {
      rec.heard.push({ scope: { ...scope }, at });
    },
    onGap() {
      rec.gaps++;
    },
  };
  return rec;
}

/** Polls `find` until it returns something, or fails after `limitMs`. */
async function eventually<T>(what: string, find: () => T | undefined, limitMs = DELIVERY_MS): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) assert.fail(`not within ${limitMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Resets a probe account through `via` until `rec` hears one: a subscription is made in the
 * background, and a notice sent before it is in place is lost by design (the listener gets
 * onGap instead). Returns once the listener is known to be listening.
 */
async function untilListening(via: RevocationStore, rec: ReturnType<typeof recorder>): Promise<void> {
  const probe = account('probe');
  const deadline = Date.now() + DELIVERY_MS;
  for (let i = 1; ; i++) {
    await via.reset({ accountId: probe }, T0 + i);
    const limit = Math.min(50, Math.max(0, deadline - Date.now()));
    const heard = await eventually('probe', () => rec.heard.find((h) => h.scope.accountId === probe), limit).catch(() => undefined);
    if (heard !== undefined) return;
    if (Date.now() > deadline) assert.fail(`the listener heard no reset within ${DELIVERY_MS} ms`);
  }
}

export function runRevocationContract(
  name: string,
  make: () => Promise<RevocationStoresUnderTest>,
  options: { skip?: string | false } = {},
): void {
  test(`RevocationStore contract: ${name}`, options, async (t) => {
    // Every implementation's state is new here (a new process, an empty Redis): its data began now.
    const made = Date.now();
    const { a, b, close } = await make();
    t.after(close);

    await t.test('epoch: when the data began (not before the store was made, not in the future), the same through both handles and on every call', async () => {
      const [x, y] = await Promise.all([a.epoch(), b.epoch()]);
      assert.ok(Number.isSafeInteger(x), `a time: ${x}`);
      assert.equal(y, x, 'both handles see one epoch');
      assert.equal(await a.epoch(), x, 'and it stays');
      assert.ok(x <= Date.now(), 'begun by now');
      // A store whose epoch began before its data did would accept tokens issued before any
      // reset it holds, among them tokens reset in data it never had.
      assert.ok(x >= made, `begun with this store's data: ${x} >= ${made}`);
    });

    await t.test('an account without resets reads empty', async () => {
      const resets = await b.read(account());
      assert.equal(resets.account, undefined);
      assert.equal(resets.keys.size, 0);
      assert.equal(latestReset(resets, 'key_1'), 0);
    });

    await t.test('a key reset reads back, through the same handle and the other', async () => {
      const accountId = account();
      await a.reset({ accountId, keyId: 'key_1' }, T0 + 1000);
      for (const handle of [a, b]) {
        const resets = await handle.read(accountId);
        assert.equal(resets.account, undefined, 'a key reset is not an account reset');
        assert.deepEqual([...resets.keys], [['key_1', T0 + 1000]]);
        assert.equal(latestReset(resets, 'key_1'), T0 + 1000);
        assert.equal(latestReset(resets, 'key_2'), 0);
      }
    });

    await t.test('an account reset reads back, alongside the key resets', async () => {
      const accountId = account();
      await b.reset({ accountId }, T0 + 2000);
      let resets = await a.read(accountId);
      assert.equal(resets.account, T0 + 2000);
      assert.equal(resets.keys.size, 0, 'an account reset adds no key entry');
      assert.equal(latestReset(resets, 'any_key'), T0 + 2000);

      await a.reset({ accountId, keyId: 'key_1' }, T0 + 3000);
      resets = await b.read(accountId);
      assert.equal(resets.account, T0 + 2000);
      assert.deepEqual([...resets.keys], [['key_1', T0 + 3000]]);
      assert.equal(latestReset(resets, 'key_1'), T0 + 3000);
      assert.equal(latestReset(resets, 'key_2'), T0 + 2000);
    });

    await t.test('a later reset moves the time forward; an earlier one does not move it back', async () => {
      const accountId = account();
      await a.reset({ accountId, keyId: 'key_1' }, T0 + 5000);
      await a.reset({ accountId }, T0 + 5000);
      await b.reset({ accountId, keyId: 'key_1' }, T0 + 7000);
      await b.reset({ accountId }, T0 + 8000);
      let resets = await a.read(accountId);
      assert.equal(resets.account, T0 + 8000);
      assert.equal(resets.keys.get('key_1'), T0 + 7000);

      await a.reset({ accountId }, T0 + 8000); // the same time again changes nothing
      await b.reset({ accountId, keyId: 'key_1' }, T0 + 6000);
      await a.reset({ accountId }, T0 + 1000);
      resets = await b.read(accountId);
      assert.equal(resets.account, T0 + 8000);
      assert.equal(resets.keys.get('key_1'), T0 + 7000);
      assert.equal(resets.keys.size, 1);
    });

    await t.test('keeps accounts and keys apart', async () => {
      const one = account();
      const prefixed = `${one}_2`; // an id that starts with another must not share its entry
      const untouched = account();
      await a.reset({ accountId: one, keyId: 'key_1' }, T0 + 1000);
      await a.reset({ accountId: prefixed }, T0 + 2000);
      const resetsOne = await b.read(one);
      assert.equal(resetsOne.account, undefined);
      assert.deepEqual([...resetsOne.keys], [['key_1', T0 + 1000]]);
      const resetsPrefixed = await b.read(prefixed);
      assert.equal(resetsPrefixed.account, T0 + 2000);
      assert.equal(resetsPrefixed.keys.size, 0);
      const resetsUntouched = await b.read(untouched);
      assert.equal(resetsUntouched.account, undefined);
      assert.equal(resetsUntouched.keys.size, 0);
    });

    await t.test("keeps ids with ':' '.' '@' '-' whole, and a key named \"account\" is a key", async () => {
      const accountId = `${account()}:org.example@eu-1`;
      const keyIds = ['key:a:b', 'key.v2', 'ci@build-7', 'account', 'key'];
      for (const [i, keyId] of keyIds.entries()) await a.reset({ accountId, keyId }, T0 + 100 + i);
      const resets = await b.read(accountId);
      assert.equal(resets.account, undefined, 'a key named "account" is not an account reset');
      assert.deepEqual(new Map(resets.keys), new Map(keyIds.map((keyId, i) => [keyId, T0 + 100 + i])));
      // The account without the suffix is another account.
      const bare = accountId.slice(0, accountId.indexOf(':'));
      assert.equal((await b.read(bare)).keys.size, 0);
    });

    await t.test("b's listener hears a reset made through a, with its scope and time", async () => {
      const rec = recorder();
      b.watch(rec);
      await untilListening(a, rec);

      const accountId = account();
      await a.reset({ accountId, keyId: 'key_1' }, T0 + 4000);
      const keyNotice = await eventually('the key reset notice', () => rec.heard.find((h) => h.scope.accountId === accountId));
      assert.deepEqual(keyNotice, { scope: { accountId, keyId: 'key_1' }, at: T0 + 4000 });

      await a.reset({ accountId }, T0 + 4500);
      const accountNotice = await eventually('the account reset notice', () => rec.heard.find((h) => h.scope.accountId === accountId && h.scope.keyId === undefined));
      assert.deepEqual(accountNotice, { scope: { accountId }, at: T0 + 4500 });
      assert.ok(!('keyId' in accountNotice.scope), 'an account reset names no key');
      assert.equal(rec.heard.filter((h) => h.scope.accountId === accountId).length, 2, 'each reset is heard once');
    });

    await t.test('a listener registered on a hears the resets made through a', async () => {
      const rec = recorder();
      a.watch(rec);
      await untilListening(a, rec);

      const accountId = `${account()}:x.y@z-1`;
      await a.reset({ accountId, keyId: 'k:1.a@b-c' }, T0 + 9000);
      const notice = await eventually('the own reset notice', () => rec.heard.find((h) => h.scope.accountId === accountId));
      assert.deepEqual(notice, { scope: { accountId, keyId: 'k:1.a@b-c' }, at: T0 + 9000 });
    });
  });
}
