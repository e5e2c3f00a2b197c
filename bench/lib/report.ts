/** Statistics and output shared by the benchmarks: progress on stderr, results in bench/README.md. */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/** Progress and notes go to stderr, so that stdout holds only the results. */
export function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** Median of the finite values; NaN when there are none. */
export function median(xs: number[]): number {
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
