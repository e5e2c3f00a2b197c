/**
 * Checking an API settings token (`gwst_…`, domain/settings-token.ts) presented as a bearer
 * token, for every path an access token opens. The order keeps store round trips off the
 * request path:
 *
 *   1. the checksum, with no store call: a typo or a made-up token is a 401 for free;
 *   2. lru-caches of digests, each bounded in entries: found tokens for `cacheTtlMs`, unknown
 *      ones for a few seconds in a cache of their own (a flood of made-up tokens cannot push the
 *      tokens in use out); one store read per miss however many requests wait on it;
 *   3. revoked or expired (as the cached copy says) → 401; a disabled or deleted account too;
 *   4. the reset check every access token gets (auth/revocation.ts): a revoke is announced as
 *      a reset of the token's id and an account reset covers it, and every instance hears both
 *      at once, so a stale cached copy is never what lets a revoked token through.
 *
 * A settings token's validity is durable (in the owner store), so unlike a JWT it is not
 * refused for being older than the reset store's epoch (a restart of a memory gateway). When
 * Redis loses its data (a new epoch) every cached copy is dropped at once: the owner store may
 * have lost the token or its account with it.
 * Its last use is written back at most once per `touchEveryMs` per token on this instance,
 * whether the write succeeds or not.
 */
import { LRUCache } from 'lru-cache';
import { isWellFormedSettingsToken, settingsTokenDigest } from '../domain/settings-token.js';
import { InvalidToken } from '../errors/errors.js';
import type { SettingsTokenRecord } from '../state/owners/records.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import { entryBound } from '../util/lru.js';
import type { Identity } from './bearer.js';
import type { Revocations } from './revocation.js';

export interface SettingsTokenAuthOptions {
  store: Pick<OwnerStore, 'findSettingsToken' | 'readAccount' | 'updateAccount' | 'readOnly'>;
  revocations: Revocations;
  clock: Clock;
  log: Logger;
  /** How long a found token is trusted without reading it again (owner.settingsTokenCacheTtlMs). */
  cacheTtlMs: number;
  /**
   * How long this instance remembers a reset it heard (auth/revocation.ts `rememberMs`): a found
   * token is trusted no longer, so a revoke's reset outlives every copy cached before it even
   * when the stored resets cannot be read (which accepts).
   */
  resetsRememberedMs?: number;
  /** An identity lasts no longer than an access token would (an open WebSocket is closed then). */
  accessTokenTtlSeconds: number;
  /** How long an unknown digest is remembered as unknown. */
  negativeTtlMs?: number;
  /** Most digests cached. */
  max?: number;
  /** Least time between two writes of one token's lastUsedAt by this instance. */
  touchEveryMs?: number;
}

/** What bearer.ts's authenticator asks for a token starting `gwst_`. */
export type SettingsTokenAuthenticate = (token: string) => Promise<Identity>;

interface Cached {
  accountId: string;
  token: SettingsTokenRecord;
  accountLive: boolean;
  /** The record's times, parsed once per read rather than once per request. */
  createdAtMs: number;
  expiresAtMs: number;
  /** The data generation the read began in: a copy from before a data loss is read again. */
  generation: number;
}

export function createSettingsTokenAuth({
  store, revocations, clock, log, cacheTtlMs, accessTokenTtlSeconds, negativeTtlMs = 5_000, max = 10_000, touchEveryMs = 300_000,
  resetsRememberedMs = Infinity,
}: SettingsTokenAuthOptions): SettingsTokenAuthenticate {
  const perf = { now: () => clock.now() };
  /** +1 per data loss (revocations.whenDataLost). */
  let generation = 0;
  // Unknown digests apart from found ones: anyone can make well-formed tokens (a checksum is no
  // secret), and a flood of them must not push the tokens in use out of the cache.
  const unknown = new LRUCache<string, true>({ ...entryBound(max), ttl: negativeTtlMs, perf, ttlResolution: 0, ttlAutopurge: false });
  const cache = new LRUCache<string, Cached>({
    ...entryBound(max),
    // At least 1 ms: lru-cache reads a ttl of 0 as "never stale" (0 here means no caching).
    ttl: Math.max(1, Math.min(cacheTtlMs, resetsRememberedMs)),
    perf,
    ttlResolution: 0,
    ttlAutopurge: false,
    fetchMethod: async (digest) => {
      const started = generation;
      const found = await store.findSettingsToken(digest);
      if (found === undefined) {
        unknown.set(digest, true);
        return undefined;
      }
      const account = await store.readAccount(found.accountId);
      return {
        accountId: found.accountId, token: found.token, accountLive: account !== undefined && account.enabled && account.deletedAt === undefined,
        createdAtMs: Date.parse(found.token.createdAt), expiresAtMs: found.token.expiresAt === undefined ? Infinity : Date.parse(found.token.expiresAt),
        generation: started,
      };
    },
  });
  // The owner store lost its data with the reset store's Redis (a new epoch): a token found
  // before, or its live account, may exist no more (issue 26). Every copy from before is read
  // again: marked old by the generation rather than cleared, since clearing would abort the
  // reads under way and fail their requests.
  revocations.whenDataLost(() => {
    generation++;
    unknown.clear();
  });
  // A lastUsedAt written (or being written) by this instance: token id → when.
  const touched = new LRUCache<string, number>({ ...entryBound(max), ttl: touchEveryMs, perf, ttlResolution: 0, ttlAutopurge: false });

  function touch(accountId: string, token: SettingsTokenRecord, now: number): void {
    if (store.readOnly !== undefined || touched.has(token.id)) return;
    if (token.lastUsedAt !== undefined && now - Date.parse(token.lastUsedAt) < touchEveryMs) return;
    touched.set(token.id, now);
    const at = new Date(now).toISOString();
    store.updateAccount(accountId, (doc) => {
      const stored = doc.settingsTokens.find((t) => t.id === token.id);
      // Gone or revoked meanwhile: nothing to record.
      if (stored === undefined || stored.revokedAt !== undefined) return { events: [], result: undefined };
      return { doc: { ...doc, settingsTokens: doc.settingsTokens.map((t) => (t.id === token.id ? { ...t, lastUsedAt: at } : t)) }, events: [], result: undefined };
    }).catch((err: unknown) => {
      // Not forgotten: a failing store would otherwise get a write (and the log a line) per request.
      log.warn({ err, accountId, tokenId: token.id }, 'could not record the last use of an API settings token');
    });
  }

  return async function authenticateSettingsToken(presented) {
    if (!isWellFormedSettingsToken(presented)) throw new InvalidToken('The API settings token is not one the gateway made (bad checksum).');
    const digest = settingsTokenDigest(presented);
    // A fresh entry synchronously; fetch (one store read however many wait) only on a miss, or
    // for a copy from before a data loss.
    let entry = cache.get(digest);
    if (entry !== undefined && entry.generation !== generation) entry = await cache.fetch(digest, { forceRefresh: true });
    else if (entry === undefined && !unknown.has(digest)) entry = await cache.fetch(digest);
    const now = clock.now();
    if (entry === undefined) throw new InvalidToken('The API settings token is unknown.');
    const { accountId, token, createdAtMs, expiresAtMs } = entry;
    if (token.revokedAt !== undefined) throw new InvalidToken('The API settings token was revoked.');
    if (expiresAtMs <= now) throw new InvalidToken('The API settings token has expired.');
    if (!entry.accountLive) throw new InvalidToken('The API settings token\'s account is disabled.');
    const identity: Identity = {
      accountId, keyId: token.id, tokenId: token.id,
      issuedAt: Math.floor(createdAtMs / 1000), issuedAtMs: createdAtMs,
      expiresAt: Math.floor(Math.min(expiresAtMs, now + accessTokenTtlSeconds * 1000) / 1000),
      scopes: token.scopes,
      durable: true,
    };
    const revoked = revocations.isRevoked(identity, { durable: true });
    // Revoking a token records a reset covering it, which may be seen before the cached entry
    // learns of the revocation: either way, all the caller needs to know is that it was revoked.
    if (revoked === true || (revoked !== false && await revoked)) throw new InvalidToken('The API settings token was revoked.');
    touch(accountId, token, now);
    return identity;
  };
}
