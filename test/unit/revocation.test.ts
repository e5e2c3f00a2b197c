/**
 * createRevocations (src/auth/revocation.ts): the cache in front of the reset store, the
 * notices that invalidate it, and what it answers when the store fails. The store is the memory
 * one behind a wrapper that counts reads, can fail them, and decides which resets are announced
 * to the listeners, so a reset the cache was not told about can be made on purpose.
 *
 * lru-cache memoises its clock for 1 ms of real time (ttlResolution), through a setTimeout:
 * that timer is mocked and moved with the ManualClock, so every move is seen at once.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { createRevocations, type IssuedToken, type Revocations } from '../../src/auth/revocation.js';
import { MemoryRevocationStore } from '../../src/state/revocation/memory.js';
import type { AccountResets, ResetScope, RevocationListener, RevocationStore } from '../../src/state/revocation/store.js';
import { ManualClock } from '../helpers/clock.js';

const TTL_MS = 1000;
const REMEMBER_MS = 905_000;
const ACCOUNT = 'acct_a';

/** The memory store, with reads counted and switchable to failing, and notices under the test's control. */
class ProbeStore implements RevocationStore {
  readonly inner: MemoryRevocationStore;
  readonly listeners: RevocationListener[] = [];
  reads = 0;
  failing = false;
  /** False: `reset` records without a notice, as if this instance's own notice had not come back yet. */
  announce = true;

  constructor(clock: ManualClock) {
    this.inner = new MemoryRevocationStore({ clock, retainMs: 30 * 86_400_000 });
  }

  /** Records the reset and announces it, as the real stores do. */
  async reset(scope: ResetScope, at: number): Promise<void> {
    await this.inner.reset(scope, at);
    if (this.announce) for (const l of this.listeners) l.onReset(scope, at);
  }

  /** Records the reset without a notice: one lost on the way, or made while the channel was down. */
  async resetUnannounced(scope: ResetScope, at: number): Promise<void> {
    await this.inner.reset(scope, at);
  }

  gap(): void {
    for (const l of this.listeners) l.onGap();
  }

  async read(accountId: string): Promise<AccountResets> {
    this.reads++;
    if (this.failing) throw new Error('store unavailable');
    return this.inner.read(accountId);
  }

  /** The epoch began long before every token of these tests (test/redis/data-loss.test.ts has the epoch). */
  startedAt = 0;

  epochReads = 0;

  async epoch(): Promise<number> {
    this.epochReads++;
    if (this.failing) throw new Error('store unavailable');
    return this.startedAt;
  }

  watch(listener: RevocationListener): void {
    this.listeners.push(listener);
  }
}

interface Fixture {
  clock: ManualClock;
  store: ProbeStore;
  revocations: Revocations;
  /** Moves the clock. */
  advance(ms: number): void;
  /** A token of `keyId` issued `msAgo` before now. */
  token(msAgo?: number, keyId?: string): IssuedToken;
}

function setUp(t: TestContext): Fixture {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const store = new ProbeStore(clock);
  const revocations = createRevocations({ store, clock, ttlMs: TTL_MS, rememberMs: REMEMBER_MS });
  assert.equal(store.listeners.length, 1, 'createRevocations watches the store');
  return {
    clock,
    store,
    revocations,
    advance(ms) {
      clock.advance(ms);
    },
    token(msAgo = 0, keyId = 'key_1') {
      return { accountId: ACCOUNT, keyId, issuedAtMs: clock.now() - msAgo };
    },
  };
}

/** Lets a background read finish and land in the cache (no clock involved). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

test('createRevocations', async (t) => {
  await t.test('reset records the current time in the store and returns it', async (t) => {
    const f = setUp(t);
    const at = await f.revocations.reset({ accountId: ACCOUNT, keyId: 'key_1' });
    assert.equal(at, f.clock.now());
    assert.equal((await f.store.inner.read(ACCOUNT)).keys.get('key_1'), at);
  });

  await t.test('a reset made here is honoured at once, before its own notice comes back', async (t) => {
    const f = setUp(t);
    const tok = f.token(5);
    assert.equal(await f.revocations.isRevoked(tok), false);
    assert.equal(f.store.reads, 1);
    f.store.announce = false;
    f.store.failing = true;
    await f.revocations.reset({ accountId: ACCOUNT, keyId: 'key_1' });
    assert.equal(f.revocations.isRevoked(tok), true, 'synchronously, without the store or a notice');
    assert.equal(f.revocations.isRevoked(f.token(5, 'key_2')), false, 'the cached copy still answers for the other key');
    assert.equal(f.store.reads, 1);
    f.advance(1);
    assert.equal(await f.revocations.isRevoked(f.token(0)), false, 'a token issued after the reset');
  });

  await t.test('revokes tokens issued at or before the reset, of that key only; an account reset covers every key', async (t) => {
    const f = setUp(t);
    const early = f.token(1);
    const same = f.token(0);
    const otherKey = f.token(1, 'key_2');
    const at = await f.revocations.reset({ accountId: ACCOUNT, keyId: 'key_1' });
    f.advance(1);
    assert.equal(await f.revocations.isRevoked(early), true);
    assert.equal(await f.revocations.isRevoked(same), true, 'issued in the reset millisecond');
    assert.equal(await f.revocations.isRevoked(f.token(0)), false, 'issued 1 ms after');
    assert.equal(await f.revocations.isRevoked(otherKey), false, 'another key');
    assert.equal(await f.revocations.isRevoked({ ...early, accountId: 'acct_b' }), false, 'another account');

    await f.revocations.reset({ accountId: ACCOUNT });
    assert.equal(await f.revocations.isRevoked(otherKey), true, 'the account reset covers key_2');
    assert.equal(await f.revocations.isRevoked({ ...otherKey, issuedAtMs: at + 1 }), true);
    f.advance(1);
    assert.equal(await f.revocations.isRevoked(f.token(0, 'key_2')), false);
  });

  await t.test('within the ttl the cached answer is given synchronously, without a read', async (t) => {
    const f = setUp(t);
    const tok = f.token(5);
    assert.equal(await f.revocations.isRevoked(tok), false, 'nothing reset yet');
    assert.equal(f.store.reads, 1);
    await f.store.resetUnannounced({ accountId: ACCOUNT }, f.clock.now());
    f.advance(TTL_MS - 1);
    const answer = f.revocations.isRevoked(tok);
    assert.equal(answer, false, 'a plain boolean from the cache, which knows nothing of the reset');
    assert.equal(f.store.reads, 1);
  });

  await t.test('past the ttl the account is read again: the stale copy answers that call, the fresh one the next', async (t) => {
    const f = setUp(t);
    const tok = f.token(5);
    assert.equal(await f.revocations.isRevoked(tok), false);
    await f.store.resetUnannounced({ accountId: ACCOUNT }, f.clock.now());
    f.advance(TTL_MS + 1);
    const answer = f.revocations.isRevoked(tok);
    assert.ok(answer instanceof Promise, 'a stale copy is not answered synchronously');
    assert.equal(f.store.reads, 2, 'the store is read again');
    assert.equal(await answer, false, 'served stale while the fresh copy is read');
    await settle();
    assert.equal(f.revocations.isRevoked(tok), true, 'the fresh copy, now cached');
    assert.equal(f.store.reads, 2);
  });

  await t.test('a reset notice is honoured at once; the cached copy stays, since with the notices it is the whole state', async (t) => {
    const f = setUp(t);
    const tok = f.token(5);
    assert.equal(await f.revocations.isRevoked(tok), false);
    assert.equal(await f.revocations.isRevoked(f.token(5, 'key_2')), false);
    assert.equal(f.store.reads, 1);
    await f.store.reset({ accountId: ACCOUNT, keyId: 'key_2' }, f.clock.now());
    assert.equal(f.revocations.isRevoked(f.token(5, 'key_2')), true, 'synchronously, from the notice');
    assert.equal(f.store.reads, 1);

    // A reset of key_1 the cache was not told about is seen once the copy expires, not before.
    await f.store.resetUnannounced({ accountId: ACCOUNT, keyId: 'key_1' }, f.clock.now());
    assert.equal(f.revocations.isRevoked(tok), false);
    assert.equal(f.store.reads, 1);
    f.advance(TTL_MS + 1);
    await f.revocations.isRevoked(tok);
    await settle();
    assert.equal(f.revocations.isRevoked(tok), true);
    assert.equal(f.store.reads, 2);
  });

  await t.test('after a gap a copy is read again before it is trusted, and still answers while the store fails', async (t) => {
    const f = setUp(t);
    const tok = f.token(5);
    const other = f.token(5, 'key_2');
    await f.store.resetUnannounced({ accountId: ACCOUNT, keyId: 'key_1' }, f.clock.now());
    assert.equal(await f.revocations.isRevoked(tok), true);
    assert.equal(f.store.reads, 1);

    // Store down, then notices lost: the known reset must stay enforced.
    f.store.failing = true;
    f.store.gap();
    assert.equal(await f.revocations.isRevoked(tok), true, 'the copy from before the gap answers while the store fails');
    assert.equal(f.store.reads, 2, 'a read was tried first');

    // Store back, with a reset the notices missed: the first call after the gap waits for it.
    f.store.failing = false;
    await f.store.resetUnannounced({ accountId: ACCOUNT, keyId: 'key_2' }, f.clock.now());
    assert.equal(await f.revocations.isRevoked(other), true, 'not the copy from before the gap');
    assert.equal(f.revocations.isRevoked(other), true, 'cached again');
  });

  await t.test('after a gap every account is read again', async (t) => {
    const f = setUp(t);
    const tok = f.token(5);
    const elsewhere = { ...tok, accountId: 'acct_b' };
    assert.equal(await f.revocations.isRevoked(tok), false);
    assert.equal(await f.revocations.isRevoked(elsewhere), false);
    await f.store.resetUnannounced({ accountId: ACCOUNT }, f.clock.now());
    await f.store.resetUnannounced({ accountId: 'acct_b' }, f.clock.now());
    assert.equal(f.revocations.isRevoked(tok), false, 'still the cached copy');
    assert.equal(f.store.reads, 2);
    f.store.gap();
    assert.equal(await f.revocations.isRevoked(tok), true);
    assert.equal(await f.revocations.isRevoked(elsewhere), true);
    assert.equal(f.store.reads, 4);
  });

  await t.test('while the store fails, a stale copy answers, for and against', async (t) => {
    const f = setUp(t);
    const before = f.token(5);
    await f.store.resetUnannounced({ accountId: ACCOUNT, keyId: 'key_1' }, f.clock.now());
    f.advance(1);
    const after = f.token(0);
    assert.equal(await f.revocations.isRevoked(before), true);
    assert.equal(f.store.reads, 1);
    f.store.failing = true;
    f.advance(TTL_MS * 60);
    for (let i = 0; i < 3; i++) {
      assert.equal(await f.revocations.isRevoked(before), true, `call ${i}: revoked by the stale copy`);
      await settle();
      assert.equal(await f.revocations.isRevoked(after), false, `call ${i}: not revoked by the stale copy`);
      await settle();
    }
    assert.ok(f.store.reads > 1, 'the store is tried again');

    // Once the store answers, the fresh copy replaces the stale one.
    f.store.failing = false;
    await f.store.resetUnannounced({ accountId: ACCOUNT, keyId: 'key_1' }, f.clock.now());
    await f.revocations.isRevoked(after);
    await settle();
    assert.equal(await f.revocations.isRevoked(after), true);
  });

  await t.test('while the store fails and nothing is known, a token is not revoked (fail open)', async (t) => {
    const f = setUp(t);
    await f.store.resetUnannounced({ accountId: ACCOUNT }, f.clock.now());
    f.store.failing = true;
    assert.equal(await f.revocations.isRevoked(f.token(5)), false);
    assert.equal(f.store.reads, 1, 'the store was asked');
    await settle();
    assert.equal(await f.revocations.isRevoked(f.token(5)), false, 'nothing was cached from the failure');
    assert.equal(f.store.reads, 2);
  });

  await t.test('a heard notice is honoured while the store fails, for as long as an access token lives', async (t) => {
    const f = setUp(t);
    const tok = f.token(5);
    const otherKey = f.token(5, 'key_2');
    await f.store.reset({ accountId: ACCOUNT, keyId: 'key_1' }, f.clock.now());
    f.store.failing = true;
    assert.equal(f.revocations.isRevoked(tok), true, 'synchronously, without the store');
    assert.equal(f.store.reads, 0);
    assert.equal(await f.revocations.isRevoked(otherKey), false, 'the notice names key_1 only; the store fails open');
    f.advance(REMEMBER_MS - 1);
    assert.equal(f.revocations.isRevoked(tok), true, 'still remembered');
    // Past rememberMs the token has expired anyway; the notice is forgotten.
    f.advance(2);
    assert.equal(await f.revocations.isRevoked(tok), false);
  });
});

test('createRevocations: the store epoch', async (t) => {
  const SKEW_MS = 5000;
  /** A fixture whose store epoch began at `startedAt` (or cannot be read yet, with `failing`). */
  function epochSetUp(startedAt: number, failing = false) {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new ProbeStore(clock);
    store.startedAt = startedAt;
    store.failing = failing;
    const revocations = createRevocations({ store, clock, ttlMs: TTL_MS, rememberMs: REMEMBER_MS, skewMs: SKEW_MS });
    const issued = (issuedAtMs: number): IssuedToken => ({ accountId: ACCOUNT, keyId: 'key_1', issuedAtMs });
    return { clock, store, revocations, issued };
  }

  await t.test('a token issued before the epoch began, beyond the allowed skew, is refused; later ones are not', async () => {
    const start = Date.UTC(2026, 0, 1);
    const { revocations, issued } = epochSetUp(start);
    assert.equal(await revocations.isRevoked(issued(start - SKEW_MS - 1)), true, 'the first token waits for the epoch');
    assert.equal(revocations.isRevoked(issued(start - SKEW_MS - 1)), true, 'then it is known: answered synchronously');
    assert.equal(await revocations.isRevoked(issued(start - SKEW_MS)), false, 'within the skew');
    assert.equal(await revocations.isRevoked(issued(start + 1)), false);
  });

  await t.test('a durable token (an API settings token) is not refused for its age, but a reset after it still covers it', async () => {
    const start = Date.UTC(2026, 0, 1);
    const { clock, revocations, issued } = epochSetUp(start);
    const old = issued(start - 86_400_000);
    assert.equal(await revocations.isRevoked(old), true, 'a JWT that old is refused');
    assert.equal(await revocations.isRevoked(old, { durable: true }), false, 'a durable token is not');
    clock.advance(1);
    await revocations.reset({ accountId: ACCOUNT, keyId: 'key_1' });
    assert.equal(await revocations.isRevoked(old, { durable: true }), true, 'a reset after it covers it');
  });

  await t.test('a new epoch refuses older tokens at once and tells the watchers, as a gap', async () => {
    const start = Date.UTC(2026, 0, 1);
    const { clock, store, revocations, issued } = epochSetUp(start - 3_600_000);
    const old = issued(start - 60_000);
    assert.equal(await revocations.isRevoked(old), false);
    let gaps = 0;
    revocations.watch({ onReset() {}, onGap: () => void gaps++ });
    for (const l of store.listeners) l.onEpoch(clock.now());
    assert.equal(revocations.isRevoked(old), true);
    assert.equal(gaps, 1, 'open WebSockets are checked again');
    for (const l of store.listeners) l.onEpoch(clock.now());
    assert.equal(gaps, 1, 'the same epoch again is no news');
  });

  await t.test('an epoch that cannot be read yet: the resets decide; once it can, it applies', async () => {
    const start = Date.UTC(2026, 0, 1);
    const { clock, store, revocations, issued } = epochSetUp(start, true);
    const old = issued(start - 60_000);
    assert.equal(await revocations.isRevoked(old), false, 'nothing known and nothing readable: accepted, as in any outage');
    store.failing = false;
    const reads = store.epochReads;
    assert.equal(await revocations.isRevoked(old), false, 'not asked again by every token (the store\'s own checks go on)');
    assert.equal(store.epochReads, reads, 'no read within ttlMs of the failed one');
    clock.advance(TTL_MS);
    assert.equal(await revocations.isRevoked(old), true, 'read on the next token once ttlMs has passed');
    assert.equal(revocations.isRevoked(old), true, 'and known from then on');
  });
  await t.test('a token carrying its epoch: the current one costs no read, whatever its issue time; another is refused', async () => {
    const start = Date.UTC(2026, 0, 1);
    const { store, revocations, issued } = epochSetUp(start);
    assert.equal(await revocations.currentEpoch(), start, 'what a new token carries');
    const reads = store.epochReads;
    // Issued a second before the epoch's start by its clock, within the skew: the epoch claim decides, not the time.
    assert.equal(await revocations.isRevoked({ ...issued(start - 1000), epoch: start }), false, 'the current epoch: served');
    assert.equal(store.epochReads, reads, 'without reading the epoch again');
    const fromBefore = { ...issued(start - 1000), epoch: start - 2000 };
    assert.equal(await revocations.isRevoked(fromBefore), true, 'an epoch this instance never knew, not the current one: refused (within the skew too)');
    assert.equal(store.epochReads, reads + 1, 'after one read of the epoch');
    for (let i = 0; i < 10; i++) assert.equal(revocations.isRevoked(fromBefore), true, 'then known as retired, at once');
    assert.equal(store.epochReads, reads + 1, 'no read per token');
  });

  await t.test('a token of a newer epoch than the one known: one read takes it up, and the old epoch is retired', async () => {
    const start = Date.UTC(2026, 0, 1);
    const { clock, store, revocations, issued } = epochSetUp(start);
    await revocations.currentEpoch();
    let lost = 0;
    revocations.whenDataLost(() => void lost++);
    const old = { ...issued(clock.now()), epoch: start };
    store.startedAt = start + 10_000;
    const fresh = { ...issued(clock.now()), epoch: start + 10_000 };
    assert.equal(await revocations.isRevoked(fresh), false, 'the new epoch, read from the store');
    assert.equal(lost, 1, 'a data loss, told at once');
    assert.equal(revocations.isRevoked(old), true, 'the old epoch is refused from then on');
    assert.equal(await revocations.isRevoked(fresh), false);
  });

  await t.test('an epoch unknown while the store cannot be read: refused when another is known, left to the resets when none is', async () => {
    const start = Date.UTC(2026, 0, 1);
    const known = epochSetUp(start);
    await known.revocations.currentEpoch();
    known.store.failing = true;
    assert.equal(await known.revocations.isRevoked({ ...known.issued(start), epoch: start + 1 }), true, 'may be from before a loss');
    assert.equal(await known.revocations.isRevoked({ ...known.issued(start), epoch: start }), false, 'the known one still served');
    const none = epochSetUp(start, true);
    assert.equal(await none.revocations.isRevoked({ ...none.issued(start), epoch: start }), false, 'nothing known: accepted, as in any outage');
    assert.equal(await none.revocations.currentEpoch(), undefined, 'and new tokens go without an epoch');
  });
});
