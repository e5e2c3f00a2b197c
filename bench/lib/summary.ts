/**
 * What the benchmarks make of their runs: medians over rounds, per-round ratios between two
 * servers (or states) measured seconds apart, and the tables and lines that show them.
 */
import { QUIET_CORES } from './machine.js';
import { fmt, median } from './report.js';
import type { LoadFigures } from './wrk.js';

/** Numeric fields of R (undefined where a run has none). */
type NumericKey<R> = { [K in keyof R]-?: R[K] extends number | undefined ? K : never }[keyof R];

/** For each of `keys`, the median over `runs` (missing and non-finite values left out; NaN when none is left). */
export function medians<R, K extends NumericKey<R>>(runs: readonly R[], keys: readonly K[]): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const k of keys) out[k] = median(runs.map((r) => (r[k] as number | undefined) ?? NaN));
  return out;
}

/** For each of `keys`, the sum over `runs` (counts). */
export function sums<R, K extends NumericKey<R>>(runs: readonly R[], keys: readonly K[]): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const k of keys) out[k] = runs.reduce<number>((a, r) => a + (r[k] as number), 0);
  return out;
}

/** [smallest, largest]. */
export function range(xs: readonly number[]): [number, number] {
  return [Math.min(...xs), Math.max(...xs)];
}

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(xs: readonly number[]): Spread {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

// ---------------------------------------------------------------------------------------------
// Load runs (wrk against one server)

/** A server's load runs as one row: req/s as median and range, counts summed, the rest medians. */
export type LoadRow = Omit<LoadFigures, 'maxMs' | 'stolenCores' | 'attempts' | 'sent'> & { rpsRange: [number, number] };

/** `backend`: the runs measured a backend behind the server (backendCpuUsPerReq). */
export function loadRow(runs: readonly LoadFigures[], { backend = false }: { backend?: boolean } = {}): LoadRow {
  const rps = runs.map((r) => r.rps);
  return {
    rps: median(rps),
    rpsRange: range(rps),
    ...medians(runs, ['p50Ms', 'p99Ms', 'serverCpuUsPerReq', 'serverCoreUse']),
    ...(backend ? medians(runs, ['backendCpuUsPerReq']) : {}),
    ...medians(runs, ['clientCpuUsPerReq', 'clientCoreUse', 'foreignCores']),
    ...sums(runs, ['requests', 'non2xx', 'socketErrors']),
  };
}

// ---------------------------------------------------------------------------------------------
// Rounds

/** What picks runs out of a round: the fields they must equal, e.g. `{ target: 'gateway' }`. */
export type Match<R> = Partial<R>;

/** The (first) run of `round` whose fields equal those of `match`. */
export function runOf<R extends { round: number }>(runs: readonly R[], match: Match<R>, round: number): R | undefined {
  const keys = Object.keys(match) as (keyof R)[];
  return runs.find((r) => r.round === round && keys.every((k) => r[k] === match[k]));
}

/** `f` of the runs `a` and `b` pick in each round 0 … rounds-1 that has both, where it is defined. */
export function perRound<R extends { round: number }>(
  runs: readonly R[], rounds: number, a: Match<R>, b: Match<R>, f: (x: R, y: R) => number | undefined,
): number[] {
  const out: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const x = runOf(runs, a, round);
    const y = runOf(runs, b, round);
    const v = x !== undefined && y !== undefined ? f(x, y) : undefined;
    if (v !== undefined) out.push(v);
  }
  return out;
}

/** a's metric ÷ b's in the same round (seconds apart, so drift cancels), over the rounds: median and range. */
export function pairedRatio<R extends { round: number }>(runs: readonly R[], rounds: number, a: Match<R>, b: Match<R>, metric: (r: R) => number): Spread {
  return spread(perRound(runs, rounds, a, b, (x, y) => (metric(y) > 0 ? metric(x) / metric(y) : undefined)));
}

export interface Ratio extends Spread {
  name: string;
  /** The stated target for this ratio, if any. */
  target?: { text: string; met: boolean };
}

export function ratioLine(r: Ratio): string {
  const target = r.target === undefined ? '' : ` — target ${r.target.text}: ${r.target.met ? 'met' : '**not met**'}`;
  return `- ${r.name}: **${fmt(r.median, 2)}×** (per-round ${fmt(r.min, 2)}–${fmt(r.max, 2)})${target}`;
}

/** A comparison under load as reported: the results table, the ratio lines, the req/s per round. */
export interface LoadReport {
  table: string;
  ratios: string[];
  rounds: string;
}

/** The report's lines in its page under bench/reports/. */
export function loadReportLines({ table, ratios, rounds }: LoadReport): string[] {
  return [table, '', 'Ratios (median of the per-round ratios, range over rounds):', '', ...ratios, '', 'req/s per round:', '', rounds];
}

/** The report on stdout. */
export function loadReportText({ table, ratios, rounds }: LoadReport): string {
  return `\n${table}\n\n${ratios.join('\n')}\n\nreq/s per round:\n${rounds}\n`;
}

/** One line of a rounds table: its first cells, and the runs it shows. */
export interface RoundsLine<R> {
  labels: string[];
  match: Match<R>;
}

/** A markdown table of `metric` per round: a line per entry of `lines`, a column per round after the `heads`. */
export function roundsTable<R extends { round: number }>(runs: readonly R[], rounds: number, heads: string[], lines: RoundsLine<R>[], metric: (r: R) => number): string {
  const out = [
    `| ${[...heads, ...Array.from({ length: rounds }, (_, i) => `round ${i + 1}`)].join(' | ')} |`,
    `|${'---|'.repeat(heads.length)}${'---:|'.repeat(rounds)}`,
  ];
  for (const { labels, match } of lines) {
    const cells = Array.from({ length: rounds }, (_, round) => {
      const run = runOf(runs, match, round);
      return fmt(run === undefined ? undefined : metric(run));
    });
    out.push(`| ${[...labels, ...cells].join(' | ')} |`);
  }
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------
// The machine during the kept runs

interface Kept {
  foreignCores: number;
  stolenCores: number;
  attempts?: number;
}

/** Runs repeated because other processes disturbed them, and kept runs that still saw QUIET_CORES or more of other load. */
export function disturbed(runs: readonly Kept[]): { repeated: number; noisy: number } {
  return { repeated: runs.filter((r) => (r.attempts ?? 1) > 1).length, noisy: runs.filter((r) => r.foreignCores >= QUIET_CORES).length };
}

/** Report line: the time the hypervisor stole. */
export function stolenLine(runs: readonly Kept[]): string {
  return `- time stolen by the hypervisor during the kept runs: median ${fmt(median(runs.map((r) => r.stolenCores)), 2)}, at most ${fmt(Math.max(...runs.map((r) => r.stolenCores)), 2)} cores`;
}

/** Report line: waiting for other load and repeating disturbed runs (`each`: the runs waited for, e.g. "run"). */
export function otherLoadLine(runs: readonly Kept[], quietWait: number, each: string): string {
  const { repeated, noisy } = disturbed(runs);
  return `- other load on the machine: before each ${each} the script waited until other processes used less than ${QUIET_CORES} cores and repeated a disturbed run (at most twice, ${quietWait} s of waiting and repeats in all); ${repeated} run(s) were repeated, ${noisy} of the ${runs.length} kept still saw ${QUIET_CORES}+ cores`;
}
