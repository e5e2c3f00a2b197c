/**
 * The length rule: no function in src/ over 100 lines (CONTRIBUTING.md, "Functions over 100
 * lines"), counted from the line of its first token to the line of its last, as written. Every
 * git-tracked `.ts` file under src/ is read (src/dashboard/public/ is build output, not
 * source): its types are stripped in place by Node's own stripper (mode `strip` blanks them,
 * so every line keeps its number), and the JavaScript left is parsed by acorn. Function
 * declarations, function expressions, methods and arrow functions all count, each on its own
 * (a nested function counts in its outer one too).
 *
 * An exception is a line of that section, "- `src/path.ts` `name`: reason"; one whose function
 * is no longer over the limit must go, so the list stays true.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { dirname, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse, type Node } from 'acorn';
import { fullAncestor } from 'acorn-walk';

const MAX_LINES = 100;
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

interface Measured {
  /** `src/…` */
  path: string;
  line: number;
  name: string;
  lines: number;
}

interface Exception {
  path: string;
  name: string;
  reason: string;
}

function trackedSources(): string[] {
  return execFileSync('git', ['ls-files', '-z', '--', 'src'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((path) => path.endsWith('.ts') && !path.startsWith('src/dashboard/public/'));
}

/** The name a reader would look for: the declaration's, or the variable, property or method it is assigned to. */
function nameOf(fn: Node & { id?: { name: string } | null }, parent: Node | undefined): string {
  if (fn.id) return fn.id.name;
  const p = parent as (Node & { id?: { type: string; name?: string }; key?: { type: string; name?: string; value?: unknown }; left?: Node; computed?: boolean }) | undefined;
  if (p?.type === 'VariableDeclarator' && p.id?.type === 'Identifier') return p.id.name!;
  if ((p?.type === 'Property' || p?.type === 'MethodDefinition' || p?.type === 'PropertyDefinition') && p.key !== undefined && !p.computed) {
    return p.key.type === 'Identifier' || p.key.type === 'PrivateIdentifier' ? p.key.name! : String(p.key.value);
  }
  return '(anonymous)';
}

/** Every function of one file with its length, found in the JavaScript its types stripped in place leave. */
function measure(path: string, source: string): Measured[] {
  const js = withoutStripWarning(() => stripTypeScriptTypes(source, { mode: 'strip' }));
  const ast = parse(js, { ecmaVersion: 'latest', sourceType: 'module', locations: true });
  const seen = new Set<Node>();
  const found: Measured[] = [];
  fullAncestor(ast, (node, _state, ancestors) => {
    if (seen.has(node)) return;
    if (node.type !== 'FunctionDeclaration' && node.type !== 'FunctionExpression' && node.type !== 'ArrowFunctionExpression') return;
    seen.add(node);
    const { start, end } = node.loc!;
    found.push({ path, line: start.line, name: nameOf(node, ancestors[ancestors.length - 2]), lines: end.line - start.line + 1 });
  });
  return found.sort((a, b) => a.line - b.line);
}

/**
 * Node warns once per process that `stripTypeScriptTypes` is experimental; that warning, and
 * only that one, would be noise in the test output.
 */
function withoutStripWarning<T>(run: () => T): T {
  const emit = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    if (String(warning instanceof Error ? warning.message : warning).includes('stripTypeScriptTypes')) return;
    (emit as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return run();
  } finally {
    process.emitWarning = emit;
  }
}

/** The exceptions listed in CONTRIBUTING.md's section "Functions over 100 lines". */
function listedExceptions(contributing: string): Exception[] {
  const lines = contributing.split('\n');
  const start = lines.findIndex((line) => /^#+\s+Functions over 100 lines\s*$/.test(line));
  if (start === -1) return [];
  const exceptions: Exception[] = [];
  for (const line of lines.slice(start + 1)) {
    if (/^#+\s/.test(line)) break;
    const m = /^- `([^`]+)` `([^`]+)`:\s*(.*)$/.exec(line);
    if (m !== null) exceptions.push({ path: m[1]!, name: m[2]!, reason: m[3]!.trim() });
  }
  return exceptions;
}

test(`no function in src/ is over ${MAX_LINES} lines, except those listed with a reason in CONTRIBUTING.md`, () => {
  const files = trackedSources();
  assert.ok(files.includes('src/main.ts') && files.includes('src/cli/gatewayctl.ts'), 'the tracked sources are listed, top level and nested');
  const measured = files.flatMap((path) => measure(path, readFileSync(resolve(ROOT, path), 'utf8')));
  const contributing = readFileSync(resolve(ROOT, 'CONTRIBUTING.md'), 'utf8');
  assert.ok(/^#+\s+Functions over 100 lines\s*$/m.test(contributing), 'CONTRIBUTING.md has the section that lists the exceptions');
  const exceptions = listedExceptions(contributing);
  const isException = (m: Measured) => exceptions.some((e) => e.path === m.path && e.name === m.name);

  const long = measured.filter((m) => m.lines > MAX_LINES);
  const offenders = long.filter((m) => !isException(m)).map((m) => `${m.path}:${m.line} ${m.name} (${m.lines} lines)`);
  assert.deepEqual(offenders, [], `functions over ${MAX_LINES} lines (split them into named steps, or list them with a reason in CONTRIBUTING.md):\n${offenders.join('\n')}`);

  const unexplained = exceptions.filter((e) => e.reason === '').map((e) => `${e.path} ${e.name}`);
  assert.deepEqual(unexplained, [], 'every exception gives its reason');
  const stale = exceptions.filter((e) => !long.some((m) => m.path === e.path && m.name === e.name)).map((e) => `${e.path} ${e.name}`);
  assert.deepEqual(stale, [], 'exceptions listed in CONTRIBUTING.md that are no longer over the limit (remove them)');
});

test('the measure counts every kind of function, by the lines written, through the types stripped', () => {
  const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i}: number = ${i};`).join('\n');
  const source = [
    'interface Shape {',
    '  size: number;',
    '}',
    `export function declared(shape: Shape): number {\n${body(3)}\n  return shape.size;\n}`,
    `const arrow = (a: string): string => {\n${body(101)}\n  return a;\n};`,
    `const table = {\n  'keys create': async (x: number) => {\n${body(2)}\n  },\n  method<T>(t: T): T {\n    return t;\n  },\n};`,
    `class Kept {\n  run(): void {\n${body(1)}\n  }\n}`,
  ].join('\n');
  const found = measure('src/example.ts', source).map(({ line, name, lines }) => ({ line, name, lines }));
  assert.deepEqual(found, [
    { line: 4, name: 'declared', lines: 6 },
    { line: 10, name: 'arrow', lines: 104 },
    { line: 115, name: 'keys create', lines: 4 },
    { line: 119, name: 'method', lines: 3 },
    { line: 124, name: 'run', lines: 3 },
  ]);
});

test('exceptions are read from their section only, each with its path, name and reason', () => {
  const text = [
    '## Other',
    '- `src/a.ts` `elsewhere`: not in the section',
    '### Functions over 100 lines',
    '',
    'Listed here:',
    '- `src/proxy/x.ts` `createThing`: one state machine that reads best whole',
    '- `src/y.ts` `noReason`:',
    '## Next',
    '- `src/z.ts` `after`: not in the section',
  ].join('\n');
  assert.deepEqual(listedExceptions(text), [
    { path: 'src/proxy/x.ts', name: 'createThing', reason: 'one state machine that reads best whole' },
    { path: 'src/y.ts', name: 'noReason', reason: '' },
  ]);
});
