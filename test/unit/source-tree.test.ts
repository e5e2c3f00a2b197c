/**
 * What src/ holds: sources only, and imports of libraries' public entry points only.
 * - No JavaScript under src/ is tracked by git: the dashboard's script is built from
 *   src/dashboard/browser/ into dist/ (`npm run build:dashboard`), never checked in beside its
 *   sources, where it would go stale.
 * - No module imports a subpath of http-proxy-3 (`http-proxy-3/dist/…`): those are its compiled
 *   internals, not its API, and may move in any release; what we need of them is owned in
 *   src/proxy/outgoing.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? listFiles(join(dir, entry.name)) : [join(dir, entry.name)]));
}

test('no JavaScript under src/ is tracked by git (build output goes to dist/)', () => {
  const tracked = execFileSync('git', ['ls-files', '--', 'src'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
  assert.ok(tracked.some((file) => file.endsWith('.ts')), 'git lists the sources');
  assert.deepEqual(tracked.filter((file) => /\.[cm]?js$/.test(file)), [], 'git rm them; the build makes them');
});

test('no module of src/ imports a subpath of http-proxy-3', () => {
  const offenders: string[] = [];
  for (const file of listFiles(join(ROOT, 'src')).filter((f) => f.endsWith('.ts'))) {
    const source = readFileSync(file, 'utf8');
    for (const [, target] of source.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]/g)) {
      if (target!.startsWith('http-proxy-3/')) offenders.push(`${relative(ROOT, file)}: ${target}`);
    }
  }
  assert.deepEqual(offenders, []);
});
