/**
 * What every benchmark's main() needs around its own measuring, written once: the frame of a
 * run (clean-up on signals, a watchdog, the tools checked, this script on the client core, the
 * gateway's runtime prepared, a temporary folder, everything stopped and removed at the end),
 * and the rounds in which several servers are measured under the same load.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareRuntime, sourceVersion, type Runtime } from './gateway.js';
import { checkPrerequisites, CLIENT_CORE, pinSelf, type Quiet } from './machine.js';
import { installCleanup, removeAtExit, runMain, startWatchdog, stopAll } from './processes.js';
import { fmt, log } from './report.js';

/** What a run hands to the benchmark's body. */
export interface BenchRun {
  /** When the run began: the report's date and the raw figures' file name. */
  started: Date;
  /** A folder of the run's own, removed at the end however the run ends. */
  tmp: string;
  /** The commit of src/ (marked when the work tree differs), as the report names it. */
  source: string;
  runtime: Runtime;
}

export interface BenchFrame {
  /** The npm script's name, e.g. `bench:auth`: the prefix of every message. */
  name: string;
  /** `proxy`, `auth`, …: names the temporary folder. */
  slug: string;
  /** Hard bound on the whole run, whatever happens. */
  budgetMs: number;
  /** Programs that must be on the PATH (`wrk`, `redis-server`). */
  tools: string[];
  runtime: 'dist' | 'tsx';
}

/**
 * Runs `body` as the benchmark's main. Every process it starts (tracked by processes.ts) and
 * its folder are gone when it returns, throws, is interrupted or runs over `budgetMs`.
 */
export function runBench(frame: BenchFrame, body: (run: BenchRun) => Promise<void>): void {
  installCleanup(frame.name);
  runMain(frame.name, async () => {
    const started = new Date();
    startWatchdog(frame.name, frame.budgetMs);
    checkPrerequisites(frame.name, frame.tools);
    if (!pinSelf(CLIENT_CORE)) log('note: not pinning processes to cores (needs taskset and 2+ cores)');
    const tmp = mkdtempSync(join(tmpdir(), `bench-${frame.slug}-`));
    removeAtExit(tmp);
    try {
      await body({ started, tmp, source: sourceVersion(), runtime: prepareRuntime(frame.runtime) });
    } finally {
      await stopAll();
      rmSync(tmp, { recursive: true, force: true });
    }
  });
}

export interface RotatedRounds<T extends string, R> {
  targets: readonly T[];
  rounds: number;
  seconds: number;
  /** Seconds of warm-up run per target before the rounds; 0: none. */
  warmup: number;
  quiet: Quiet;
  label: (target: T) => string;
  /** One run of `target` for `seconds` (round -1: the warm-up). */
  measure: (target: T, seconds: number, round: number) => Promise<R>;
  /** The run's progress line. */
  line: (run: R) => string;
}

/**
 * A warm-up run per target, then `rounds` rounds in which every target runs once, the order
 * rotated by one target each round: runs of one round are seconds apart, so drift of the
 * machine cancels out of per-round ratios. A run other processes disturbed is repeated.
 */
export async function rotatedRounds<T extends string, R extends { rps: number; foreignCores: number; attempts?: number }>(
  { targets, rounds, seconds, warmup, quiet, label, measure, line }: RotatedRounds<T, R>,
): Promise<R[]> {
  if (warmup > 0) {
    log(`warm-up: ${warmup} s per server`);
    for (const target of targets) log(`  warm-up ${line(await measure(target, warmup, -1))}`);
  }
  const runs: R[] = [];
  for (let round = 0; round < rounds; round++) {
    const shift = round % targets.length;
    for (const target of [...targets.slice(shift), ...targets.slice(0, shift)]) {
      const run = await quiet.repeatDisturbed(label(target), seconds, () => measure(target, seconds, round), (r) => `${fmt(r.rps)} req/s`);
      runs.push(run);
      log(`round ${round + 1}/${rounds} ${line(run)}`);
    }
  }
  return runs;
}
