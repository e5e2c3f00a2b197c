/**
 * `npm test`: every test/**\/*.test.ts file (or the files named on the command line), several
 * at a time, reported by node:test's spec reporter. It is `node --test` with two differences.
 *
 * The order. On two cores the run lasts as long as its last file, and `node --test` starts
 * files in alphabetical order, so a file of a minute (a browser suite, the image) could start
 * last and run alone. Here the longest start first: by the durations the previous run on this
 * checkout recorded (node_modules/.cache/test-durations.json), and on a fresh clone by the
 * kinds of file known to be long (browsers, real processes, Redis).
 *
 * Shared processes. A process that loads the sources costs about half a second of CPU before
 * its first test, which the small files of the folders in SHARED paid each time,
 * a fifth of the run's CPU. Their files run several to a process instead (each process imports
 * its files one after another; their tests run one at a time, as in a file of their own). Those
 * folders hold files that change nothing outside themselves (no environment variable, working
 * directory, umask, global or mocked timer), which test/unit/test-isolation.test.ts checks;
 * every other file keeps a process of its own. A failure still names the test's own file.
 *
 * One Chromium. When a file to run drives a browser, the run starts one Chromium and every
 * such file connects to it (test/helpers/chromium.ts), each test in a context of its own.
 */
import { existsSync, globSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CHROMIUM, CHROMIUM_ENDPOINT, startSharedChromium } from '../test/helpers/chromium.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CACHE = join(ROOT, 'node_modules/.cache');
const DURATIONS = join(CACHE, 'test-durations.json');
/** On two cores most files wait on processes, sockets and browsers more than they compute. */
const CONCURRENCY = Math.max(6, availableParallelism() * 3);

/** A fresh clone's guess, longest first: the files that drive Chromium or start many processes. */
const LONG_FIRST = [/^test\/dashboard\//, /^test\/cli\//, /^test\/ops\//, /^test\/client\//, /^test\/redis\//, /^test\/(startup|restart|readme)\./];
/** The folders whose files share processes (see above). */
const SHARED = /^test\/(unit|state|owner|http|proxy|tls|redis|client|dashboard)\//;
/**
 * Files of those folders that run alone: one tests what a process does once (its first hash);
 * two replace a global for a test (the client's Request, setTimeout), and the browser test's
 * page scripts write globals of the page, which the check cannot tell from the process's; the
 * ACME tests set acme-client's HTTPS agent (its process-wide axios default) to trust pebble.
 */
const OWN_PROCESS = new Set([
  'test/unit/owner-dummy-hash.test.ts',
  'test/tls/acme.test.ts',
  'test/tls/acme-gateway.test.ts',
  'test/client/fetch.test.ts',
  'test/client/retries.test.ts',
  'test/client/browser.test.ts',
]);

export function sharesProcess(file: string): boolean {
  return SHARED.test(file) && !OWN_PROCESS.has(file);
}
/** How long, by the recorded durations, the files of one shared process may take together. */
const SHARED_BUDGET_MS = 30_000;
/** A file never recorded: its guess when packing shared processes. */
const UNKNOWN_MS = 2_000;

function readDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(DURATIONS, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/**
 * The shared files packed into processes, longest file first into the lightest process: as few
 * processes as the budget allows, but no fewer than the files run at once, so that they spread.
 */
function pack(files: string[], durations: Record<string, number>): string[][] {
  const weight = (file: string) => durations[file] ?? UNKNOWN_MS;
  const total = files.reduce((sum, file) => sum + weight(file), 0);
  const count = Math.min(files.length, Math.max(CONCURRENCY, Math.ceil(total / SHARED_BUDGET_MS)));
  const groups = Array.from({ length: count }, () => ({ files: [] as string[], weight: 0 }));
  for (const file of [...files].sort((a, b) => weight(b) - weight(a) || a.localeCompare(b))) {
    const lightest = groups.reduce((min, group) => (group.weight < min.weight ? group : min));
    lightest.files.push(file);
    lightest.weight += weight(file);
  }
  return groups.filter((group) => group.files.length > 0).map((group) => group.files.sort());
}

/** One entry file per shared process: it imports its test files in turn. */
function writeEntries(groups: string[][]): Map<string, string[]> {
  const dir = join(CACHE, 'test-processes');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const entries = new Map<string, string[]>();
  groups.forEach((files, i) => {
    const entry = join(dir, `shared-${i + 1}.mjs`);
    const imports = files.map((file) => `await import(${JSON.stringify(pathToFileURL(join(ROOT, file)).href)});`);
    writeFileSync(entry, `// Written by scripts/run-tests.ts: these test files, in one process.\n${imports.join('\n')}\n`);
    entries.set(entry, files);
  });
  return entries;
}

/** Whether a test file drives Chromium (through the browser or dashboard helpers). */
function drivesBrowser(file: string): boolean {
  return /helpers\/(browser|dashboard)\.js'/.test(readFileSync(join(ROOT, file), 'utf8'));
}

async function main(): Promise<void> {
  const named = process.argv.slice(2);
  const files = (named.length > 0 ? named : globSync('test/**/*.test.ts', { cwd: ROOT })).map((file) => relative(ROOT, join(ROOT, file)));
  const durations = readDurations();
  const entries = writeEntries(pack(files.filter(sharesProcess), durations));
  const guess = (file: string) => {
    const kind = LONG_FIRST.findIndex((pattern) => pattern.test(file));
    return kind === -1 ? 0 : 1_000_000 - kind;
  };
  const weights = new Map<string, number>(files.filter((file) => !sharesProcess(file)).map((file) => [join(ROOT, file), durations[file] ?? guess(file)]));
  for (const [entry, members] of entries) weights.set(entry, members.reduce((sum, file) => sum + (durations[file] ?? UNKNOWN_MS), 0));
  const order = [...weights.keys()].sort((a, b) => weights.get(b)! - weights.get(a)! || a.localeCompare(b));

  const browser = existsSync(CHROMIUM) && files.some(drivesBrowser) ? await startSharedChromium() : undefined;
  if (browser !== undefined) process.env[CHROMIUM_ENDPOINT] = browser.endpoint;

  const seen: Record<string, number> = {};
  const stream = run({
    files: order,
    concurrency: CONCURRENCY,
    execArgv: ['--import', fileURLToPath(new URL('../test/helpers/resolve-ts.ts', import.meta.url))],
  });
  stream.on('test:fail', () => {
    process.exitCode = 1;
  });
  // A file's weight: the time its top-level tests took (its tests run one after another).
  // test:pass and test:fail come once per test, in order (test:complete may come twice per
  // test), naming the test's own file, in a shared process too.
  const known = new Set(files);
  const weigh = (event: { nesting: number; file?: string | undefined; details: { duration_ms: number } }) => {
    if (event.nesting !== 0 || event.file === undefined) return;
    const file = relative(ROOT, event.file);
    if (known.has(file)) seen[file] = Math.round((seen[file] ?? 0) + event.details.duration_ms);
  };
  stream.on('test:pass', weigh);
  stream.on('test:fail', weigh);
  stream.on('end', () => {
    mkdirSync(dirname(DURATIONS), { recursive: true });
    writeFileSync(DURATIONS, `${JSON.stringify({ ...durations, ...seen }, null, 1)}\n`);
    void browser?.close();
  });
  stream.compose(spec).pipe(process.stdout);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
