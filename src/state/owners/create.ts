/**
 * Where the owner API writes: the data file when keys are read from it, Redis when they are.
 * A data file behind several instances (Redis configured, keys still from the file) is only
 * read: each instance would write its own copy. Roles and sign records are written only where
 * they are read (directory.store), so a change never goes where no instance would see it.
 */
import { resolve } from 'node:path';
import { usesRedis, type Config } from '../../config/schema.js';
import type { Logger } from '../../telemetry/log.js';
import type { Metrics } from '../../telemetry/metrics.js';
import type { DataFile } from '../data-file/data-file.js';
import { checkDemoData } from '../data-file/demo-data.js';
import type { MemoryDirectory } from '../directory/memory.js';
import { createRecordReader } from '../directory/records.js';
import type { MemoryKeyDirectory } from '../keys/memory.js';
import { RedisKeyDirectory } from '../keys/redis.js';
import type { KeyDirectory } from '../keys/store.js';
import type { RedisConnection } from '../redis/client.js';
import { FileOwnerStore, isShippedDemoFile } from './file.js';
import { RedisOwnerStore } from './redis.js';
import type { OwnerStore } from './store.js';

export function createOwnerStore(config: Config, { log, data, fileKeys, fileDirectory, isProduction, redis, keys, metrics }: {
  log: Logger;
  metrics: Metrics;
  /** The gateway's key directory: the owner store's key writes drop its cached records. */
  keys: KeyDirectory;
  data: DataFile;
  fileKeys: MemoryKeyDirectory;
  fileDirectory: MemoryDirectory;
  isProduction: boolean;
  redis: RedisConnection | undefined;
}): OwnerStore {
  const readOnly = usesRedis(config) && config.data.keySource === 'file'
    ? 'The data file is only read while Redis is configured (each instance has its own copy): set KEY_SOURCE=redis to manage accounts through the owner API.'
    : undefined;
  const directoryReadOnly = config.directory.store === 'http'
    ? 'Roles and sign records belong to the directory upstream (directory.store is "http"): change them there.'
    : config.directory.store !== config.data.keySource
      ? `Roles and sign records are read from ${config.directory.store === 'redis' ? 'Redis' : 'the data file'} while the owner API writes to ${config.data.keySource === 'redis' ? 'Redis' : 'the data file'}: set DIRECTORY_STORE and KEY_SOURCE alike to manage them here.`
      : undefined;
  if (config.data.keySource === 'redis') {
    const records = createRecordReader(config.directory.timeZone);
    return new RedisOwnerStore(redis!, {
      records, log, maxAuditEvents: config.owner.auditMaxEventsPerAccount, directoryReadOnly,
      onKeysWritten: keys instanceof RedisKeyDirectory ? () => keys.dropCache() : undefined,
    });
  }
  // Written back to the data file (the shipped demo file's changes to their own file): see file.ts.
  return new FileOwnerStore(config.data.file, data, {
    log,
    saveDemoTo: resolve(config.data.demoSaveFile),
    readOnly,
    directoryReadOnly,
    maxAuditEvents: config.owner.auditMaxEventsPerAccount,
    // The watcher's refusal (checkDemoKeys), without its warning: logged once per version already.
    check: config.data.keySource === 'file' ? (next) => void checkDemoData(next, { file: config.data.file, isProduction, allowDemoData: config.data.allowDemoData }) : undefined,
    onWrite(changes) {
      metrics.dataFileWrites.inc();
      metrics.dataFileChangesWritten.inc(changes);
    },
    onCommit(next, changes) {
      fileKeys.load(next);
      // Own changes name what they touched; a version read from the file may have touched anything.
      fileDirectory.load(next, changes);
    },
  });
}

/**
 * The file this configuration's owner store writes, which the process must lock first
 * (data-file/lock.ts): the data file when keys are read from it and there is no Redis
 * (with Redis it is only read), the demo's save file in place of the shipped demo file.
 */
export function dataFileWrittenBy(config: Config): { file: string; createDirectory: boolean } | undefined {
  if (config.data.keySource !== 'file' || usesRedis(config)) return undefined;
  return isShippedDemoFile(config.data.file) ? { file: resolve(config.data.demoSaveFile), createDirectory: true } : { file: config.data.file, createDirectory: false };
}
