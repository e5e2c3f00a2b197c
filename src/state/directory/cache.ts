/**
 * The one cache in front of every directory store (lru-cache). A sign record or a page of roles
 * read from the store is answered from here:
 *
 *   age < ttl                      served as is (for "no record" answers, negativeTtl)
 *   age < ttl + staleWhileRevalidate   served as is while one call refreshes it in the background
 *   older, or invalidated          the caller waits for one fresh read; if that read fails or
 *                                  times out, the copy is served while age < ttl + maxStale
 *                                  (and the store is asked again for it at most once a
 *                                  second), else the store's error (503, 504, 502) is the answer
 *
 * Concurrent misses for one key share one store call (lru-cache `fetch`), so a storm of callers
 * costs the store one read per key. Size is bounded by entries and by estimated bytes.
 *
 * Invalidation never deletes: a change notice (or a gap in the notices) marks what was read
 * before it as untrusted, so a read that raced the change is refused as well, and the old copy
 * is still there to serve if the store then fails. Notices are numbered by one counter `seq`:
 * a copy is trusted while the read that made it began at or after the last notice covering it
 * (`changedAt`, per account or address) and after the last gap (`floor`).
 */
import { LRUCache } from 'lru-cache';
import { BadStoreData, GatewayError, StoreUnavailable } from '../../errors/errors.js';
import type { Logger } from '../../telemetry/log.js';
import type { CacheResult, Metrics } from '../../telemetry/metrics.js';
import type { Clock } from '../../util/clock.js';
import { entryBound } from '../../util/lru.js';
import type { Directory, DirectoryChange, DirectoryChanges, RolePage, RoleQuery, SignRecord } from './store.js';

export interface DirectoryCacheSettings {
  ttlMs: number;
  staleWhileRevalidateMs: number;
  negativeTtlMs: number;
  maxStaleMs: number;
  maxEntries: number;
  maxBytes: number;
}

interface Entry {
  /** null: the store has no such record (cached negatively). */
  value: SignRecord | RolePage | null;
  /** When the read that made this copy began. */
  at: number;
  /** `seq` when that read began. */
  seq: number;
  ttl: number;
  /** Set when a refresh failed and this copy was served instead: no new read before `at`, unless a notice came since (`seq`). */
  retry?: { at: number; seq: number };
}

/** While the store fails, each stale entry asks it again at most this often. */
const RETRY_FAILED_MS = 1000;

/** The store read a fetch makes (lru-cache passes it as the fetch's context). */
type Read = () => Promise<SignRecord | RolePage | undefined>;

export interface CachedDirectory extends Directory {
  /** Store reads begun so far (tests count them: a storm must cost one). */
  readonly storeReads: number;
}

export function createCachedDirectory({ store, changes, settings, clock, log, metrics }: {
  store: Directory;
  changes: DirectoryChanges[];
  settings: DirectoryCacheSettings;
  clock: Clock;
  log: Logger;
  /** Where hits, misses, stale answers and store failures are counted, if anywhere. */
  metrics?: Pick<Metrics, 'directoryCache' | 'directoryStoreFailed'>;
}): CachedDirectory {
  const state = createCacheState(settings, clock, log, metrics);
  watchChanges(state, changes);

  return {
    get storeReads() {
      return state.storeReads;
    },

    async findSignRecord(accountId, address) {
      const key = signScope(accountId, address);
      const value = await read(state, key, trustedFrom(state, key, signScope(accountId, '')), () => store.findSignRecord(accountId, address));
      return (value as SignRecord | null) ?? undefined;
    },

    async listRoles(accountId, query: RoleQuery) {
      const key = `r\u0000${accountId}\u0000${query.offset}\u0000${query.limit}\u0000${query.nameContains ?? ''}`;
      const scope = rolesScope(accountId);
      return (await read(state, key, trustedFrom(state, scope), () => store.listRoles(accountId, query))) as RolePage;
    },
  };
}

/** What the cache's steps share: its entries, the notices heard, and the store's health. */
interface CacheState {
  readonly settings: DirectoryCacheSettings;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'directoryCache' | 'directoryStoreFailed'> | undefined;
  /** The number of the last notice (or gap). */
  seq: number;
  /** Copies whose read began before this are untrusted: a gap, or a notice forgotten. */
  floor: number;
  /** The `seq` of the last notice per scope (account or address). */
  readonly changedAt: LRUCache<string, number>;
  readonly entries: LRUCache<string, Entry, Read>;
  storeReads: number;
  /** The last store read failed (said once when it starts failing, once when it answers again). */
  failing: boolean;
}

function createCacheState(settings: DirectoryCacheSettings, clock: Clock, log: Logger, metrics: CacheState['metrics']): CacheState {
  const state: Omit<CacheState, 'entries'> & { entries?: CacheState['entries'] } = {
    settings, clock, log, metrics, seq: 0, floor: 0, storeReads: 0, failing: false,
    changedAt: new LRUCache<string, number>({
      ...entryBound(settings.maxEntries),
      // Looked up with peek, so the oldest notices go first. A forgotten notice must not make an
      // old copy trusted again: every copy read before it is distrusted with it.
      dispose: (at, _scope, reason) => {
        if (reason === 'evict') state.floor = Math.max(state.floor, at);
      },
    }),
  };
  // Both bounds through maxSize (lru-cache's `max` would allocate every slot up front, see
  // util/lru.ts): each entry counts at least maxBytes / maxEntries, so a full cache holds at
  // most maxEntries entries and at most maxBytes estimated bytes.
  const minEntrySize = Math.ceil(settings.maxBytes / settings.maxEntries);
  state.entries = new LRUCache<string, Entry, Read>({
    maxSize: minEntrySize * settings.maxEntries,
    sizeCalculation: (entry, key) => Math.max(minEntrySize, estimateBytes(key, entry.value)),
    // No TTL here: expiry is judged in read() (the ages above); lru-cache's TTL would drop the
    // stale copy that an outage is answered from.
    noDeleteOnFetchRejection: true,
    // A read that finishes after its entry was evicted still answers the callers waiting on it.
    ignoreFetchAbort: true,
    fetchMethod: (_key, stale, { context }) => readStore(state as CacheState, stale, context),
  });
  return state as CacheState;
}

/** One store read, made by the entries' fetch: the entry it makes, or the store's error. */
async function readStore(state: CacheState, stale: Entry | undefined, load: Read): Promise<Entry> {
  const { clock, log, metrics } = state;
  const at = clock.now();
  const startedSeq = state.seq;
  state.storeReads++;
  let value;
  try {
    value = await load();
  } catch (err) {
    metrics?.directoryStoreFailed();
    // The copy this read was to replace is served meanwhile (read()); the store is not asked
    // for it again for a while, in the foreground or the background.
    if (stale !== undefined) stale.retry = { at: clock.now() + RETRY_FAILED_MS, seq: startedSeq };
    // Bad data in one record is that record's problem, not an outage (logged in read()).
    if (!state.failing && !(err instanceof BadStoreData)) {
      state.failing = true;
      log.warn({ code: err instanceof GatewayError ? err.code : undefined }, 'directory store failing: cached copies are served while they are within directory.cache.maxStaleMs');
    }
    throw err;
  }
  if (state.failing) {
    state.failing = false;
    log.info('directory store answering again');
  }
  const { ttlMs, negativeTtlMs } = state.settings;
  return { value: value ?? null, at, seq: startedSeq, ttl: value === undefined ? negativeTtlMs : ttlMs };
}

/** The seq from which a copy under these scopes is trusted. */
function trustedFrom({ changedAt, floor }: CacheState, scope: string, wider?: string): number {
  return changedAt.size === 0
    ? floor
    : Math.max(floor, changedAt.peek(scope) ?? 0, wider === undefined ? 0 : changedAt.peek(wider) ?? 0);
}

async function read(state: CacheState, key: string, trustFrom: number, load: Read): Promise<SignRecord | RolePage | null> {
  const { clock, log, entries: cache } = state;
  const { staleWhileRevalidateMs, maxStaleMs } = state.settings;
  const now = clock.now();
  const kept = cache.get(key);
  if (kept !== undefined) {
    const age = now - kept.at;
    const trusted = kept.seq >= trustFrom;
    if (trusted && age < kept.ttl) {
      counted(state, 'hit');
      return kept.value;
    }
    // The store failed this entry's last read moments ago, and nothing changed since: not asked again yet.
    const { retry } = kept;
    if (retry !== undefined && now < retry.at && retry.seq >= trustFrom && age < kept.ttl + maxStaleMs) {
      counted(state, 'stale');
      return kept.value;
    }
    // Not for "no record": a record just written should appear within negativeTtl.
    if (trusted && kept.value !== null && age < kept.ttl + staleWhileRevalidateMs) {
      // One background refresh (lru-cache keeps it to one); its failure keeps this copy.
      cache.fetch(key, { context: load, forceRefresh: true, allowStale: true }).catch(() => {});
      counted(state, 'stale');
      return kept.value;
    }
  }
  counted(state, 'miss');
  try {
    const fetch = () => cache.fetch(key, { context: load, forceRefresh: true, allowStale: false });
    let entry = await fetch();
    // Joined a read that began before the change this caller was told of: read once more.
    if (entry !== undefined && entry.seq < trustFrom) entry = await fetch();
    if (entry === undefined) throw new StoreUnavailable();
    return entry.value;
  } catch (err) {
    if (kept !== undefined && clock.now() - kept.at < kept.ttl + maxStaleMs) {
      // Unanswered, the error would be logged by the boundary; answered stale, it is said here.
      if (err instanceof BadStoreData) {
        log.warn({ problem: err.cause instanceof Error ? err.cause.message : undefined }, 'directory store returned data the gateway cannot use: served the last good copy');
      }
      counted(state, 'stale');
      return kept.value;
    }
    throw err;
  }
}

function counted(state: CacheState, result: CacheResult): void {
  state.metrics?.directoryCache(result);
}

/** Distrusts, from each notice on, what was read before it under its scope, and everything after a gap. */
function watchChanges(state: CacheState, changes: DirectoryChanges[]): void {
  const invalidate = (scope: string) => state.changedAt.set(scope, ++state.seq);
  const onChange = (change: DirectoryChange) => {
    if (change.kind === 'sign') invalidate(signScope(change.accountId, change.address));
    else if (change.kind === 'roles') invalidate(rolesScope(change.accountId));
    else {
      invalidate(rolesScope(change.accountId));
      invalidate(signScope(change.accountId, ''));
    }
  };
  for (const source of changes) {
    source.watch({
      onChange,
      onGap() {
        state.floor = ++state.seq;
      },
    });
  }
}

/** Scopes double as cache keys for sign records; '' for the address means the whole account. */
function signScope(accountId: string, address: string): string {
  return `s\u0000${accountId}\u0000${address}`;
}

function rolesScope(accountId: string): string {
  return `r\u0000${accountId}`;
}

/**
 * A rough size in bytes: two per character of the key and of the value's JSON, plus the
 * objects around them. Only used to bound the cache, so cheap beats exact; computed once per
 * store read, never per hit.
 */
function estimateBytes(key: string, value: Entry['value']): number {
  return 2 * key.length + (value === null ? 0 : 2 * JSON.stringify(value).length) + 200;
}
