/**
 * The processes a benchmark starts: every one is tracked, and stopped whatever ends the
 * script (its own end, an error, Ctrl-C, its watchdog), so that no server is left holding a
 * core or a port on a machine others share.
 */
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { log } from './report.js';

export const children = new Set<ChildProcess>();
let stopping: Promise<void> | undefined;
const scratchDirs = new Set<string>();

export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

export function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (!isRunning(child)) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => {
    if (isRunning(child)) child.kill('SIGKILL');
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

export function stopAll(): Promise<void> {
  stopping ??= Promise.all([...children].map((c) => stopChild(c))).then(() => undefined);
  return stopping;
}

/** A folder removed when the script exits, however it exits. */
export function removeAtExit(dir: string): void {
  scratchDirs.add(dir);
}

/**
 * Signal handlers that stop every tracked process before exiting, and a last-resort kill at
 * exit. `name` prefixes the messages.
 */
export function installCleanup(name: string): void {
  // At 'exit' the event loop is gone: no grace, but nothing is left behind.
  process.on('exit', () => {
    for (const child of children) if (isRunning(child) && child.pid !== undefined) {
      try { process.kill(child.pid, 'SIGKILL'); } catch { /* already gone */ }
    }
    for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    // Kept installed, so that a second Ctrl-C while stopping does not cut the clean-up short.
    process.on(signal, () => {
      if (stopping !== undefined) return;
      log(`\n${name}: ${signal}: stopping ${children.size} process(es)`);
      void stopAll().finally(() => process.exit(130));
    });
  }
}

/** Stops everything and exits once `ms` have passed, whatever the script is waiting for. */
export function startWatchdog(name: string, ms: number): void {
  setTimeout(() => {
    log(`${name}: over its time budget (${Math.round(ms / 1000)} s): stopping`);
    void stopAll().finally(() => process.exit(1));
  }, ms).unref();
}

/** The last lines a process wrote, and how many were warnings or errors (pino levels 40+). */
export class Output {
  readonly lines: string[] = [];
  problems = 0;
  #partial = '';
  constructor(stream: NodeJS.ReadableStream | null) {
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      const parts = (this.#partial + chunk).split('\n');
      this.#partial = parts.pop() ?? '';
      for (const line of parts) {
        if (/"level":\s*(4|5|6)\d/.test(line)) this.problems++;
        this.lines.push(line);
        if (this.lines.length > 40) this.lines.shift();
      }
    });
  }
  tail(n = 10): string {
    return [...this.lines.slice(-n), this.#partial].filter((l) => l !== '').join('\n');
  }
}

/** Runs a benchmark's main; on an error, says so, stops every process it started and exits 1. */
export function runMain(name: string, main: () => Promise<void>): void {
  main().catch(async (err: unknown) => {
    log(`${name} failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    await stopAll();
    process.exit(1);
  });
}
