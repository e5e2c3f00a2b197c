/**
 * The architecture rule: imports run downhill. Every module of src/ belongs to one layer, and
 * imports only from its own layer or a lower one; and no import cycle, within a layer or
 * across. Lowest first:
 *
 *   1. util/, domain/   leaves: clock, lru, time, header counting; how ids, scopes and
 *                       addresses are spelt and how a secret is kept. They import nothing of
 *                       ours outside these two folders.
 *   2. errors/          the error family, the envelope, the one place answers are written
 *   3. telemetry/       logger, metrics
 *   4. config/          the schema and its loading
 *   5. state/           state behind interfaces, one folder per concern, with memory, Redis and
 *                       HTTP implementations, and the one factory that picks them (state/index.ts)
 *   6. auth/            credentials, tokens, resets, the bearer check
 *   7. limits/          sign-in lockouts and quotas (they count a verified identity: auth/)
 *   8. owner/           the owner API's service: accounts, owners, keys, settings tokens, roles
 *   9. http/            body, query, client address, own routes, router, middleware
 *      dashboard/       the owners' dashboard: its pages, served beside the own routes
 *                       (dashboard/browser/ is the page's script: it imports only itself)
 *  10. proxy/           configured routes to backends (they reuse http/'s request checks)
 *      tls/             the main listener's certificates: files, SNI, reload, expiry
 *  11. services.ts, app.ts, server.ts   wiring: pick implementations, order middleware, listen
 *  12. main.ts, cli/    entry points
 *
 * So a service never reaches the HTTP layer, a store never reaches auth, and the wiring is
 * the only place that sees everything. A new top-level folder must be given a layer here.
 * Imports are read as text: every `import`/`export … from`, side-effect `import '…'` and
 * `import('…')`, type-only ones included (a type import ties modules together as much as any).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const LAYERS: readonly (readonly string[])[] = [
  ['util/', 'domain/'],
  ['errors/'],
  ['telemetry/'],
  ['config/'],
  ['state/'],
  ['auth/'],
  ['limits/'],
  ['owner/'],
  ['http/', 'dashboard/'],
  ['proxy/', 'tls/'],
  ['services.ts', 'app.ts', 'server.ts'],
  ['main.ts', 'cli/'],
];

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

function listModules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return listModules(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [relative(SRC, path).split('\\').join('/')] : [];
  });
}

const IMPORT_PATTERNS = [
  /^\s*(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gm,
  /^\s*import\s*['"]([^'"]+)['"]/gm,
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
];

/** The src/ modules `file` imports (relative specifiers only: packages are outside the rule). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(SRC, file), 'utf8');
  const targets = new Set<string>();
  for (const pattern of IMPORT_PATTERNS) {
    for (const [, specifier] of text.matchAll(pattern)) {
      if (!specifier!.startsWith('.')) continue;
      const base = resolve(SRC, dirname(file), specifier!).replace(/\.js$/, '');
      const found = [`${base}.ts`, join(base, 'index.ts')].find((candidate) => existsSync(candidate));
      assert.ok(found !== undefined, `${file}: cannot resolve "${specifier}"`);
      targets.add(relative(SRC, found).split('\\').join('/'));
    }
  }
  return [...targets];
}

function layerOf(file: string): number {
  const layer = LAYERS.findIndex((prefixes) => prefixes.some((p) => (p.endsWith('/') ? file.startsWith(p) : file === p)));
  assert.notEqual(layer, -1, `${file} belongs to no layer: give its folder one in test/unit/layers.test.ts`);
  return layer;
}

const modules = listModules(SRC).sort();
const graph = new Map(modules.map((file) => [file, importsOf(file)]));

/** Strongly connected components of more than one module (or a module importing itself): the cycles. */
function findCycles(): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)!.includes(v)) cycles.push(component.sort());
    }
  };
  for (const v of modules) if (!index.has(v)) visit(v);
  return cycles;
}

test('the import graph is read: every module has a layer and the wiring imports the layers below', () => {
  assert.ok(modules.length > 50, `only ${modules.length} modules found under ${SRC}`);
  for (const file of modules) layerOf(file);
  // A reader that found no imports would pass every rule below.
  assert.ok(graph.get('services.ts')!.includes('state/index.ts'));
  assert.ok(graph.get('http/router.ts')!.includes('http/routes/signin.ts'));
});

test('no import cycle among the modules of src/', () => {
  const cycles = findCycles().map((c) => c.join(' <-> '));
  assert.deepEqual(cycles, []);
});

test('no import from a lower layer to a higher one', () => {
  const uphill: string[] = [];
  for (const [file, targets] of graph) {
    for (const target of targets) {
      if (layerOf(target) > layerOf(file)) uphill.push(`${file} (layer ${layerOf(file) + 1}) imports ${target} (layer ${layerOf(target) + 1})`);
    }
  }
  assert.deepEqual(uphill, []);
});

test('the leaves import nothing of ours outside util/ and domain/', () => {
  const leaves = modules.filter((file) => layerOf(file) === 0);
  assert.ok(leaves.includes('domain/formats.ts'));
  for (const file of leaves) {
    assert.deepEqual(graph.get(file)!.filter((target) => layerOf(target) !== 0), [], file);
  }
});
