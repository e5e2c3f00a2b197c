/**
 * Records when each API key last signed in (state/key-use/store.ts), for owners: the owner API's key
 * view and the dashboard's keys table. At sign-in only, never per proxied request or token
 * check: a sign-in is rare next to the calls its tokens make, and an access token says nothing
 * new about its key.
 *
 * At most one write per `touchEveryMs` per key on this instance, so "last used" is exact to
 * within those few minutes and a busy key costs one write per interval, not one per sign-in.
 * The write is not awaited: a sign-in never waits for it or fails with it.
 * test/owner/key-last-used.test.ts holds it.
 */
import { LRUCache } from 'lru-cache';
import type { ApiKeyRecord } from '../state/keys/store.js';
import type { KeyUseStore } from '../state/key-use/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import { entryBound } from '../util/lru.js';

export interface KeyUseOptions {
  store: KeyUseStore;
  clock: Clock;
  log: Logger;
  /** Least time between two writes of one key's last use by this instance. */
  touchEveryMs?: number;
  /** Most keys remembered as written lately. */
  max?: number;
}

/** Records a sign-in with `key`; returns at once. */
export type RecordKeyUse = (key: Pick<ApiKeyRecord, 'accountId' | 'keyId'>) => void;

export function createKeyUseRecorder({ store, clock, log, touchEveryMs = 300_000, max = 10_000 }: KeyUseOptions): RecordKeyUse {
  const perf = { now: () => clock.now() };
  // Keys whose last use this instance wrote (or is writing) lately: key id → when.
  const touched = new LRUCache<string, number>({ ...entryBound(max), ttl: touchEveryMs, perf, ttlResolution: 0, ttlAutopurge: false });

  return function recordKeyUse({ accountId, keyId }) {
    if (touched.has(keyId)) return;
    const now = clock.now();
    touched.set(keyId, now);
    store.record(accountId, keyId, now).catch((err: unknown) => {
      // Not forgotten: a failing store would otherwise get a write (and the log a line) per sign-in.
      log.warn({ err, accountId, keyId }, 'could not record the last use of an API key');
    });
  };
}
