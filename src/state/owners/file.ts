/**
 * The owner store of the embedded default: MemoryOwnerStore over the data file. Every change is
 * written to the file (data-file-writer.ts: temporary file, fsync, rename) before it is served
 * and answered, one write at a time, so concurrent changes never lose one another and a restart
 * finds them all; the changes that arrive during a write share the next one (group commit), so
 * a burst costs a few writes of the whole file, not one each. The file has one writer: the
 * process holds its lock (data-file-lock.ts, taken in main.ts).
 *
 * The file stays the operator's too. Before each change the file's stat is compared with the
 * version last read or written; when a human (or a deploy) has changed it since, that version
 * is read and the change applies on top of it, so the edit is never overwritten. The watcher
 * (data-file.ts) asks `isOwnVersion` and skips the store's own writes, which are served
 * already; a foreign version it sees reaches the store through `refresh`. An invalid foreign
 * version is not served, and changes answer 503 until the file is valid again, since writing
 * would throw the edit away.
 *
 * The demo file shipped in the repository (config/demo-data.json, compared by real path) is
 * never written: changes made on it are saved to `saveDemoTo` (data.demoSaveFile), which
 * services.ts reads instead of the demo file from then on; one info line says so.
 * test/state/owners-file.test.ts holds all of this.
 */
import { closeSync, fstatSync, openSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ReadOnlyStore, StoreUnavailable } from '../../errors/errors.js';
import type { Logger } from '../../telemetry/log.js';
import { parseDataFile, type DataFile } from '../data-file/data-file.js';
import { DataFileWriter, isSameVersion, type FileVersion } from '../data-file/writer.js';
import { MemoryOwnerStore, type MemoryOwnerStoreOptions } from './memory.js';

/** The repository's demo data (beside dist/ in the image): its bytes never change. */
const SHIPPED_DEMO_FILE = fileURLToPath(new URL('../../../config/demo-data.json', import.meta.url));

export function isShippedDemoFile(file: string): boolean {
  try {
    return realpathSync(file) === realpathSync(SHIPPED_DEMO_FILE);
  } catch {
    return false;
  }
}

export interface FileOwnerStoreOptions {
  log: Logger;
  /** Audit events kept per account (`owner.auditMaxEventsPerAccount`). */
  maxAuditEvents: number;
  /** Why every write is refused (the file is only read: several instances); nothing is written then. */
  readOnly?: string;
  directoryReadOnly?: string;
  /** Where changes made on the shipped demo file go (`data.demoSaveFile`); absent: kept in memory only. */
  saveDemoTo?: string;
  /** Refuses a version of the file by throwing, as the watcher's handler does (demo keys in production). */
  check?: (data: DataFile) => void;
  onCommit?: MemoryOwnerStoreOptions['onCommit'];
  /** Hears each write of the file and how many changes it carried (the metrics count them). */
  onWrite?: (changes: number) => void;
}

export class FileOwnerStore extends MemoryOwnerStore {
  /** True for the bytes of this store's own last write: the watcher skips them. */
  readonly isOwnVersion: (text: string) => boolean;
  /** False when changes stay in memory (the shipped demo file with nowhere to save them). */
  readonly isWritingFile: boolean;

  /** `data` is the file's content as just read (services.ts reads it at start-up). */
  constructor(file: string, data: DataFile, options: FileOwnerStoreOptions) {
    const disk = bindDataFile(file, options);
    super(data, {
      maxAuditEvents: options.maxAuditEvents,
      readOnly: options.readOnly,
      directoryReadOnly: options.directoryReadOnly,
      onCommit: options.onCommit,
      persist: disk.persist,
      reload: disk.reload,
    });
    this.isOwnVersion = disk.isOwnVersion;
    this.isWritingFile = disk.isWritingFile;
  }
}

function bindDataFile(dataFile: string, { log, readOnly, check, saveDemoTo, onWrite }: FileOwnerStoreOptions) {
  const isDemo = isShippedDemoFile(dataFile);
  // The demo's changes go to their own file, which holds the demo and every change since.
  const file = isDemo && saveDemoTo !== undefined ? saveDemoTo : dataFile;
  const writer = isDemo && saveDemoTo === undefined ? undefined : new DataFileWriter(file, { log, createDirectory: isDemo });
  // The version the caller's `data` was read from, a moment ago.
  let known = statVersion(file);
  let hasWarned = false;
  return {
    isWritingFile: writer !== undefined,
    isOwnVersion: (text: string) => writer?.isOwnVersion(text) ?? false,

    reload(): DataFile | undefined {
      if (isSameVersion(statVersion(file), known)) return undefined;
      const read = readVersion(file);
      // Gone (removed by hand): keep serving; the next change writes it anew.
      if (read === undefined) return undefined;
      let data: DataFile;
      try {
        data = parseDataFile(file, read.text);
        check?.(data);
      } catch (err) {
        throw new StoreUnavailable(err);
      }
      known = read.version;
      return data;
    },

    async persist(next: DataFile, changes: number): Promise<void> {
      // The owner layer refuses writes to a read-only store first; this keeps the file unwritten whatever calls.
      if (readOnly !== undefined) throw new ReadOnlyStore(readOnly);
      if (writer === undefined) {
        if (!hasWarned) {
          hasWarned = true;
          log.warn({ file }, 'the data file is the demo file shipped with the gateway, which is never written: owner API changes are kept in memory only and are lost at restart (give GATEWAY_DATA_FILE a file of your own)');
        }
        return;
      }
      if (isDemo && !hasWarned) {
        hasWarned = true;
        log.info({ file }, 'owner API changes to the shipped demo data are saved to their own file, read instead of the demo file from the next start (data.demoSaveFile)');
      }
      known = await writer.write(next);
      onWrite?.(changes);
    },
  };
}

function statVersion(file: string): FileVersion | undefined {
  try {
    const { ino, size, mtimeMs } = statSync(file);
    return { ino, size, mtimeMs };
  } catch {
    return undefined;
  }
}

/** The file's text and the version it was read from (one open file, so the two agree). */
function readVersion(file: string): { text: string; version: FileVersion } | undefined {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new StoreUnavailable(err);
  }
  try {
    const { ino, size, mtimeMs } = fstatSync(fd);
    return { text: readFileSync(fd, 'utf8'), version: { ino, size, mtimeMs } };
  } catch (err) {
    throw new StoreUnavailable(err);
  } finally {
    closeSync(fd);
  }
}
