/**
 * The test files that share processes (scripts/run-tests.ts, sharesProcess) change nothing outside
 * themselves: a file that set an environment variable, moved the working directory, changed
 * the umask, mocked timers or wrote a global would change the files run after it in the same
 * process. Such a file belongs in a folder whose files run alone.
 */
import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { sharesProcess } from '../../scripts/run-tests.js';
import { ROOT } from '../helpers/process.js';

const PROCESS_WIDE: [RegExp, string][] = [
  [/process\.env(\.\w+|\[[^\]]+\])\s*(=[^=]|\?\?=|\|\|=)|delete\s+process\.env/, 'writes an environment variable'],
  [/process\.chdir\(/, 'moves the working directory'],
  [/process\.umask\(\s*[^)\s]/, 'changes the umask'],
  [/mock\.timers/, 'mocks the global timers'],
  [/setGlobalDispatcher\(/, 'replaces fetch\'s dispatcher'],
  [/globalThis(\.\w+|\[[^\]]+\])\s*=[^=]/, 'writes a global'],
  [/\.defaults\.[\w.]+\s*=[^=]/, 'writes a library\'s process-wide default (axios.defaults.…)'],
  [/process\.(on|once|addListener)\(\s*['"](uncaughtException|unhandledRejection|exit|SIG\w+)/, 'listens to the process'],
  [/process\.exitCode\s*=|process\.exit\(/, 'decides the process\'s exit'],
];

test('the files of the shared folders change nothing a file run after them in the same process would see', () => {
  // This file names the patterns, so it is left out.
  const files = globSync('test/**/*.test.ts', { cwd: ROOT }).filter((file) => sharesProcess(file) && !file.endsWith('/test-isolation.test.ts'));
  assert.ok(files.length > 50, `the shared folders hold the small files (${files.length})`);
  const found = files.flatMap((file) => {
    const text = readFileSync(join(ROOT, file), 'utf8');
    return PROCESS_WIDE.filter(([pattern]) => pattern.test(text)).map(([, what]) => `${file} ${what}`);
  });
  assert.deepEqual(found, []);
});

test('the check finds what it looks for', () => {
  const samples = ['process.env.PORT = "1"', 'process.env["X"] ??= "y"', 'delete process.env.X', 'process.chdir("/")', 'process.umask(0o77)', 't.mock.timers.enable()', 'globalThis.fetch = f', 'process.on("exit", f)', 'process.exitCode = 1', 'acme.axios.defaults.httpsAgent = agent'];
  for (const sample of samples) assert.ok(PROCESS_WIDE.some(([pattern]) => pattern.test(sample)), sample);
  for (const sample of ['const port = process.env.PORT', 'process.env.X === "1"', 'process.umask()']) assert.ok(!PROCESS_WIDE.some(([pattern]) => pattern.test(sample)), sample);
});
