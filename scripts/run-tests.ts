/**
 * `npm test`: every test/**\/*.test.ts file (or the files named on the command line), each in
 * a process of its own, several at a time, reported by node:test's spec reporter.
 *
 * It is `node --test` with one difference: the order. On two cores the run lasts as long as
 * its last file, and `node --test` starts files in alphabetical order, so a file of a minute
 * (a browser suite, the image) could start last and run alone. Here the longest files start
 * first: by the durations the previous run on this checkout recorded
 * (node_modules/.cache/test-durations.json), and on a fresh clone by the kinds of file known
 * to be long (browsers, real processes, Redis). The order changes no test: files share
 * nothing (CONTRIBUTING.md, "How tests run").
 */
import { globSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DURATIONS = join(ROOT, 'node_modules/.cache/test-durations.json');
/** On two cores most files wait on processes, sockets and browsers more than they compute. */
const CONCURRENCY = Math.max(6, availableParallelism() * 3);

/** A fresh clone's guess, longest first: the files that drive Chromium or start many processes. */
const LONG_FIRST = [/^test\/dashboard\//, /^test\/cli\//, /^test\/ops\//, /^test\/client\//, /^test\/redis\//, /^test\/(startup|restart|readme)\./];

function readDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(DURATIONS, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

function ordered(files: string[], durations: Record<string, number>): string[] {
  const guess = (file: string) => {
    const kind = LONG_FIRST.findIndex((pattern) => pattern.test(file));
    return kind === -1 ? 0 : 1_000_000 - kind;
  };
  const weight = (file: string) => durations[file] ?? guess(file);
  return [...files].sort((a, b) => weight(b) - weight(a) || a.localeCompare(b));
}

const named = process.argv.slice(2);
const files = (named.length > 0 ? named : globSync('test/**/*.test.ts', { cwd: ROOT })).map((file) => relative(ROOT, join(ROOT, file)));
const durations = readDurations();
const seen: Record<string, number> = {};

const stream = run({
  files: ordered(files, durations).map((file) => join(ROOT, file)),
  concurrency: CONCURRENCY,
  execArgv: ['--import', fileURLToPath(new URL('../test/helpers/resolve-ts.ts', import.meta.url))],
});
stream.on('test:fail', () => {
  process.exitCode = 1;
});
// A file's weight: the time its top-level tests took (its tests run one after another).
// test:pass and test:fail come once per test, in order (test:complete may come twice per test).
const weigh = (event: { nesting: number; file?: string | undefined; details: { duration_ms: number } }) => {
  if (event.nesting !== 0 || event.file === undefined) return;
  const file = relative(ROOT, event.file);
  seen[file] = Math.round((seen[file] ?? 0) + event.details.duration_ms);
};
stream.on('test:pass', weigh);
stream.on('test:fail', weigh);
stream.on('end', () => {
  mkdirSync(dirname(DURATIONS), { recursive: true });
  writeFileSync(DURATIONS, `${JSON.stringify({ ...durations, ...seen }, null, 1)}\n`);
});
stream.compose(spec).pipe(process.stdout);
