/**
 * The verified-access-token cache: what verifying a token produced, keyed by the exact token
 * string, so that a token presented again costs a map lookup instead of a signature check.
 *
 * What it refuses to do, and why it is safe (docs/tokens.md, "The verified-token cache"):
 * - only tokens that passed every check go in (the caller puts them there; failures are not
 *   cached: one changed byte makes a new key, so a negative cache would only be memory that
 *   whoever sends garbage gets to fill);
 * - the key is the whole token, so a tampered sibling of a cached token is a miss and is
 *   verified in full;
 * - bounded in entries (`max`) and in bytes (`maxSize`, an estimate of each entry's heap);
 *   the least recently used go first;
 * - an entry lives at most until its token's `exp` plus the clock skew (by the gateway's
 *   clock), and the caller re-checks the times on every hit anyway;
 * - the caller keeps with each entry the verifier that checked it, and drops the entries of
 *   a key that was removed or re-bound (signer.ts `useKeys`).
 * Revocation (token resets), scopes and rate limits are not decided here: they run after
 * verification on every request, hit or miss (auth/bearer.ts, proxy/admission.ts).
 * test/unit/verified-tokens.test.ts and test/http/token-cache.test.ts hold it.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../util/clock.js';

/**
 * Heap an entry costs beyond two bytes per character of its token (the token string, kept
 * alive with the header it was cut from, and the claims decoded from it): lru-cache's slots,
 * its Map entry, the entry and claims objects. Measured (heap used after GC, 100,000 entries of
 * 444- and 824-character tokens: 865 and 1,530 bytes each, plus about 44 bytes of slots
 * allocated up front; /work/notes/cache-17.md), then rounded up, so the byte bound errs on
 * the safe side.
 */
const ENTRY_OVERHEAD_BYTES = 160;

/** The bytes an entry is counted as, against maxBytes. */
export function entryBytes(token: string): number {
  return ENTRY_OVERHEAD_BYTES + 2 * token.length;
}

export interface VerifiedTokenCacheOptions {
  /** Most entries; 0 turns the cache off. */
  maxEntries: number;
  /** Most bytes (estimated heap of the entries). */
  maxBytes: number;
  clock: Clock;
}

export interface VerifiedTokenStats {
  entries: number;
  /** Estimated bytes held, as counted against maxBytes. */
  bytes: number;
}

export interface VerifiedTokenCache<V extends object> {
  /** The entry of exactly this token string, unless it has passed its time. */
  get(token: string): V | undefined;
  /** Remembers a token that passed every check, until `expiresAtMs` (gateway clock). */
  remember(token: string, entry: V, expiresAtMs: number): void;
  /** Forgets one token (its hit was refused). */
  forget(token: string): void;
  /** Forgets every entry for which `shouldDrop` is true (a signing key removed or re-bound). */
  dropWhere(shouldDrop: (entry: V) => boolean): void;
  stats(): VerifiedTokenStats;
}

export function createVerifiedTokenCache<V extends object>({ maxEntries, maxBytes, clock }: VerifiedTokenCacheOptions): VerifiedTokenCache<V> {
  if (maxEntries === 0) {
    return { get: () => undefined, remember: () => {}, forget: () => {}, dropWhere: () => {}, stats: () => ({ entries: 0, bytes: 0 }) };
  }
  const cache = new LRUCache<string, V>({
    max: maxEntries,
    maxSize: maxBytes,
    sizeCalculation: (_entry, token) => entryBytes(token),
    // The gateway's clock, read at each look-up (tests move it; no timer per entry).
    perf: { now: () => clock.now() },
    ttlResolution: 0,
    ttlAutopurge: false,
    // A look-up is all a hit costs: no ttl refresh, no stale entry handed out.
    updateAgeOnGet: false,
    allowStale: false,
  });
  return {
    get: (token) => cache.get(token),
    remember(token, entry, expiresAtMs) {
      const ttl = expiresAtMs - clock.now();
      // An entry too big for the whole budget is simply not kept (lru-cache would refuse it too).
      if (ttl > 0 && entryBytes(token) <= maxBytes) cache.set(token, entry, { ttl });
    },
    forget(token) {
      cache.delete(token);
    },
    dropWhere(shouldDrop) {
      const doomed: string[] = [];
      for (const [token, entry] of cache.entries()) if (shouldDrop(entry)) doomed.push(token);
      for (const token of doomed) cache.delete(token);
    },
    stats: () => ({ entries: cache.size, bytes: cache.calculatedSize }),
  };
}
