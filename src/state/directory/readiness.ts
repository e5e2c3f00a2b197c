/**
 * Whether the directory can answer, for /readyz: its store answers, or the cache in front of it
 * may still serve what it read (directory.cache.ts serves a copy up to `ttl + maxStale` after
 * the read that made it began). Learnt from the reads the cache makes anyway, so a ready
 * instance costs the store nothing extra. Only while the store is failing AND no copy may be
 * served any more does /readyz ask it itself, by repeating the read that failed last: a
 * load balancer takes an unready instance out, so no request would come to find the store back.
 *
 * A store the gateway has not read yet counts as answering (HTTP upstreams have no neutral
 * read to try); bad data in an answer is an answer (the store is reachable).
 */
import { BadStoreData } from '../../errors/errors.js';
import type { Clock } from '../../util/clock.js';
import type { Directory } from './store.js';

export interface WatchedDirectory {
  /** The store, to put behind the cache: every read through it is noted. */
  store: Directory;
  isReady(): Promise<boolean>;
}

export function watchDirectoryStore(inner: Directory, { clock, servableMs }: { clock: Clock; servableMs: number }): WatchedDirectory {
  /** When the last read that the store answered began (a copy from it is servable for servableMs). */
  let answeredAt: number | undefined;
  let failing = false;
  let lastFailed: (() => Promise<unknown>) | undefined;

  const note = async <T>(read: () => Promise<T>): Promise<T> => {
    const at = clock.now();
    try {
      const value = await read();
      answered(at);
      return value;
    } catch (err) {
      if (err instanceof BadStoreData) {
        answered(at);
      } else {
        failing = true;
        lastFailed = read;
      }
      throw err;
    }
  };
  const answered = (at: number) => {
    failing = false;
    lastFailed = undefined;
    answeredAt = Math.max(answeredAt ?? at, at);
  };

  return {
    store: {
      findSignRecord: (accountId, address) => note(() => inner.findSignRecord(accountId, address)),
      listRoles: (accountId, query) => note(() => inner.listRoles(accountId, query)),
    },
    async isReady() {
      if (!failing) return true;
      if (answeredAt !== undefined && clock.now() < answeredAt + servableMs) return true;
      const retry = lastFailed;
      if (retry === undefined) return false;
      try {
        await note(retry);
        return true;
      } catch (err) {
        return err instanceof BadStoreData;
      }
    },
  };
}
