/**
 * The data file has one writer: the process that holds its lock, for as long as it runs. Two
 * gateways writing one file (a restart's new process while the old one drains, a second
 * instance by mistake) would each read, change and rename over the other's version, and
 * acknowledged changes would be lost (test/ops/data-file-lock.test.ts).
 *
 * The lock is proper-lockfile's: the directory `<file>.lock`, made with mkdir (atomic, also on
 * network file systems), whose mtime the holder renews every `staleMs / 2`. A holder killed with
 * SIGKILL cannot remove it, but stops renewing it: once it is `staleMs` old the next process
 * takes it over. A process waiting for the lock says so in its log, naming the holder from
 * `<file>.lock.holder` (pid and host, written by the holder; informative only), and tries
 * again with a bounded backoff, without end: a second process is a standby until the first
 * exits. Only then does the caller read the file, so it starts from every change the first
 * one acknowledged.
 *
 * A file whose directory nobody may write (a read-only mount) is not locked: no process can
 * write it either (the writer renames a new version into that directory).
 */
import { mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import lockfile from 'proper-lockfile';
import type { Logger } from '../../telemetry/log.js';

export interface DataFileLock {
  /** The locked file's real path. */
  readonly file: string;
  /** Gives the lock up (the holder's note first); also done when the process exits. */
  release(): Promise<void>;
}

export interface LockOptions {
  log: Logger;
  /** A lock not renewed for this long is taken over (its holder was killed). */
  staleMs: number;
  /** Make the file's directory first (the demo's save file, data/). */
  createDirectory?: boolean;
  /**
   * Called if the lock is lost while held (its renewal failed for `staleMs`, or the lock
   * directory was removed): another process may be writing by then, so this one must stop.
   */
  onLost: (err: Error) => void;
}

/** The longest pause between two attempts while waiting. */
const MAX_BACKOFF_MS = 1000;
/** How often the wait is logged again while it lasts. */
const WAIT_LOG_EVERY_MS = 30_000;

/** Takes the lock of `file`, waiting as long as another process holds it; undefined when the file's directory cannot be written. */
export async function lockDataFile(file: string, { log, staleMs, createDirectory = false, onLost }: LockOptions): Promise<DataFileLock | undefined> {
  const target = realPath(file);
  const unwritable = (code: string | undefined) => {
    log.warn({ file: target, code }, 'the data file\'s directory cannot be written, so the file is not locked (and owner API changes cannot be saved to it)');
    return undefined;
  };
  try {
    if (createDirectory) mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return unwritable(code);
    throw err;
  }
  const holderFile = `${target}.lock.holder`;
  const me = { pid: process.pid, host: hostname() };
  let backoffMs = 50;
  let waitingSince: number | undefined;
  let loggedAt = 0;
  for (;;) {
    try {
      const release = await lockfile.lock(target, {
        stale: staleMs,
        realpath: false,
        onCompromised: (err) => onLost(err),
      });
      writeHolder(holderFile, me);
      // proper-lockfile removes the lock directory as the process exits; the note goes too.
      process.once('exit', () => removeHolder(holderFile, me));
      if (waitingSince !== undefined) log.info({ file: target, waitedMs: Date.now() - waitingSince }, 'took the data file lock: reading the file afresh');
      return {
        file: target,
        async release() {
          removeHolder(holderFile, me);
          await release().catch(() => {});
        },
      };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return unwritable(code);
      // No such directory: nothing to lock; reading the file stops the start with the reason.
      if (code === 'ENOENT') return undefined;
      if (code !== 'ELOCKED') throw err;
    }
    const now = Date.now();
    waitingSince ??= now;
    if (now - loggedAt >= WAIT_LOG_EVERY_MS) {
      loggedAt = now;
      const holder = readHolder(holderFile);
      log.warn({ file: target, holderPid: holder?.pid, holderHost: holder?.host, staleMs },
        `waiting for the data file lock held by ${holder === undefined ? 'another process' : `pid ${holder.pid} on ${holder.host}`}: the data file has one writer (this process goes on once that one exits, or ${staleMs} ms after it died)`);
    }
    await sleep(backoffMs);
    backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
  }
}

function realPath(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    // Not there yet (created empty at start, or the demo's save file): locked where it will be.
    return resolve(file);
  }
}

interface Holder {
  pid: number;
  host: string;
}

function writeHolder(file: string, me: Holder): void {
  try {
    writeFileSync(file, `${JSON.stringify({ ...me, since: new Date().toISOString() })}\n`, { mode: 0o644 });
  } catch {
    // Only a note for the log of a process that waits.
  }
}

function readHolder(file: string): Holder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<Holder>;
    return typeof parsed.pid === 'number' && typeof parsed.host === 'string' ? { pid: parsed.pid, host: parsed.host } : undefined;
  } catch {
    return undefined;
  }
}

/** Removes the note only while it is this process's (the next holder may have written its own). */
function removeHolder(file: string, me: Holder): void {
  const holder = readHolder(file);
  if (holder?.pid === me.pid && holder.host === me.host) rmSync(file, { force: true });
}
