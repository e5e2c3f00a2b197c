/** Statistics and output shared by the benchmarks: progress on stderr, results in bench/reports/. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Progress and notes go to stderr, so that stdout holds only the results. */
export function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** Median of the finite values; NaN when there are none. */
export function median(xs: readonly number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export const fmt = (n: number | undefined, digits = 0) => (n === undefined || !Number.isFinite(n) ? '—' : n.toFixed(digits));

/**
 * Where a benchmark writes the figures of its latest run: a tracked page of its own under
 * bench/reports/, replaced whole by each run, so that bench/README.md keeps only the method and
 * the findings, written by hand.
 */
export interface Report {
  /** bench/reports/<name>.md */
  file: string;
  /** The section of bench/README.md that explains the bench, e.g. `Proxy: gateway vs floors, Koa and Fastify`. */
  title: string;
  /** The command that writes it, e.g. `npm run bench:auth`. */
  script: string;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchor(heading: string): string {
  return heading.toLowerCase().replace(/[^a-z0-9 -]/g, '').replaceAll(' ', '-');
}

/** Replaces the report's page with this run's `generated` figures under a heading that points back at the method. */
export function writeReport({ file, title, script }: Report, generated: string): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, [
    `# ${title}: the latest run`,
    '',
    `Written by \`${script}\`, which replaces this page on each run that passes. What the bench`,
    `measures, how, and what the figures have shown: [bench/README.md](../README.md#${anchor(title)}).`,
    '',
    generated.trim(),
    '',
  ].join('\n'));
}

/** The first line of a report: when, and the command line (`script`: the npm script). */
export function runHeading(date: string, script: string): string {
  const args = process.argv.slice(2);
  return `Run of ${date.slice(0, 10)} (${date}), \`npm run ${script}${args.length > 0 ? ` -- ${args.join(' ')}` : ''}\`.`;
}

/** Writes `figures` as `<dir>/<prefix>-<start time>.json` and says where; returns the file. */
export function writeRawFigures(dir: string, prefix: string, started: Date, figures: unknown): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${prefix}-${started.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(figures, null, 2));
  log(`\nraw figures: ${file}`);
  return file;
}

/**
 * The run's report, unless `failure` says why the run failed (its figures measure something
 * else: the last report stays, and the exit code is 1) or `noReport`.
 */
export function updateReport(name: string, report: Report, generated: string, { failure, noReport }: { failure?: string | undefined; noReport: boolean }): void {
  if (failure !== undefined) {
    log(`\n${name}: FAILED: ${failure}; report not updated`);
    process.exitCode = 1;
  } else if (!noReport) {
    writeReport(report, generated);
    log(`results written to ${report.file}`);
  }
}
