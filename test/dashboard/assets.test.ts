/**
 * The dashboard's script is TypeScript in src/dashboard/browser/, compiled by
 * `npm run build:dashboard` into dist/dashboard/public/js/ (never checked in; `npm start` and
 * `npm test` compile it first). These tests hold the built files to their sources (compiled
 * afresh into a temporary directory: a test file run alone after a change of the page's code
 * would serve the old script), a gateway without them to a refusal to start, and the page's code
 * to the browser: no import of Node or of the gateway's modules.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ID_PATTERN } from '../../src/domain/formats.js';
import { DashboardNotBuilt, loadPublic } from '../../src/dashboard/serve.js';
import { matchPage, pagePath, PAGES } from '../../src/dashboard/browser/pages.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BROWSER = join(ROOT, 'src/dashboard/browser');
const BUILT = join(ROOT, 'dist/dashboard/public/js');

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? listFiles(join(dir, entry.name)) : [join(dir, entry.name)]));
}

test('the built script is what its sources compile to (run `npm run build:dashboard` after changing them; npm test does)', () => {
  const out = mkdtempSync(join(tmpdir(), 'dashboard-build-'));
  try {
    execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', join(ROOT, 'tsconfig.dashboard.json'), '--outDir', out], { cwd: ROOT, stdio: 'pipe' });
    const fresh = listFiles(out).map((file) => relative(out, file)).sort();
    assert.ok(existsSync(BUILT), 'the script is built: run `npm run build:dashboard`');
    const built = listFiles(BUILT).map((file) => relative(BUILT, file)).sort();
    assert.deepEqual(built, fresh, 'the same files');
    for (const file of fresh) assert.equal(readFileSync(join(BUILT, file), 'utf8'), readFileSync(join(out, file), 'utf8'), `${file} is stale`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('a gateway whose dashboard script is not built refuses to start, naming the command that builds it', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'dashboard-unbuilt-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'index.html'), '<html></html>');
  mkdirSync(join(dir, 'js'));
  assert.throws(() => loadPublic('/dashboard', dir, join(dir, 'js')), (err) => err instanceof DashboardNotBuilt && /npm run build:dashboard/.test(err.message));
  assert.throws(() => loadPublic('/dashboard', dir, join(dir, 'nothing')), DashboardNotBuilt);
  writeFileSync(join(dir, 'js', 'main.js'), 'export {};');
  assert.deepEqual([...loadPublic('/dashboard', dir, join(dir, 'js')).assets.keys()], ['js/main.js']);
});

test('the page\'s code imports only its own modules', () => {
  for (const file of listFiles(BROWSER)) {
    const source = readFileSync(file, 'utf8');
    for (const [, target] of source.matchAll(/\bfrom\s+['"]([^'"]+)['"]/g)) {
      assert.match(target!, /^\.\.?\//, `${relative(ROOT, file)} imports ${target}`);
      const resolved = resolve(dirname(file), target!);
      assert.ok(resolved.startsWith(`${BROWSER}/`), `${relative(ROOT, file)} imports ${target}, outside src/dashboard/browser`);
    }
  }
});

test('page paths take the owner API\'s ids and nothing that could climb out of the dashboard', () => {
  const ids = ['acct_alice', 'a.b:c@d-e', 'x'.repeat(128)];
  for (const id of ids) {
    assert.ok(ID_PATTERN.test(id));
    assert.deepEqual(matchPage(pagePath('roles', { account: id })), { name: 'roles', params: { account: id } });
  }
  for (const bad of ['..', '.', 'x'.repeat(129), 'a%2Fb', '%E0%A4%A', 'a b']) assert.equal(matchPage(`accounts/${bad}/roles`), undefined, bad);
  assert.deepEqual(matchPage('accounts/acct_1/roles/new'), { name: 'newRole', params: { account: 'acct_1' } });
  assert.deepEqual(matchPage('accounts/acct_1/roles/12/'), { name: 'role', params: { account: 'acct_1', role: '12' } });
  for (const bad of ['accounts/acct_1/roles/012', 'accounts/acct_1/roles/-1', 'accounts/acct_1/nothing', 'sign-in/x', '/sign-in']) assert.equal(matchPage(bad), undefined, bad);
  assert.equal(Object.keys(PAGES).length, new Set(Object.values(PAGES)).size, 'no two pages share a path');
});
