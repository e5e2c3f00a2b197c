/**
 * Real processes for the tests: `node <RUN_TS> <file>` (the gateway, src/main.ts, and the admin
 * commands in src/cli/, on Node's type stripping: resolve-ts.ts) started as an operator would, with a clean environment, and read
 * through their stdout JSON lines, stderr and exit code. Every child has a time limit and is
 * killed in t.after, so a hung process fails its test instead of the run.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { describeSettings } from '../../src/config/schema.js';

/** The checkout: the working directory of every child. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Generous: a start on a busy machine, before the compile cache holds the sources. */
export const PROCESS_LIMIT_MS = 30_000;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Child {
  process: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once the process has exited and its output is closed. */
  exited: Promise<Exit>;
}

export type LogLine = Record<string, unknown>;

/** One directory per test process for the gateways' demo save files, removed when the process ends. */
const DEMO_SAVES = mkdtempSync(join(tmpdir(), 'gw-demo-'));
process.once('exit', () => rmSync(DEMO_SAVES, { recursive: true, force: true }));

/**
 * Where a gateway of this test keeps changes made to the shipped demo data (data.demoSaveFile):
 * a file of its own, in a directory that goes with the test process.
 */
export function demoSaveFile(): string {
  return join(DEMO_SAVES, randomUUID(), 'data.json');
}

/** Where a gateway of this test queues webhook deliveries (webhooks.queueFile): a file of its own, as demoSaveFile. */
export function webhookQueueFile(): string {
  return join(DEMO_SAVES, randomUUID(), 'webhook-queue.json');
}

/** The environment of the test run without any gateway setting, plus `extra` (a value undefined: the setting left unset). */
export function gatewayEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.GATEWAY_CONFIG;
  delete env.NODE_TEST_CONTEXT;
  for (const row of describeSettings()) if (row.env !== undefined) delete env[row.env];
  // Limits are off unless a test sets them (see helpers/gateway.ts).
  // As test/helpers/gateway.ts: a save file of the demo data's own (restart tests pass one to keep).
  // No drain delay unless a test sets one (test/ops/drain.test.ts): SIGTERM stops at once.
  // One process unless a test sets WORKERS (test/redis/workers.test.ts tests the default): with
  // Redis and signing keys the default forks a worker per core, which the tests of one process's
  // behaviour (its logs, its signals) do not expect.
  const merged: NodeJS.ProcessEnv = { ...env, RATE_LIMITS: 'off', DRAIN_DELAY_MS: '0', DEMO_SAVE_FILE: demoSaveFile(), WEBHOOKS_QUEUE_FILE: webhookQueueFile(), WORKERS: '1', ...extra };
  for (const [name, value] of Object.entries(extra)) if (value === undefined) delete merged[name];
  return merged;
}

export interface StartNodeOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** The child is killed (SIGKILL) once it has run this long. */
  limitMs?: number;
}

/** The flags that run a TypeScript file as the tests run: Node's type stripping, with resolve-ts.ts. */
export const RUN_TS = ['--import', fileURLToPath(new URL('./resolve-ts.ts', import.meta.url))];

/** Starts `node <RUN_TS> <args>`; the child is killed when the test ends or the limit passes. */
export function startNode(t: TestContext, args: string[], { env = gatewayEnv(), cwd = ROOT, limitMs = PROCESS_LIMIT_MS }: StartNodeOptions = {}): Child {
  return startChild(t, process.execPath, [...RUN_TS, ...args], { env, cwd, limitMs });
}

/**
 * Starts `command`, keeping its output and its exit; it is SIGKILLed once it has run `limitMs`,
 * or when the test ends if it still runs.
 */
export function startChild(t: TestContext, command: string, args: string[], { env, cwd, limitMs }: Required<StartNodeOptions>): Child {
  const child = spawn(command, args, {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: limitMs,
    killSignal: 'SIGKILL',
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; });
  const exited = new Promise<Exit>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { process: child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** The stdout lines parsed as JSON; a line that is not JSON fails the test. */
export function logLines(child: Child): LogLine[] {
  return parseLogLines(child.stdout());
}

function parseLogLines(text: string): LogLine[] {
  return text.split('\n').filter((line) => line !== '').map((line) => {
    try {
      return JSON.parse(line) as LogLine;
    } catch {
      assert.fail(`stdout line is not JSON: ${line}`);
    }
  });
}

/** The first log line matching `predicate`, waiting for it at most `limitMs`. */
export function waitForLog(child: Child, predicate: (line: LogLine) => boolean, limitMs = PROCESS_LIMIT_MS): Promise<LogLine> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const found = logLines(child).find(predicate);
      if (found === undefined) return false;
      finish();
      resolve(found);
      return true;
    };
    const onExit = () => {
      if (check()) return;
      finish();
      reject(new Error(`process ended before the expected log line\nstdout:\n${child.stdout()}\nstderr:\n${child.stderr()}`));
    };
    const timer = setTimeout(() => {
      finish();
      reject(new Error(`no such log line within ${limitMs} ms\nstdout:\n${child.stdout()}\nstderr:\n${child.stderr()}`));
    }, limitMs);
    const finish = () => {
      clearTimeout(timer);
      child.process.stdout!.off('data', check);
      child.process.off('close', onExit);
    };
    child.process.stdout!.on('data', check);
    child.process.once('close', onExit);
    check();
  });
}

/** The exit of the child, failing if it takes longer than `limitMs`. */
export async function exitWithin(child: Child, limitMs = PROCESS_LIMIT_MS): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`process still running after ${limitMs} ms\nstderr:\n${child.stderr()}`)), limitMs);
  });
  try {
    return await Promise.race([child.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A fresh directory, removed when the test ends. */
export function tempDir(t: TestContext, prefix = 'gateway-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // A gateway of the test may still be writing there (its temporary files come and go) until
  // its own after hook ends it: retried, as rm -rf would be.
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }));
  return dir;
}

/** The gateway's "gateway listening on <url>" line. */
export const LISTENING = (line: LogLine) => line.level === 30 && typeof line.url === 'string';

export interface GatewayProcess {
  /** http://127.0.0.1:<port> */
  url: string;
  child: Child;
  /**
   * Every complete stdout line so far, parsed (a line still being written is left out, so
   * this can be called while the gateway is busy); a line that is not JSON fails the test.
   */
  logs(): LogLine[];
}

export interface GatewayProcessOptions {
  /** The process is killed once it has run this long (default PROCESS_LIMIT_MS). */
  limitMs?: number;
}

/**
 * Runs src/main.ts on a free port of 127.0.0.1 with `env` over a clean environment (no
 * gateway setting of the test run leaks in), and resolves once it logs that it is listening.
 * Killed when `t` ends.
 */
export async function startGatewayProcess(t: TestContext, env: Record<string, string | undefined> = {}, { limitMs = PROCESS_LIMIT_MS }: GatewayProcessOptions = {}): Promise<GatewayProcess> {
  const child = startNode(t, ['src/main.ts'], { env: gatewayEnv({ PORT: '0', HOST: '127.0.0.1', ...env }), limitMs });
  const listening = await waitForLog(child, LISTENING, Math.min(limitMs, PROCESS_LIMIT_MS));
  const url = listening.url as string;
  assert.match(url, /^https?:\/\/127\.0\.0\.1:[1-9]\d*$/, 'the gateway listens on a real port of 127.0.0.1');
  const logs = () => {
    const text = child.stdout();
    return parseLogLines(text.slice(0, text.lastIndexOf('\n') + 1));
  };
  return { url, child, logs };
}

export interface CommandResult extends Exit {
  stdout: string;
  stderr: string;
}

/** Runs `node --import tsx <args>` to its end (at most `limitMs`) and returns what it wrote. */
export async function runCommand(t: TestContext, args: string[], { env = gatewayEnv(), cwd = ROOT, limitMs = PROCESS_LIMIT_MS }: StartNodeOptions = {}): Promise<CommandResult> {
  const child = startNode(t, args, { env, cwd, limitMs });
  const exit = await exitWithin(child, limitMs);
  return { ...exit, stdout: child.stdout(), stderr: child.stderr() };
}
