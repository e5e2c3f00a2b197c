/** Statistics and output shared by the benchmarks: progress on stderr, results in bench/README.md. */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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

export interface ReadmeSection {
  file: string;
  /** The section's heading line, e.g. `## Proxy`. */
  section: string;
  /** Marker comments around the generated part; text outside them is left as written. */
  begin: string;
  end: string;
}

/** Replaces the text between the markers, or adds the markers at the end of the section (or file). */
export function writeReadmeSection({ file, section, begin, end }: ReadmeSection, generated: string): void {
  const block = `${begin}\n${generated.trim()}\n${end}`;
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const from = text.indexOf(begin);
  const to = text.indexOf(end);
  if (from >= 0 && to > from) {
    text = `${text.slice(0, from)}${block}${text.slice(to + end.length)}`;
  } else if (text.includes(section)) {
    const start = text.indexOf(section) + section.length;
    const next = text.slice(start).search(/\n## /);
    const at = next < 0 ? text.length : start + next;
    text = `${text.slice(0, at).trimEnd()}\n\n${block}\n${text.slice(at)}`;
  } else {
    text = `${text.trimEnd()}\n\n${section}\n\n${block}\n`;
  }
  writeFileSync(file, text);
}

/** The first line of a README section: when, and the command line (`script`: the npm script). */
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
 * The run's README section, unless `failure` says why the run failed (its figures measure
 * something else: they stay out of the README, and the exit code is 1) or `noReadme`.
 */
export function updateReadme(name: string, readme: ReadmeSection, generated: string, { failure, noReadme }: { failure?: string | undefined; noReadme: boolean }): void {
  if (failure !== undefined) {
    log(`\n${name}: FAILED: ${failure}; README not updated`);
    process.exitCode = 1;
  } else if (!noReadme) {
    writeReadmeSection(readme, generated);
    log(`results written to ${readme.file}`);
  }
}
