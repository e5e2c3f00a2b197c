/**
 * The data file as start-up finds it: created when missing, read, and its demo keys refused
 * where a production gateway must not serve them. Read before anything connects, so a bad file
 * stops the start with nothing to close.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from '../../config/schema.js';
import type { Logger } from '../../telemetry/log.js';
import { isShippedDemoFile } from '../owners/file.js';
import { readDataFile, type DataFile } from './data-file.js';
import { checkDemoData } from './demo-data.js';
import { createDataFileIfMissing } from './writer.js';

export interface OpenedDataFile {
  /** The file's content at start-up. */
  data: DataFile;
  /** Throws DemoDataError for demo keys a production gateway must not serve: at start-up and on each reload. */
  checkDemoKeys(next: DataFile): void;
}

/**
 * `isProduction` (NODE_ENV=production, read by main.ts) makes demo keys in the data file an
 * error unless `data.allowDemoData` is set (demo-data.ts).
 */
export function openDataFile(config: Config, { log, isProduction }: { log: Logger; isProduction: boolean }): OpenedDataFile {
  if (createDataFileIfMissing(config.data.file)) log.warn({ file: config.data.file }, 'the data file did not exist: created it with no accounts');
  const data = readDataFile(config.data.file);
  const checkDemoKeys = (next: DataFile) => {
    if (config.data.keySource !== 'file') return;
    const warning = checkDemoData(next, { file: config.data.file, isProduction, allowDemoData: config.data.allowDemoData });
    if (warning !== undefined) log.warn(warning);
  };
  checkDemoKeys(data);
  // Keys in Redis are read one at a time, never searched at start-up: the sign-in checks each (auth/demo-secrets.ts).
  if (isProduction && config.data.keySource === 'redis') {
    if (config.data.allowDemoData) log.warn('ALLOW_DEMO_DATA=true: the demo API keys and owners, whose secrets and passwords are published in the README, are served if Redis holds them; anyone who can reach the gateway can sign in with them (delete ALLOW_DEMO_DATA before this gateway is reachable)');
    else log.info('API keys and owners come from Redis (KEY_SOURCE=redis): a sign-in with a demo API secret or owner password published in the README is refused (NODE_ENV=production without ALLOW_DEMO_DATA)');
  }
  return { data, checkDemoKeys };
}

/**
 * The shipped demo file is never written; what owners change on it is saved to
 * `data.demoSaveFile` (owners/file.ts). Once that file exists it is the data file, so the
 * embedded default loses nothing at a restart.
 */
export function withSavedDemoData(config: Config, log: Logger): Config {
  const saved = resolve(config.data.demoSaveFile);
  if (!isShippedDemoFile(config.data.file) || !existsSync(saved)) return config;
  log.info({ file: saved }, 'reading the demo data with the owner changes saved to it (data.demoSaveFile), not the shipped demo file');
  return { ...config, data: { ...config.data, file: saved } };
}
