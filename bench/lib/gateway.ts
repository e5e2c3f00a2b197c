/**
 * The gateway as the benchmarks run it: src/ compiled into bench/results/dist and started as
 * `node main.js` (as the Docker image runs dist/main.js), pinned to the server core, with a
 * clean environment plus the settings a benchmark gives.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { describeSettings } from '../../src/config/schema.js';
import { cpuModel, firstLine, freePort, nproc, pinned, SERVER_CORE, wrkVersion } from './machine.js';
import { isRunning, Output, track } from './processes.js';
import { log } from './report.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const RESULTS = join(ROOT, 'bench', 'results');
/** Tracked: each bench's latest figures, one page a bench. */
export const REPORTS = join(ROOT, 'bench', 'reports');
const BUILD_DIR = join(RESULTS, 'dist');

export interface Runtime {
  mode: 'dist' | 'tsx';
  /** Node arguments before any extra flags, then the entry point. */
  entry: string[];
  cli: (name: string) => string[];
  note: string;
}

/** Compiles src/ (falling back to tsx if it does not compile, as while someone is mid-edit). */
export function prepareRuntime(mode: 'dist' | 'tsx'): Runtime {
  const tsx: Runtime = {
    mode: 'tsx',
    entry: ['--import', 'tsx', join(ROOT, 'src', 'main.ts')],
    cli: (name) => ['--import', 'tsx', join(ROOT, 'src', 'cli', `${name}.ts`)],
    note: 'src/ run through tsx (`node --import tsx src/main.ts`)',
  };
  const tsc = join(ROOT, 'node_modules', '.bin', 'tsc');
  // The dashboard's script, as `npm run build:dashboard` does (dist/dashboard/public/js/, where
  // src/dashboard/serve.ts finds it run through tsx): the gateway does not start without it.
  if (mode === 'tsx') {
    spawnSync(tsc, ['-p', join(ROOT, 'tsconfig.dashboard.json')], { cwd: ROOT, encoding: 'utf8' });
    return tsx;
  }
  rmSync(BUILD_DIR, { recursive: true, force: true });
  const r = spawnSync(tsc, ['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', BUILD_DIR], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0 || !existsSync(join(BUILD_DIR, 'main.js'))) {
    log(`build failed (src/ may be mid-edit), falling back to tsx:\n${(r.stdout + r.stderr).split('\n').slice(0, 10).join('\n')}`);
    return tsx;
  }
  // As `npm run build` does: the dashboard's page and assets are read from beside its module at start.
  cpSync(join(ROOT, 'src', 'dashboard', 'public'), join(BUILD_DIR, 'dashboard', 'public'), { recursive: true });
  spawnSync(tsc, ['-p', join(ROOT, 'tsconfig.dashboard.json'), '--outDir', join(BUILD_DIR, 'dashboard', 'public', 'js')], { cwd: ROOT, encoding: 'utf8' });
  return {
    mode: 'dist',
    entry: [join(BUILD_DIR, 'main.js')],
    cli: (name) => [join(BUILD_DIR, 'cli', `${name}.js`)],
    note: 'src/ compiled by `tsc -p tsconfig.build.json` into bench/results/dist (with src/dashboard/public copied and the dashboard script compiled, as `npm run build` does) and run as `node main.js` (as the Docker image runs dist/main.js; dist/ itself is not touched)',
  };
}

/** What is measured: src/ as it is when the run starts (others may be committing meanwhile). */
export function sourceVersion(): string {
  const head = firstLine('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD']);
  const dirty = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).stdout.trim() !== '';
  return `commit ${head}${dirty ? ' with uncommitted changes in src/' : ''}`;
}

/** Where and on what a run measured: the head of its `env` in the results (`source`: from sourceVersion). */
export function runEnv(started: Date, source: string, runtime: Runtime) {
  return { date: started.toISOString(), commit: source, cpu: cpuModel(), nproc, node: process.version, wrk: wrkVersion(), runtime: runtime.note };
}

/** The environment with every gateway setting removed, so nothing from the caller's shell leaks in. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const row of describeSettings()) if (row.env !== undefined) delete env[row.env];
  delete env.GATEWAY_CONFIG;
  delete env.NODE_OPTIONS;
  return env;
}

export interface Gateway<N extends string = string> {
  name: N;
  proc: ChildProcess;
  pid: number;
  url: string;
  /** Empty when stdout was discarded. */
  out: Output;
  err: Output;
}

export interface GatewayStart<N extends string> {
  name: N;
  runtime: Runtime;
  /** Gateway settings (environment variables) on top of NODE_ENV=production, HOST and PORT (and ALLOW_DEMO_DATA: the benches sign in with the demo keys). */
  settings: Record<string, string>;
  nodeFlags?: string[];
  /**
   * 'ignore' sends stdout (the log) to /dev/null, as cheap a sink as any: under LOG_LEVEL=info
   * a pipe read by this script would put part of the logging cost on the client core. A file
   * descriptor: the log goes to that file (the caller closes its copy once the gateway runs).
   */
  stdout?: 'pipe' | 'ignore' | number;
  /** The core(s) it runs on, a taskset list (SERVER_CORE unless given; ALL_CORES: anywhere). */
  core?: string | null;
}

let dataDir: string | undefined;

/**
 * A copy of the demo data of its own for each gateway a bench starts: the data file has one
 * writer (state/data-file/lock.ts), so two gateways on the shipped file would wait for each
 * other's lock. Copies go in one directory, removed when the bench exits.
 */
function ownDemoData(name: string): string {
  if (dataDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-data-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    dataDir = dir;
  }
  const file = join(dataDir, `${name.replace(/[^A-Za-z0-9._-]/g, '_')}-${randomUUID()}.json`);
  copyFileSync(join(ROOT, 'config', 'demo-data.json'), file);
  return file;
}

/** Starts a gateway on a free port of 127.0.0.1 and waits until /readyz answers 200. */
export async function startGateway<N extends string>({ name, runtime, settings, nodeFlags = [], stdout = 'pipe', core = SERVER_CORE }: GatewayStart<N>): Promise<Gateway<N>> {
  // PORT=0 would pick a port, but the line that names it is logged at info, which may be off.
  const port = await freePort();
  // Redis part of readiness, so that "ready" means its connection is up too (not only `degraded`).
  const env = { ...cleanEnv(), NODE_ENV: 'production', ALLOW_DEMO_DATA: 'true', HOST: '127.0.0.1', PORT: String(port), READINESS_REQUIRE_REDIS: 'true', GATEWAY_DATA_FILE: settings.GATEWAY_DATA_FILE ?? ownDemoData(name), ...settings };
  const [cmd, args] = pinned(core, process.execPath, [...nodeFlags, ...runtime.entry]);
  const proc = track(spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', stdout, 'pipe'] }));
  const gw: Gateway<N> = { name, proc, pid: proc.pid!, url: `http://127.0.0.1:${port}`, out: new Output(proc.stdout), err: new Output(proc.stderr) };
  await waitReady(gw.url, '/readyz', proc, `gateway ${name}`, () => `${gw.err.tail()}\n${gw.out.tail()}`);
  return gw;
}

/** Polls `path` until it answers `status`; throws if the process exits or 20 s pass. */
export async function waitReady(url: string, path: string, proc: ChildProcess, what: string, tail: () => string, status = 200): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (!isRunning(proc)) throw new Error(`${what} exited before listening:\n${tail()}`);
    try {
      const res = await fetch(`${url}${path}`);
      await res.arrayBuffer();
      if (res.status === status) return;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`${what} not ready on ${url}:\n${tail()}`);
    await sleep(50);
  }
}
