/**
 * `npm install` ends quietly: npm 11 warns about every dependency with an install script that
 * package.json's `allowScripts` does not name (and skips nothing else). Each one named is
 * needed: `node`'s preinstall fetches the platform's Node 24 binary the scripts run on,
 * `esbuild`'s postinstall checks the binary tsx uses. A new dependency with an install script
 * fails here until someone decides about it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

test('allowScripts names exactly the locked packages that have install scripts', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { allowScripts?: Record<string, boolean> };
  const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> };
  const withScripts = [...new Set(Object.entries(lock.packages)
    .filter(([path, entry]) => path !== '' && entry.hasInstallScript === true)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)))].sort();
  assert.deepEqual(Object.keys(pkg.allowScripts ?? {}).sort(), withScripts);
});
