/**
 * Writes the data file back, atomically: the whole new version goes to a temporary file in the
 * same directory (created exclusively, mode 0600), is flushed to disk, and is renamed over the
 * file's real path (a symlink such as a mounted ConfigMap's stays a symlink); then the directory
 * is flushed, so the rename itself survives a power loss. A reader (the watcher, a restart, a
 * human) sees the old version or the new one, never a mix, and a crash at any step leaves the
 * old version in place (test/state/owners-file.test.ts kills a writing process to show it).
 *
 * A failed write removes its temporary file and throws StoreUnavailable (503), so the owner
 * store serves nothing the file does not hold. The text is JSON indented by two spaces, so the
 * file stays the one humans read and edit; the writer remembers the SHA-256 of the bytes it
 * last wrote, so the watcher can tell its own writes from a human's.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, linkSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { mkdir, open, realpath, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { StoreUnavailable } from '../../errors/errors.js';
import type { Logger } from '../../telemetry/log.js';
import type { DataFile } from './data-file.js';

/** What tells one version of the file from another without reading it (fs.watchFile compares the same). */
export interface FileVersion {
  ino: number;
  size: number;
  mtimeMs: number;
}

export function isSameVersion(a: FileVersion | undefined, b: FileVersion | undefined): boolean {
  return a !== undefined && b !== undefined && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

/** The file's text for `data`: pretty-printed, as a human would write it. */
export function formatDataFile(data: DataFile): string {
  return `${JSON.stringify(data, null, 2)}\n`;
}

function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A temporary name beside `target`: hidden, unique per process and write, recognisable by its suffix. */
function tempPath(target: string): string {
  return join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
}

export class DataFileWriter {
  readonly file: string;
  readonly #log: Logger;
  #lastDigest: string | undefined;

  readonly #createDirectory: boolean;

  /** `createDirectory`: make the file's directory on the first write (the demo's save file, data/). */
  constructor(file: string, { log, createDirectory = false }: { log: Logger; createDirectory?: boolean }) {
    this.file = file;
    this.#log = log;
    this.#createDirectory = createDirectory;
  }

  /** True when `text` is exactly what this writer last wrote. */
  isOwnVersion(text: string | Buffer): boolean {
    return this.#lastDigest !== undefined && sha256(text) === this.#lastDigest;
  }

  /** Replaces the file with `data`; returns the version written. Throws StoreUnavailable, the file unchanged. */
  async write(data: DataFile): Promise<FileVersion> {
    const bytes = Buffer.from(formatDataFile(data));
    if (this.#createDirectory) await mkdir(dirname(resolve(this.file)), { recursive: true, mode: 0o700 }).catch((err: unknown) => { throw new StoreUnavailable(err); });
    let target: string;
    let mode: number | undefined;
    try {
      target = await realpath(this.file);
      // The operator's permissions stay (a group that reads the file keeps reading it).
      mode = (await stat(target)).mode & 0o777;
    } catch (err) {
      // Gone (removed by hand): written anew where it was.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new StoreUnavailable(err);
      target = resolve(this.file);
    }
    const temp = tempPath(target);
    let handle: FileHandle | undefined;
    let version: FileVersion;
    const previousDigest = this.#lastDigest;
    try {
      handle = await open(temp, 'wx', 0o600);
      await handle.writeFile(bytes);
      if (mode !== undefined && mode !== 0o600) await handle.chmod(mode);
      await handle.sync();
      const { ino, size, mtimeMs } = await handle.stat();
      version = { ino, size, mtimeMs };
      await handle.close();
      handle = undefined;
      // Known as this writer's own before it is there: the rename is done on the thread pool,
      // and a watcher's poll between its completion and the line after it would otherwise take
      // the store's own write for a foreign edit.
      this.#lastDigest = sha256(bytes);
      await rename(temp, target);
    } catch (err) {
      this.#lastDigest = previousDigest;
      await handle?.close().catch(() => {});
      await unlink(temp).catch(() => {});
      throw new StoreUnavailable(err);
    }
    await syncDirectory(dirname(target)).catch((err: unknown) => {
      // The new version is in place and served; only its survival of a power loss is in doubt.
      this.#log.warn({ err, file: target }, 'data file written, but its directory could not be flushed to disk');
    });
    return version;
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Creates a missing data file as `{"accounts": []}` when its directory exists, so a gateway can
 * start on a new, empty file and be filled through the owner API; a missing directory is left
 * for readDataFile to refuse (a mistyped path should stop the start, not make a file somewhere).
 * Returns whether it created the file. Linked into place, so a file that appears meanwhile is
 * never overwritten.
 */
export function createDataFileIfMissing(file: string): boolean {
  if (existsSync(file) || !existsSync(dirname(file))) return false;
  const temp = tempPath(resolve(file));
  const fd = openSync(temp, 'wx', 0o600);
  try {
    writeSync(fd, formatDataFile({ accounts: [], owners: [] }));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return false;
  } finally {
    unlinkSync(temp);
  }
  return true;
}
