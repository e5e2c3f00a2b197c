/**
 * The machine under the benchmarks: core pinning, CPU time of processes and of the whole
 * machine, and waiting for other people's load to pass. The machine is a small shared VM:
 * others run test suites on it, and the hypervisor takes time now and then, so every figure
 * comes with what else was running.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { children, isRunning } from './processes.js';
import { log } from './report.js';

export const nproc = cpus().length;
const hasTaskset = spawnSync('taskset', ['-V']).status === 0;
/** One core for the server under test, the other for everything else (the load generator included). */
export const PIN = hasTaskset && nproc >= 2;
export const SERVER_CORE = '1';
export const CLIENT_CORE = '0';
/** Every core, as taskset's list: for a process the scheduler may place anywhere. */
export const ALL_CORES = Array.from({ length: nproc }, (_, i) => i).join(',');
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/**
 * The command line that runs `cmd` on `core` (taskset covers every thread and child process it
 * will start; a list such as "0,1" is allowed: ALL_CORES for all of them). `null`: no taskset,
 * so it inherits this script's affinity (CLIENT_CORE once runBench has pinned it).
 */
export function pinned(core: string | null, cmd: string, args: string[]): [string, string[]] {
  return PIN && core !== null ? ['taskset', ['-c', core, cmd, ...args]] : [cmd, args];
}

/** Moves a running process (all its threads) to `cores` ("0", "0,1"); false when not pinning or it failed. */
export function repin(pid: number, cores: string): boolean {
  return PIN && spawnSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { stdio: 'ignore' }).status === 0;
}

/** Moves this script (all its threads) to `core`; false when not pinning. */
export function pinSelf(core: string): boolean {
  return PIN && spawnSync('taskset', ['-a', '-p', '-c', core, String(process.pid)], { stdio: 'ignore' }).status === 0;
}

export function firstLine(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n')[0]!.trim();
}

export function cpuModel(): string {
  return `${nproc} × ${cpus()[0]?.model ?? 'unknown'}`;
}

export function wrkVersion(): string {
  return firstLine('wrk', ['--version']).replace(/ Copyright.*/, '');
}

/** Fails unless this Node meets package.json's `engines` (the gateway's own floor) and every tool is on the PATH. */
export function checkPrerequisites(name: string, tools: string[]): void {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines?: { node?: string } };
  const wanted = /^>=\s*(\d+)(?:\.(\d+))?/.exec(pkg.engines?.node ?? '');
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  if (wanted !== null && (major < Number(wanted[1]) || (major === Number(wanted[1]) && minor < Number(wanted[2] ?? 0)))) {
    throw new Error(`Node ${process.version}: the gateway needs ${pkg.engines!.node} (run through npm run ${name}, which uses node_modules/.bin/node)`);
  }
  for (const tool of tools) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) throw new Error(`${tool} is not installed`);
  }
}

export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** utime + stime of a whole process (every thread), in seconds; 0 once it is gone. */
export function processCpuSeconds(pid: number, withReapedChildren = false): number {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 0;
  }
  // After "(name) ": stat(5) fields from 3 (state) on; utime is 14, stime 15, cutime 16, cstime 17.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  return (f[11]! + f[12]! + (withReapedChildren ? f[13]! + f[14]! : 0)) / CLK_TCK;
}

/** The processes whose parent is `pid` (a cluster primary's workers), from /proc. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // After "(name) ": state, then ppid.
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(entry));
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/** Context switches of every thread of a process so far (voluntary and not). */
export function contextSwitches(pid: number): number {
  let n = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        for (const m of readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8').matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/gm)) n += Number(m[1]);
      } catch { /* the thread ended */ }
    }
  } catch { /* the process ended */ }
  return n;
}

/** CPU seconds every core of the machine spent busy (idle, iowait and steal excluded), and stolen by the hypervisor. */
function machineSeconds(): { busy: number; steal: number } {
  let busy = 0;
  let steal = 0;
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    if (!/^cpu\d+ /.test(line)) continue;
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
    busy += v[0]! + v[1]! + v[2]! + v[5]! + v[6]!;
    steal += v[7] ?? 0;
  }
  return { busy: busy / CLK_TCK, steal: steal / CLK_TCK };
}

/**
 * CPU used by the benchmark (this script, the processes it waited for such as wrk, and the
 * live ones it started) and by everything else on the machine.
 */
export interface Load {
  at: number;
  machine: number;
  steal: number;
  self: number;
  children: number;
}

export function sampleLoad(): Load {
  let live = 0;
  for (const child of children) if (isRunning(child) && child.pid !== undefined) live += processCpuSeconds(child.pid);
  const m = machineSeconds();
  return { at: performance.now(), machine: m.busy, steal: m.steal, self: processCpuSeconds(process.pid, true), children: live };
}

/** Cores' worth of CPU that something other than this benchmark used between two samples. */
export function foreignCores(a: Load, b: Load): number {
  const seconds = (b.at - a.at) / 1000;
  const foreign = (b.machine - a.machine) - (b.self - a.self) - (b.children - a.children);
  return seconds <= 0 ? 0 : Math.max(0, foreign / seconds);
}

/** Cores' worth of time the hypervisor took from this machine between two samples. */
export function stolenCores(a: Load, b: Load): number {
  const seconds = (b.at - a.at) / 1000;
  return seconds <= 0 ? 0 : (b.steal - a.steal) / seconds;
}

/** Foreign load above this many cores makes a run wait (up to the quiet-wait budget). */
export const QUIET_CORES = 0.15;

/**
 * Waiting for other load to pass, and repeating runs it disturbed, within one budget for the
 * whole benchmark: on a busy machine the run still ends in bounded time, with the disturbance
 * reported rather than hidden.
 */
export class Quiet {
  budgetMs: number;
  constructor(seconds: number) {
    this.budgetMs = seconds * 1000;
  }

  /** Waits until other processes use less than QUIET_CORES; returns what they used last. */
  async wait(label: string): Promise<number> {
    let waited = 0;
    for (;;) {
      const a = sampleLoad();
      await sleep(500);
      const load = foreignCores(a, sampleLoad());
      if (load < QUIET_CORES || this.budgetMs <= 0) {
        if (waited > 0) log(`  (waited ${(waited / 1000).toFixed(1)} s for other load to pass before ${label}; now ${load.toFixed(2)} cores)`);
        return load;
      }
      if (waited === 0) log(`  other processes use ${load.toFixed(2)} cores: waiting before ${label}…`);
      waited += 500;
      this.budgetMs -= 500;
    }
  }

  /** `measure` again (at most twice more) while other processes disturbed it and budget is left. */
  async repeatDisturbed<R extends { foreignCores: number; attempts?: number }>(label: string, seconds: number, measure: () => Promise<R>, describe: (r: R) => string): Promise<R> {
    for (let attempt = 1; ; attempt++) {
      const run = await measure();
      run.attempts = attempt;
      if (run.foreignCores < QUIET_CORES || attempt === 3 || this.budgetMs <= 0) return run;
      log(`  ${label}: other processes used ${run.foreignCores.toFixed(2)} cores during the run (${describe(run)}): repeating it`);
      this.budgetMs -= seconds * 1000;
    }
  }
}
