/**
 * createCachedDirectory (src/state/directory/cache.ts) in front of a store the test controls:
 * it counts calls, fails them on demand, and holds them pending until released. Time is a
 * ManualClock; nothing here sleeps. "Pending" is proven by letting the event loop turn a few
 * times while the store holds the call, never by waiting for a duration.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BadStoreData, StoreTimeout, StoreUnavailable } from '../../src/errors/errors.js';
import type { DataFile } from '../../src/state/data-file/data-file.js';
import { createCachedDirectory, type CachedDirectory, type DirectoryCacheSettings } from '../../src/state/directory/cache.js';
import { MemoryDirectory } from '../../src/state/directory/memory.js';
import type { Directory, DirectoryChange, DirectoryChangeListener, DirectoryChanges, RolePage, RoleQuery, SignRecord } from '../../src/state/directory/store.js';
import { createLogger } from '../../src/telemetry/log.js';
import { DIRECTORY_FIXTURE, runDirectoryContract } from '../contracts/directory.contract.js';
import { ManualClock } from '../helpers/clock.js';

/** The fixture's one sign record (acct_a), as the cache is asked for it: lowercase. */
const ADDR = '0x52908400098527886e0f7030069857d2e4169ee7';
/** An address no account has a record for. */
const OTHER = `0x${'1'.repeat(40)}`;

const SETTINGS: DirectoryCacheSettings = {
  ttlMs: 1000,
  staleWhileRevalidateMs: 500,
  negativeTtlMs: 200,
  maxStaleMs: 10_000,
  maxEntries: 1000,
  maxBytes: 1_000_000,
};
const { ttlMs: TTL, staleWhileRevalidateMs: SWR, negativeTtlMs: NEG_TTL, maxStaleMs: MAX_STALE } = SETTINGS;
/** After a failed read, a served copy asks the store again at most once a second (RETRY_FAILED_MS in the source). */
const RETRY_MS = 1000;

/** The fixture with acct_a's sign record at another nonce, and its roles' descriptions marked. */
function version(nonce: number, extraSign: DataFile['accounts'][number]['signRecords'] = []): DataFile {
  const data = structuredClone(DIRECTORY_FIXTURE);
  const a = data.accounts.find((acc) => acc.id === 'acct_a')!;
  a.signRecords = [...a.signRecords.map((s) => ({ ...s, signedNonce: nonce })), ...extraSign];
  a.roles = a.roles.map((r) => ({ ...r, description: `${r.description} v${nonce}` }));
  return data;
}

const signCall = (accountId: string, address: string) => `sign ${accountId} ${address}`;
const rolesCall = (accountId: string, q: RoleQuery) => `roles ${accountId} ${q.offset} ${q.limit} ${q.nameContains ?? '-'}`;

/**
 * A Directory over a MemoryDirectory that counts its calls, fails them on demand and holds
 * them until released. A call reads the memory store when it begins (what a later `load`
 * changes is not seen by a call already under way) and decides then whether it fails.
 */
class ProbeStore implements Directory {
  readonly calls: string[] = [];
  #failure: { make: () => Error; times: number } | undefined;
  #holding = false;
  #held: (() => void)[] = [];
  #arrivals: { n: number; resolve: () => void }[] = [];

  readonly inner: MemoryDirectory;

  constructor(inner: MemoryDirectory) {
    this.inner = inner;
  }

  count(name?: string): number {
    return name === undefined ? this.calls.length : this.calls.filter((c) => c === name).length;
  }

  /** The next `times` calls (all, by default) throw a fresh error from `make`. */
  fail(make: () => Error, times = Number.POSITIVE_INFINITY): void {
    this.#failure = { make, times };
  }

  recover(): void {
    this.#failure = undefined;
  }

  /** Calls from now on wait until release(). */
  hold(): void {
    this.#holding = true;
  }

  /** Lets every held call go on, and stops holding. */
  release(): void {
    this.#holding = false;
    for (const go of this.#held.splice(0)) go();
  }

  get pending(): number {
    return this.#held.length;
  }

  /**
   * Resolves once `n` calls in all have begun. The deadline only turns a call that never comes
   * into a failure instead of a hung test; it is not a timing assertion.
   */
  called(n: number, deadlineMs = 10_000): Promise<void> {
    if (this.calls.length >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the store was called ${this.calls.length} times, never ${n}`)), deadlineMs);
      this.#arrivals.push({ n, resolve: () => { clearTimeout(timer); resolve(); } });
    });
  }

  findSignRecord(accountId: string, address: string): Promise<SignRecord | undefined> {
    return this.#call(signCall(accountId, address), () => this.inner.findSignRecord(accountId, address));
  }

  listRoles(accountId: string, query: RoleQuery): Promise<RolePage> {
    return this.#call(rolesCall(accountId, query), () => this.inner.listRoles(accountId, query));
  }

  async #call<T>(name: string, read: () => Promise<T>): Promise<T> {
    this.calls.push(name);
    for (const a of this.#arrivals.filter((x) => this.calls.length >= x.n)) {
      this.#arrivals.splice(this.#arrivals.indexOf(a), 1);
      a.resolve();
    }
    const result = read();
    let failure: Error | undefined;
    if (this.#failure !== undefined) {
      failure = this.#failure.make();
      if (--this.#failure.times <= 0) this.#failure = undefined;
    }
    if (this.#holding) await new Promise<void>((go) => this.#held.push(go));
    if (failure !== undefined) throw failure;
    return result;
  }
}

/** A change source the test speaks through. */
class ManualChanges implements DirectoryChanges {
  readonly #listeners: DirectoryChangeListener[] = [];
  watch(listener: DirectoryChangeListener): void {
    this.#listeners.push(listener);
  }
  change(change: DirectoryChange): void {
    for (const l of this.#listeners) l.onChange(change);
  }
  gap(): void {
    for (const l of this.#listeners) l.onGap();
  }
}

interface Setup {
  clock: ManualClock;
  store: ProbeStore;
  changes: ManualChanges;
  /** A second source: the cache listens to every one it is given. */
  moreChanges: ManualChanges;
  directory: CachedDirectory;
  /** Raw JSON log lines. */
  logs: string[];
}

function setup(settings: Partial<DirectoryCacheSettings> = {}): Setup {
  const clock = new ManualClock();
  const store = new ProbeStore(new MemoryDirectory(DIRECTORY_FIXTURE));
  const changes = new ManualChanges();
  const moreChanges = new ManualChanges();
  const logs: string[] = [];
  const log = createLogger('info', { write: (line: string) => void logs.push(line) });
  const directory = createCachedDirectory({ store, changes: [changes, moreChanges], settings: { ...SETTINGS, ...settings }, clock, log });
  return { clock, store, changes, moreChanges, directory, logs };
}

/** Lets queued promise callbacks and I/O callbacks run: a few turns of the event loop. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Whether a promise has settled yet, observed without awaiting it. */
function track<T>(promise: Promise<T>): { settled: boolean; promise: Promise<T> } {
  const state = { settled: false, promise };
  promise.then(() => { state.settled = true; }, () => { state.settled = true; });
  return state;
}

const nonceOf = (record: SignRecord | undefined) => record?.signedNonce;
const descriptionsOf = (page: RolePage) => page.items.map((r) => r.description);

/** What the store is asked while `fn` runs. */
async function storeCallsDuring(store: ProbeStore, fn: () => Promise<unknown>): Promise<string[]> {
  const mark = store.calls.length;
  await fn();
  return store.calls.slice(mark).sort();
}

runDirectoryContract('cached (memory store behind createCachedDirectory)', async (data) => {
  const memory = new MemoryDirectory(data);
  const directory = createCachedDirectory({ store: memory, changes: [memory], settings: SETTINGS, clock: new ManualClock(), log: createLogger('silent') });
  return { directory, close: async () => {} };
});

/**
 * A fresh setup whose cache holds acct_a's record (nonce 42) and its first page of two roles
 * ('role 1', 'role 2'), after which the store changed to version(43) and the clock moved on by
 * `ageMs`: the copies are now `ageMs` old and differ from the store.
 */
async function cachedThenChanged(ageMs: number): Promise<Setup> {
  const fixture = setup();
  const { clock, store, directory } = fixture;
  await directory.findSignRecord('acct_a', ADDR);
  await directory.listRoles('acct_a', { offset: 0, limit: 2 });
  store.inner.load(version(43));
  clock.advance(ageMs);
  return fixture;
}

/**
 * 100 concurrent calls of `read` on a fresh cache whose store holds its calls: once the first
 * has begun and the event loop has turned, the store must still have seen that one call only;
 * then the store lets it go. Returns what the 100 calls resolved to.
 */
async function hundredConcurrentMisses<T>(read: (directory: CachedDirectory) => Promise<T>): Promise<{ results: T[]; store: ProbeStore; directory: CachedDirectory }> {
  const { store, directory } = setup();
  store.hold();
  const all = Array.from({ length: 100 }, () => read(directory));
  await store.called(1);
  await settle();
  assert.equal(store.count(), 1, 'one call while the first is still under way');
  store.release();
  return { results: await Promise.all(all), store, directory };
}

test('createCachedDirectory: concurrent misses share one store call', async (t) => {
  await t.test('100 concurrent findSignRecord misses for one key: one store call, all get the record', async () => {
    const { results: records, store, directory } = await hundredConcurrentMisses((directory) => directory.findSignRecord('acct_a', ADDR));
    const expected = await new MemoryDirectory(DIRECTORY_FIXTURE).findSignRecord('acct_a', ADDR);
    assert.ok(expected !== undefined);
    for (const record of records) assert.deepEqual(record, expected);
    assert.equal(store.count(), 1);
    assert.equal(directory.storeReads, 1);
  });

  await t.test('100 concurrent misses for an unknown address: one store call, all get undefined', async () => {
    const { results, store } = await hundredConcurrentMisses((directory) => directory.findSignRecord('acct_a', OTHER));
    assert.deepEqual(new Set(results), new Set([undefined]));
    assert.equal(store.count(), 1);
  });

  await t.test('100 concurrent listRoles misses for one query: one store call, all get the page', async () => {
    const query = { offset: 0, limit: 2 };
    const { results: pages, store, directory } = await hundredConcurrentMisses((directory) => directory.listRoles('acct_a', query));
    for (const page of pages) {
      assert.deepEqual(page.items.map((r) => r.id), [1, 2]);
      assert.equal(page.total, 5);
    }
    assert.equal(store.count(), 1);
    assert.equal(directory.storeReads, 1);
  });

  await t.test('different keys: one call each, however many callers per key', async () => {
    const { store, directory } = setup();
    store.hold();
    const signKeys: [string, string][] = [['acct_a', ADDR], ['acct_a', OTHER], ['acct_b', ADDR]];
    const roleQueries: [string, RoleQuery][] = [
      ['acct_a', { offset: 0, limit: 2 }],
      ['acct_a', { offset: 2, limit: 2 }],
      ['acct_a', { offset: 0, limit: 3 }],
      ['acct_a', { offset: 0, limit: 2, nameContains: 'odd' }],
      ['acct_b', { offset: 0, limit: 2 }],
    ];
    const all: Promise<unknown>[] = [];
    for (let i = 0; i < 10; i++) {
      for (const [acct, address] of signKeys) all.push(directory.findSignRecord(acct, address));
      for (const [acct, q] of roleQueries) all.push(directory.listRoles(acct, q));
    }
    await store.called(signKeys.length + roleQueries.length);
    await settle();
    store.release();
    const results = await Promise.all(all);
    assert.equal(nonceOf(results[0] as SignRecord), 42);
    assert.equal(results[1], undefined);
    assert.equal(results[2], undefined, 'acct_b has no record for acct_a\'s address');
    assert.deepEqual((results[6] as RolePage).items.map((r) => r.id), [1, 3], 'the name filter is part of the key');
    assert.deepEqual((results[7] as RolePage).items.map((r) => r.id), [9]);
    assert.deepEqual(store.calls.slice().sort(), [
      ...signKeys.map(([a, addr]) => signCall(a, addr)),
      ...roleQueries.map(([a, q]) => rolesCall(a, q)),
    ].sort());
  });
});

test('createCachedDirectory: ttl and stale-while-revalidate', async (t) => {
  await t.test('within ttlMs the store is not called', async () => {
    const { clock, store, directory } = setup();
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    await directory.listRoles('acct_a', { offset: 0, limit: 2 });
    assert.equal(store.count(), 2);
    store.inner.load(version(43));
    clock.advance(TTL - 1);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1', 'role 2']);
    assert.equal(store.count(), 2);
    assert.equal(directory.storeReads, 2);
  });

  await t.test('after ttlMs: the old value at once, one background refresh for many callers, then the new value', async () => {
    const { clock, store, directory } = await cachedThenChanged(TTL);
    store.hold();
    // The store holds every call: these can only resolve from the cache.
    const records = await Promise.all(Array.from({ length: 50 }, () => directory.findSignRecord('acct_a', ADDR)));
    const pages = await Promise.all(Array.from({ length: 50 }, () => directory.listRoles('acct_a', { offset: 0, limit: 2 })));
    assert.deepEqual(new Set(records.map(nonceOf)), new Set([42]));
    for (const page of pages) assert.deepEqual(descriptionsOf(page), ['role 1', 'role 2']);
    assert.equal(store.count(signCall('acct_a', ADDR)), 2, 'exactly one sign refresh');
    assert.equal(store.count(rolesCall('acct_a', { offset: 0, limit: 2 })), 2, 'exactly one roles refresh');
    // More callers while the refresh is still under way: still one.
    clock.advance(SWR - 1);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.equal(store.count(), 4);
    store.release();
    await settle();
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1 v43', 'role 2 v43']);
    assert.equal(store.count(), 4, 'the refreshed copies are fresh');
    assert.equal(directory.storeReads, 4);
  });

  await t.test('the last millisecond of staleWhileRevalidateMs is still answered at once', async () => {
    const { clock, store, directory } = setup();
    await directory.findSignRecord('acct_a', ADDR);
    clock.advance(TTL + SWR - 1);
    store.hold();
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.equal(store.pending, 1, 'a refresh is under way');
    store.release();
  });

  await t.test('after ttlMs + staleWhileRevalidateMs the caller waits for a fresh read', async () => {
    const { store, directory } = await cachedThenChanged(TTL + SWR);
    store.hold();
    const sign = track(directory.findSignRecord('acct_a', ADDR));
    const roles = track(directory.listRoles('acct_a', { offset: 0, limit: 2 }));
    await store.called(4);
    await settle();
    assert.equal(sign.settled, false, 'the sign record waits for the store');
    assert.equal(roles.settled, false, 'the page waits for the store');
    store.release();
    assert.equal(nonceOf(await sign.promise), 43);
    assert.deepEqual(descriptionsOf(await roles.promise), ['role 1 v43', 'role 2 v43']);
    assert.equal(store.count(), 4);
  });
});

test('createCachedDirectory: "no record" is cached for negativeTtlMs, never served stale', async (t) => {
  await t.test('an unknown address is not asked again within negativeTtlMs, then is', async () => {
    const { clock, store, directory } = setup();
    assert.equal(await directory.findSignRecord('acct_a', OTHER), undefined);
    assert.ok(await directory.findSignRecord('acct_a', ADDR));
    clock.advance(NEG_TTL - 1);
    assert.equal(await directory.findSignRecord('acct_a', OTHER), undefined);
    assert.equal(store.count(signCall('acct_a', OTHER)), 1);
    // The record is written; the cache still says "none" until negativeTtlMs is over.
    store.inner.load(version(42, [{ address: OTHER, signedNonce: 7, signedAt: '2026-03-01T12:00:00Z', signedExpiredAt: '2026-03-02T12:00:00Z' }]));
    assert.equal(await directory.findSignRecord('acct_a', OTHER), undefined);
    clock.advance(1);
    store.hold();
    const found = track(directory.findSignRecord('acct_a', OTHER));
    await store.called(3);
    await settle();
    assert.equal(found.settled, false, 'a "no record" past negativeTtlMs is not served while the store is asked again');
    store.release();
    assert.equal(nonceOf(await found.promise), 7);
    assert.equal(store.count(signCall('acct_a', OTHER)), 2);
    // A record of the same age is still fresh: negativeTtlMs is for "no record" only.
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.equal(store.count(signCall('acct_a', ADDR)), 1);
  });

  await t.test('still unknown: asked once per negativeTtlMs', async () => {
    const { clock, store, directory } = setup();
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 5; j++) assert.equal(await directory.findSignRecord('acct_a', OTHER), undefined);
      clock.advance(NEG_TTL);
    }
    assert.equal(store.count(), 3);
  });
});

test('createCachedDirectory: when the store fails', async (t) => {
  await t.test('the copy is served while its age < ttl + maxStaleMs, then the store\'s error; then recovery', async () => {
    const { clock, store, directory } = await cachedThenChanged(TTL + SWR);
    store.fail(() => new StoreUnavailable());
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1', 'role 2']);
    assert.equal(store.count(), 4, 'the store was asked, and failed');
    clock.advance(MAX_STALE - SWR - 1);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42, 'age ttl + maxStale - 1');
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1', 'role 2']);
    clock.advance(1);
    await assert.rejects(directory.findSignRecord('acct_a', ADDR), (err) => err instanceof StoreUnavailable && err.status === 503);
    await assert.rejects(directory.listRoles('acct_a', { offset: 0, limit: 2 }), (err) => err instanceof StoreUnavailable && err.status === 503);

    store.fail(() => new StoreTimeout());
    await assert.rejects(directory.findSignRecord('acct_a', ADDR), (err) => err instanceof StoreTimeout && err.status === 504 && err.code === 'store_timeout');

    store.recover();
    const calls = store.count();
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1 v43', 'role 2 v43']);
    assert.equal(store.count(), calls + 2);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
    assert.equal(store.count(), calls + 2, 'fresh again: cached');
  });

  await t.test('after a failed read the copy is served and the store not asked for it again for a second', async () => {
    const { clock, store, directory } = setup();
    await directory.findSignRecord('acct_a', ADDR);
    store.inner.load(version(43));
    clock.advance(TTL + SWR);
    store.fail(() => new StoreUnavailable());
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.equal(store.count(), 2);
    const storm = await Promise.all(Array.from({ length: 20 }, () => directory.findSignRecord('acct_a', ADDR)));
    assert.deepEqual(new Set(storm.map(nonceOf)), new Set([42]));
    clock.advance(RETRY_MS - 1);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.equal(store.count(), 2, 'not asked again within the second');
    // Another key is not paused by this one's failure.
    await assert.rejects(directory.findSignRecord('acct_a', OTHER), StoreUnavailable);
    assert.equal(store.count(), 3);
    clock.advance(1);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.equal(store.count(signCall('acct_a', ADDR)), 3, 'asked again after the second');
    store.recover();
    clock.advance(RETRY_MS);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
    assert.equal(store.count(signCall('acct_a', ADDR)), 4);
  });

  await t.test('a failed background refresh keeps the copy, and is not retried by every caller', async () => {
    const { clock, store, directory } = setup({ staleWhileRevalidateMs: 10 * RETRY_MS });
    await directory.findSignRecord('acct_a', ADDR);
    clock.advance(TTL);
    store.fail(() => new StoreUnavailable());
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    await settle();
    assert.equal(store.count(), 2);
    for (let i = 0; i < 20; i++) assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    await settle();
    clock.advance(RETRY_MS - 1);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    await settle();
    assert.equal(store.count(), 2, 'one failed refresh, then a pause');
    clock.advance(1);
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    await settle();
    assert.equal(store.count(), 3, 'the next refresh after the pause');
    store.recover();
    store.inner.load(version(43));
    clock.advance(RETRY_MS);
    store.hold();
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42, 'still answered at once');
    assert.equal(store.pending, 1);
    store.release();
    await settle();
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
    assert.equal(store.count(), 4);
  });

  await t.test('a change notice (or a gap) ends the pause for what it covers, and only for that', async () => {
    const { clock, store, changes, directory } = setup();
    await directory.findSignRecord('acct_a', ADDR);
    await directory.listRoles('acct_a', { offset: 0, limit: 2 });
    clock.advance(TTL + SWR);
    store.fail(() => new StoreTimeout());
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1', 'role 2']);
    assert.equal(store.count(), 4);
    changes.change({ kind: 'sign', accountId: 'acct_a', address: OTHER });
    changes.change({ kind: 'roles', accountId: 'acct_b' });
    assert.deepEqual(await storeCallsDuring(store, async () => {
      await directory.findSignRecord('acct_a', ADDR);
      await directory.listRoles('acct_a', { offset: 0, limit: 2 });
    }), [], 'notices for other things leave the pause alone');
    changes.change({ kind: 'sign', accountId: 'acct_a', address: ADDR });
    assert.deepEqual(await storeCallsDuring(store, async () => {
      assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42, 'the store still fails: the copy');
      await directory.listRoles('acct_a', { offset: 0, limit: 2 });
    }), [signCall('acct_a', ADDR)]);
    changes.gap();
    store.recover();
    store.inner.load(version(43));
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1 v43', 'role 2 v43']);
    assert.equal(store.count(), 7);
  });

  await t.test('bad data with a copy to serve: the copy, and the log names the problem (not as an outage)', async () => {
    const { clock, store, directory, logs } = setup();
    await directory.listRoles('acct_a', { offset: 0, limit: 2 });
    clock.advance(TTL + SWR);
    store.fail(() => new BadStoreData(new Error('role record: items.1.id: expected a whole number')));
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1', 'role 2']);
    const lines = logs.map((l) => JSON.parse(l) as { level: number; msg: string; problem?: string });
    assert.equal(lines.length, 1, logs.join('\n'));
    assert.equal(lines[0]!.level, 40);
    assert.match(lines[0]!.msg, /directory store returned data the gateway cannot use/);
    assert.equal(lines[0]!.problem, 'role record: items.1.id: expected a whole number');
    // No copy: the 502 is the answer.
    await assert.rejects(directory.listRoles('acct_a', { offset: 2, limit: 2 }), (err) => err instanceof BadStoreData && err.status === 502);
    assert.ok(!logs.some((l) => l.includes('directory store failing')));
  });

  await t.test('a cold miss propagates the store\'s own error, to every caller sharing the call', async () => {
    for (const make of [() => new StoreUnavailable(), () => new StoreTimeout(), () => new BadStoreData(new Error('role x: id: bad'))]) {
      const { store, directory } = setup();
      const errors: Error[] = [];
      store.fail(() => {
        const err = make();
        errors.push(err);
        return err;
      });
      store.hold();
      const callers = Array.from({ length: 20 }, () => directory.findSignRecord('acct_a', ADDR));
      const pageCallers = Array.from({ length: 20 }, () => directory.listRoles('acct_a', { offset: 0, limit: 2 }));
      await store.called(2);
      await settle();
      store.release();
      const outcomes = await Promise.allSettled([...callers, ...pageCallers]);
      assert.equal(store.count(), 2, `${errors[0]!.name}: one call per key`);
      for (const [i, outcome] of outcomes.entries()) {
        assert.equal(outcome.status, 'rejected');
        const reason: unknown = (outcome as PromiseRejectedResult).reason;
        assert.equal(reason, errors[i < 20 ? 0 : 1], `${errors[0]!.name}: the store's error itself, not another`);
        assert.equal((reason as Error).constructor, errors[0]!.constructor);
      }
      // Nothing was cached from the failure: the store is asked again, and now answers.
      store.recover();
      assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
      assert.equal(store.count(), 3);
    }
  });

  await t.test('StoreTimeout stays a StoreTimeout (504), StoreUnavailable a 503', async () => {
    const { store, directory } = setup();
    store.fail(() => new StoreTimeout(), 1);
    const timeout = await directory.findSignRecord('acct_a', ADDR).catch((err: unknown) => err);
    assert.ok(timeout instanceof StoreTimeout, String(timeout));
    assert.ok(!(timeout instanceof StoreUnavailable));
    assert.equal(timeout.status, 504);
    store.fail(() => new StoreUnavailable(), 1);
    const unavailable = await directory.listRoles('acct_b', { offset: 0, limit: 1 }).catch((err: unknown) => err);
    assert.ok(unavailable instanceof StoreUnavailable, String(unavailable));
    assert.equal(unavailable.status, 503);
  });

  await t.test('a "no record" is served as stale as a record is (no store, within negativeTtl + maxStale)', async () => {
    const { clock, store, directory } = setup();
    assert.equal(await directory.findSignRecord('acct_a', OTHER), undefined);
    clock.advance(NEG_TTL + MAX_STALE - 1);
    store.fail(() => new StoreUnavailable());
    assert.equal(await directory.findSignRecord('acct_a', OTHER), undefined);
    clock.advance(1);
    await assert.rejects(directory.findSignRecord('acct_a', OTHER), StoreUnavailable);
  });
});

test('createCachedDirectory: change notices', async (t) => {
  const { store, changes, moreChanges, directory } = setup();
  const signKeys: [string, string][] = [['acct_a', ADDR], ['acct_a', OTHER], ['acct_b', ADDR]];
  const roleQueries: [string, RoleQuery][] = [
    ['acct_a', { offset: 0, limit: 2 }],
    ['acct_a', { offset: 2, limit: 2 }],
    ['acct_a', { offset: 0, limit: 10, nameContains: 'odd' }],
    ['acct_b', { offset: 0, limit: 10 }],
  ];
  const readAll = () => storeCallsDuring(store, async () => {
    for (const [acct, address] of signKeys) await directory.findSignRecord(acct, address);
    for (const [acct, q] of roleQueries) await directory.listRoles(acct, q);
  });
  const acctARoles = roleQueries.filter(([a]) => a === 'acct_a').map(([a, q]) => rolesCall(a, q));
  const acctASign = signKeys.filter(([a]) => a === 'acct_a').map(([a, addr]) => signCall(a, addr));

  await t.test('warm: everything read once, then nothing', async () => {
    assert.equal((await readAll()).length, signKeys.length + roleQueries.length);
    assert.deepEqual(await readAll(), []);
  });

  await t.test('{kind:"sign"} sends the next read of that address (and only it) to the store', async () => {
    changes.change({ kind: 'sign', accountId: 'acct_a', address: ADDR });
    assert.deepEqual(await readAll(), [signCall('acct_a', ADDR)]);
    assert.deepEqual(await readAll(), []);
    changes.change({ kind: 'sign', accountId: 'acct_b', address: ADDR });
    assert.deepEqual(await readAll(), [signCall('acct_b', ADDR)], 'another account\'s notice for the same address');
  });

  await t.test('{kind:"roles"} sends every page of that account\'s roles, and nothing else', async () => {
    changes.change({ kind: 'roles', accountId: 'acct_a' });
    assert.deepEqual(await readAll(), acctARoles.slice().sort());
    assert.deepEqual(await readAll(), []);
  });

  await t.test('{kind:"account"}: the account\'s roles and sign records, not another account\'s', async () => {
    changes.change({ kind: 'account', accountId: 'acct_a' });
    assert.deepEqual(await readAll(), [...acctARoles, ...acctASign].sort());
    assert.deepEqual(await readAll(), []);
  });

  await t.test('onGap: everything', async () => {
    changes.gap();
    assert.deepEqual(await readAll(), [...signKeys.map(([a, addr]) => signCall(a, addr)), ...roleQueries.map(([a, q]) => rolesCall(a, q))].sort());
    assert.deepEqual(await readAll(), []);
  });

  await t.test('every source given in `changes` is heard', async () => {
    moreChanges.change({ kind: 'roles', accountId: 'acct_b' });
    assert.deepEqual(await readAll(), [rolesCall('acct_b', { offset: 0, limit: 10 })]);
    moreChanges.gap();
    assert.equal((await readAll()).length, signKeys.length + roleQueries.length);
  });

  await t.test('a notice for an account nobody read changes nothing', async () => {
    changes.change({ kind: 'account', accountId: 'acct_none' });
    changes.change({ kind: 'sign', accountId: 'acct_a', address: `0x${'2'.repeat(40)}` });
    assert.deepEqual(await readAll(), []);
  });
});

test('createCachedDirectory: a read under way when a notice arrives is not trusted', async (t) => {
  const notices: [string, (c: ManualChanges) => void][] = [
    ['sign notice', (c) => c.change({ kind: 'sign', accountId: 'acct_a', address: ADDR })],
    ['account notice', (c) => c.change({ kind: 'account', accountId: 'acct_a' })],
    ['gap', (c) => c.gap()],
  ];
  for (const [what, notify] of notices) {
    /** A read of acct_a's record, held by the store, is under way when the store changes and `notify` tells the cache. */
    const readUnderWayAtNotice = async () => {
      const { store, changes, directory } = setup();
      store.hold();
      const early = directory.findSignRecord('acct_a', ADDR);
      await store.called(1);
      store.inner.load(version(43));
      notify(changes);
      return { store, directory, early };
    };

    await t.test(`${what}: the caller that began before it gets the old read; the next caller reads again`, async () => {
      const { store, directory, early } = await readUnderWayAtNotice();
      store.release();
      assert.equal(nonceOf(await early), 42, 'this read began before the change');
      assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
      assert.equal(store.count(), 2);
      assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
      assert.equal(store.count(), 2);
    });

    await t.test(`${what}: a caller after it does not settle for a read that began before it`, async () => {
      const { store, directory, early } = await readUnderWayAtNotice();
      const late = directory.findSignRecord('acct_a', ADDR);
      await settle();
      store.release();
      assert.equal(nonceOf(await early), 42);
      assert.equal(nonceOf(await late), 43, 'the late caller was told of the change');
      assert.equal(store.count(), 2);
    });
  }

  await t.test('a roles notice during a page read: the next caller reads the page again', async () => {
    const { store, changes, directory } = setup();
    await directory.listRoles('acct_a', { offset: 0, limit: 2 });
    changes.change({ kind: 'roles', accountId: 'acct_a' });
    store.hold();
    const early = directory.listRoles('acct_a', { offset: 0, limit: 2 });
    await store.called(2);
    store.inner.load(version(43));
    changes.change({ kind: 'roles', accountId: 'acct_a' });
    store.release();
    assert.deepEqual(descriptionsOf(await early), ['role 1', 'role 2']);
    assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1 v43', 'role 2 v43']);
    assert.equal(store.count(), 3);
  });

  await t.test('a background refresh under way when a notice arrives is not trusted either', async () => {
    const { clock, store, changes, directory } = setup();
    await directory.findSignRecord('acct_a', ADDR);
    clock.advance(TTL);
    store.hold();
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
    await store.called(2);
    store.inner.load(version(43));
    changes.change({ kind: 'sign', accountId: 'acct_a', address: ADDR });
    const late = directory.findSignRecord('acct_a', ADDR);
    await settle();
    store.release();
    assert.equal(nonceOf(await late), 43);
    assert.equal(store.count(), 3);
  });
});

test('createCachedDirectory: an invalidated copy is still served while the store fails', async () => {
  const { clock, store, changes, directory } = setup();
  await directory.findSignRecord('acct_a', ADDR);
  await directory.findSignRecord('acct_a', OTHER);
  await directory.listRoles('acct_a', { offset: 0, limit: 2 });
  changes.change({ kind: 'account', accountId: 'acct_a' });
  store.fail(() => new StoreTimeout());
  assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
  assert.equal(await directory.findSignRecord('acct_a', OTHER), undefined);
  assert.deepEqual(descriptionsOf(await directory.listRoles('acct_a', { offset: 0, limit: 2 })), ['role 1', 'role 2']);
  assert.equal(store.count(), 6, 'each was asked for, being untrusted');
  changes.gap();
  clock.advance(TTL + MAX_STALE - 1);
  assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
  clock.advance(1);
  await assert.rejects(directory.findSignRecord('acct_a', ADDR), StoreTimeout);
  store.recover();
  store.inner.load(version(43));
  assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
});

test('createCachedDirectory: bounds', async (t) => {
  await t.test('a read that finishes after its entry was evicted still answers its callers', async () => {
    const { store, directory } = setup({ maxEntries: 1 });
    store.hold();
    const sign = directory.findSignRecord('acct_a', ADDR);
    const page = directory.listRoles('acct_a', { offset: 0, limit: 2 });
    const none = directory.findSignRecord('acct_b', ADDR);
    await store.called(3);
    store.release();
    assert.equal(nonceOf(await sign), 42);
    assert.deepEqual((await page).items.map((r) => r.id), [1, 2]);
    assert.equal(await none, undefined);
    assert.equal(store.count(), 3);
  });

  await t.test('a notice forgotten for space still distrusts what it covered', async () => {
    // maxEntries bounds the remembered notices too: with 2, the third notice pushes out the first.
    const { store, changes, directory } = setup({ maxEntries: 2 });
    await directory.findSignRecord('acct_a', ADDR);
    store.inner.load(version(43));
    changes.change({ kind: 'sign', accountId: 'acct_a', address: ADDR });
    changes.change({ kind: 'roles', accountId: 'acct_b' });
    changes.change({ kind: 'sign', accountId: 'acct_b', address: OTHER });
    assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 43);
    assert.equal(store.count(), 2);
  });

  await t.test('maxEntries: the least recently used entry goes', async () => {
    const { store, directory } = setup({ maxEntries: 2, negativeTtlMs: 60_000 });
    const a = () => directory.findSignRecord('acct_a', ADDR);
    const b = () => directory.findSignRecord('acct_a', OTHER);
    const c = () => directory.listRoles('acct_a', { offset: 0, limit: 2 });
    await a();
    await b();
    await a(); // a is now the most recently used
    assert.equal(store.count(), 2);
    await c(); // evicts b
    assert.equal(store.count(), 3);
    await a();
    assert.equal(store.count(), 3, 'a stayed');
    await b();
    assert.equal(store.count(signCall('acct_a', OTHER)), 2, 'b was evicted and is read again');
    assert.equal(store.count(signCall('acct_a', ADDR)), 1);
  });

  await t.test('maxEntries: 10 keys through a cache of 3, one kept warm', async () => {
    const { store, directory } = setup({ maxEntries: 3, negativeTtlMs: 60_000 });
    const address = (i: number) => `0x${i.toString(16).padStart(40, '0')}`;
    await directory.findSignRecord('acct_a', ADDR);
    for (let i = 1; i <= 10; i++) {
      await directory.findSignRecord('acct_a', address(i));
      await directory.findSignRecord('acct_a', ADDR);
    }
    assert.equal(store.count(signCall('acct_a', ADDR)), 1);
    const mark = store.count();
    await directory.findSignRecord('acct_a', address(10));
    assert.equal(store.count(), mark, 'the last one read is still there');
    await directory.findSignRecord('acct_a', address(1));
    assert.equal(store.count(), mark + 1, 'the first one read went');
  });

  await t.test('maxBytes: the least recently used entries go when the bytes run out', async () => {
    // Entries are estimated at 200 bytes and more each: 10 of them cannot fit in 1500 bytes.
    const { store, directory } = setup({ maxEntries: 1000, maxBytes: 1500, negativeTtlMs: 60_000 });
    const address = (i: number) => `0x${i.toString(16).padStart(40, '0')}`;
    await directory.findSignRecord('acct_a', address(0));
    for (let i = 1; i < 10; i++) {
      await directory.findSignRecord('acct_a', address(i));
      await directory.findSignRecord('acct_a', address(0));
    }
    assert.equal(store.count(), 10);
    await directory.findSignRecord('acct_a', address(0));
    await directory.findSignRecord('acct_a', address(9));
    assert.equal(store.count(), 10, 'the most recently used are still there');
    await directory.findSignRecord('acct_a', address(1));
    assert.equal(store.count(signCall('acct_a', address(1))), 2, 'the least recently used went');
  });

  await t.test('maxBytes: a large page pushes out smaller entries', async () => {
    // Estimated at about 300 bytes per "no record" and 1000 for the five-role page: the four
    // small ones fit in 2000 bytes, the page does not fit beside all four.
    const { store, directory } = setup({ maxBytes: 2000, negativeTtlMs: 60_000 });
    const address = (i: number) => `0x${i.toString(16).padStart(40, '0')}`;
    for (let i = 0; i < 4; i++) await directory.findSignRecord('acct_a', address(i));
    for (let i = 0; i < 4; i++) await directory.findSignRecord('acct_a', address(i));
    assert.equal(store.count(), 4, 'four small entries fit');
    await directory.listRoles('acct_a', { offset: 0, limit: 10 });
    await directory.listRoles('acct_a', { offset: 0, limit: 10 });
    assert.equal(store.count(), 5, 'the page is kept');
    await directory.findSignRecord('acct_a', address(0));
    assert.equal(store.count(signCall('acct_a', address(0))), 2, 'the oldest small entry made room');
  });
});

test('createCachedDirectory: the log says once when the store starts failing and once when it answers again', async () => {
  const { clock, store, directory, logs } = setup();
  const lines = () => logs.map((l) => JSON.parse(l) as { level: number; msg: string; code?: string });
  const failing = () => lines().filter((l) => l.msg.startsWith('directory store failing'));
  const answering = () => lines().filter((l) => l.msg === 'directory store answering again');

  await directory.findSignRecord('acct_a', ADDR);
  await directory.listRoles('acct_a', { offset: 0, limit: 2 });
  assert.deepEqual(lines(), [], 'nothing to say while the store answers');

  clock.advance(TTL + SWR);
  store.fail(() => new StoreUnavailable());
  assert.equal(nonceOf(await directory.findSignRecord('acct_a', ADDR)), 42);
  await directory.listRoles('acct_a', { offset: 0, limit: 2 });
  await assert.rejects(directory.findSignRecord('acct_a', OTHER), StoreUnavailable);
  await assert.rejects(directory.listRoles('acct_b', { offset: 0, limit: 2 }), StoreUnavailable);
  await assert.rejects(directory.findSignRecord('acct_b', OTHER), StoreUnavailable);
  assert.equal(store.count(), 7);
  assert.equal(failing().length, 1, 'one warning per outage');
  assert.equal(failing()[0]!.level, 40);
  assert.equal(failing()[0]!.code, 'store_unavailable');
  assert.equal(answering().length, 0);

  store.recover();
  await directory.findSignRecord('acct_a', OTHER);
  await directory.findSignRecord('acct_b', OTHER);
  assert.equal(answering().length, 1);
  assert.equal(answering()[0]!.level, 30);
  assert.equal(failing().length, 1);

  // A second outage is a second warning; this time a timeout.
  store.fail(() => new StoreTimeout());
  await assert.rejects(directory.listRoles('acct_b', { offset: 0, limit: 2 }), StoreTimeout);
  await assert.rejects(directory.listRoles('acct_b', { offset: 1, limit: 2 }), StoreTimeout);
  assert.equal(failing().length, 2);
  assert.equal(failing()[1]!.code, 'store_timeout');
  store.recover();
  await directory.listRoles('acct_b', { offset: 0, limit: 2 });
  assert.equal(answering().length, 2);
  assert.equal(lines().length, 4, 'and nothing else');
});

test('createCachedDirectory: bad data in one record is not an outage in the log', async () => {
  const { store, directory, logs } = setup();
  store.fail(() => new BadStoreData(new Error('role x: id: expected digits')), 1);
  await assert.rejects(directory.listRoles('acct_a', { offset: 0, limit: 2 }), (err) => err instanceof BadStoreData && err.status === 502);
  assert.deepEqual(await directory.findSignRecord('acct_a', OTHER), undefined);
  assert.deepEqual(logs, []);
});
