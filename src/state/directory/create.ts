/**
 * The configured directory store behind the one cache. Change notices come from the store
 * itself (a reloaded data file) and, whenever Redis is configured, from the Redis channel, so
 * the owners of an HTTP upstream can announce changes too.
 */
import type { Config } from '../../config/schema.js';
import type { Logger } from '../../telemetry/log.js';
import type { Metrics } from '../../telemetry/metrics.js';
import type { Clock } from '../../util/clock.js';
import type { StoreCheck } from '../readiness.js';
import type { RedisConnection } from '../redis/client.js';
import { createCachedDirectory, type CachedDirectory } from './cache.js';
import { HttpDirectory } from './http.js';
import type { MemoryDirectory } from './memory.js';
import { watchDirectoryStore } from './readiness.js';
import { createRecordReader } from './records.js';
import { RedisDirectory } from './redis.js';
import type { Directory, DirectoryChanges } from './store.js';

export function createDirectory(config: Config, { log, clock, redis, fileDirectory, metrics }: {
  log: Logger;
  metrics: Metrics;
  clock: Clock;
  redis: RedisConnection | undefined;
  fileDirectory: MemoryDirectory;
}): { directory: CachedDirectory; check: StoreCheck } {
  const records = createRecordReader(config.directory.timeZone);
  const viaRedis = redis === undefined ? undefined : new RedisDirectory(redis, { records, log });
  let store: Directory;
  const changes: DirectoryChanges[] = [];
  if (config.directory.store === 'redis') {
    store = viaRedis!;
  } else if (config.directory.store === 'http') {
    store = new HttpDirectory(config.directory.http, { records, accountHeader: config.proxy.identityHeaders.account, log, metrics });
  } else {
    store = fileDirectory;
    changes.push(fileDirectory);
  }
  if (viaRedis !== undefined) changes.push(viaRedis);
  const { cache } = config.directory;
  const watched = watchDirectoryStore(store, { clock, servableMs: cache.ttlMs + cache.maxStaleMs });
  // Its store answers, or a cached copy may still be served.
  const check: StoreCheck = {
    name: 'directory',
    timeoutMs: config.directory.store === 'http' ? config.directory.http.timeoutMs : config.redis.commandTimeoutMs,
    isReady: () => watched.isReady(),
    // A directory kept in Redis is down with Redis, on every instance alike (see the redis check).
    degradable: config.directory.store === 'redis' && !config.readiness.requireRedis,
  };
  return { directory: createCachedDirectory({ store: watched.store, changes, settings: cache, clock, log, metrics }), check };
}
