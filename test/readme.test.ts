/**
 * The README's quick start, pasted as a newcomer would: every `sh` block from "Quick start" to
 * the operator's section, in order, in bash, against real gateway processes, and every answer
 * the README shows (the `# {…}` lines right under a command, `…` standing for anything) checked
 * against what the command printed. So the walk cannot drift from the gateway again.
 *
 * What a newcomer does by hand the test does itself, and only that: `npm install` and `npm test`
 * are skipped; each `npm start` line (re)starts a gateway process with the environment that line
 * sets; the example backend's line starts that backend on a free port; the placeholders the
 * README asks the reader to paste (`sha256:…`, `gwadm_…`) get the admin token's values; and
 * `http://127.0.0.1:8080` is the running gateway's address. Shell variables and functions carry
 * from one block to the next, as in one shell. The blocks run in a directory of their own (the
 * cookie jar and the client's example land there), with the checkout's packages/ linked in.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { adminTokenDigest } from '../src/http/owner/caller.js';
import { ADMIN_TOKEN } from './helpers/owner.js';
import { ROOT, RUN_TS, startChild, startGatewayProcess, tempDir, waitForLog, type GatewayProcess } from './helpers/process.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const README_BASE = 'http://127.0.0.1:8080';
const MARK = '@@readme@@';

/** The `sh` blocks of the quick start, in order. */
function quickStartBlocks(): string[][] {
  const from = README.indexOf('## Quick start');
  const to = README.indexOf('## A day in an operator');
  assert.ok(from >= 0 && to > from, 'the README has its quick start and operator sections');
  return [...README.slice(from, to).matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!.replace(/\n$/, '').split('\n'));
}

interface Expectation {
  /** Line (0-based, in the chunk) where the command the answer belongs to starts. */
  commandStart: number;
  /** Index of the command's last line. */
  commandEnd: number;
  /** Each must match one line of the command's output, in any order. */
  patterns: string[];
}

const ANSWER = /^# (\{|\[|HTTP\/|[A-Za-z-]+: )/;

/** `# {…}` and its `#  …` continuations, `# HTTP/1.1 …`, `# Header: …`, directly under a command (other comments are prose). */
function expectations(lines: string[]): Expectation[] {
  const found: Expectation[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith('# ') || i === 0) continue;
    const previous = lines[i - 1]!;
    if (previous === '' || previous.startsWith('#') || !ANSWER.test(lines[i]!)) continue;
    let commandStart = i - 1;
    while (commandStart > 0 && lines[commandStart - 1]!.endsWith('\\')) commandStart--;
    const patterns: string[] = [];
    let j = i;
    for (; j < lines.length && (ANSWER.test(lines[j]!) || lines[j]!.startsWith('#  ')); j++) {
      const text = lines[j]!.slice(2);
      if (text.startsWith(' ') && patterns.length > 0) patterns[patterns.length - 1] += text.trimStart();
      else patterns.push(text);
    }
    found.push({ commandStart, commandEnd: i - 1, patterns });
    i = j - 1;
  }
  return found;
}

/** `…` stands for anything; a time stands for any time of its shape (the README's are examples). */
function matches(pattern: string, line: string): boolean {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    .replace(/\d{4}-\d\d-\d\d( |T)\d\d:\d\d:\d\d(\\\.\d{3}Z)?/g, (_t, sep: string, ms?: string) => `\\d{4}-\\d\\d-\\d\\d${sep}\\d\\d:\\d\\d:\\d\\d${ms === undefined ? '' : '\\.\\d{3}Z'}`);
  const source = pattern.split('…').map(escape).join('[\\s\\S]*');
  return new RegExp(`^${source}$`).test(line);
}

/** Runs one chunk of script in bash, with the state the previous chunks left. */
function bash(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const limit = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(limit); resolve({ code, stdout, stderr }); });
  });
}

async function startExampleBackend(t: TestContext, env: Record<string, string>): Promise<string> {
  const child = startChild(t, process.execPath, ['examples/backend/server.mjs'], { env: { ...process.env, ...env, PORT: '0' }, cwd: ROOT, limitMs: 300_000 });
  const line = await waitForLog(child, (l) => l.msg === 'example backend listening');
  return `127.0.0.1:${String(line.port)}`;
}

/** `A=1 B='x' npm start` → { A: '1', B: 'x' } (the README quotes with single quotes only). */
function assignments(prefix: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of prefix.matchAll(/([A-Z_][A-Z0-9_]*)=('([^']*)'|(\S*))/g)) env[m[1]!] = m[3] ?? m[4]!;
  return env;
}

test('every block of the README\'s quick start runs as pasted and answers what the README shows', async (t) => {
  const dir = tempDir(t, 'readme-walk-');
  const state = join(dir, 'state.sh');
  writeFileSync(state, '');
  // As in the clone's root: files the reader writes import from ./packages.
  symlinkSync(join(ROOT, 'packages'), join(dir, 'packages'));
  // The names the README assigns, so that each chunk hands them on to the next.
  const blocks = quickStartBlocks();
  const names = new Set([...blocks.flat().join('\n').matchAll(/(?:^|[;\s(])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=/gm)].map((m) => m[1]!));
  const substitutions: [string, string][] = [['sha256:…', adminTokenDigest(ADMIN_TOKEN)], ['gwadm_…', ADMIN_TOKEN]];
  let gateway: GatewayProcess | undefined;
  let checked = 0;
  const preamble = (base: string) => [
    'set -u', `cd ${JSON.stringify(ROOT)}`, `source ${JSON.stringify(state)}`,
    // The only npm the blocks still run: the client's build, and the admin command line on the running gateway.
    `npm() { if [ "$1 $2" = "run build:client" ]; then (cd ${JSON.stringify(ROOT)} && command npm run -s build:client); elif [ "$1 $2 $3" = "run ctl --" ]; then shift 3; (cd ${JSON.stringify(ROOT)} && node ${RUN_TS.map((arg) => JSON.stringify(arg)).join(' ')} src/cli/gatewayctl.ts --url ${JSON.stringify(base)} "$@"); else echo "unexpected: npm $*" >&2; return 97; fi; }`,
    `cd ${JSON.stringify(dir)}`,
  ];
  const save = ['cd - >/dev/null', `{ for v in ${[...names].join(' ')}; do [ -v "$v" ] && declare -p "$v"; done; declare -f | sed '/^npm ()/,/^}/d'; } > ${JSON.stringify(state)}`];
  let backend = '127.0.0.1:3000';

  const runChunk = async (lines: string[]) => {
    if (lines.every((l) => l === '' || l.startsWith('#'))) return;
    assert.ok(gateway !== undefined, 'a gateway runs before the first command that needs one');
    const found = expectations(lines);
    const body: string[] = [];
    const startsAt = new Map(found.map((e, n) => [e.commandStart, n]));
    const endsAt = new Map(found.map((e, n) => [e.commandEnd, n]));
    lines.forEach((line, i) => {
      if (startsAt.has(i)) body.push(`printf '\\n${MARK}begin ${startsAt.get(i)}\\n'`);
      let text = line;
      for (const [from, to] of substitutions) text = text.split(from).join(to);
      text = text.split(README_BASE).join(gateway!.url).split('127.0.0.1:3000').join(backend);
      body.push(text);
      if (endsAt.has(i)) body.push(`printf '\\n${MARK}end ${endsAt.get(i)}\\n'`);
    });
    const script = [...preamble(gateway!.url), ...body, ...save].join('\n');
    const run = await bash(script, { ...process.env, PATH: process.env.PATH ?? '' });
    assert.equal(run.code, 0, `the block ran to its end\n--- script\n${body.join('\n')}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`);
    found.forEach((e, n) => {
      const begin = run.stdout.indexOf(`${MARK}begin ${n}\n`);
      const end = run.stdout.indexOf(`${MARK}end ${n}\n`);
      assert.ok(begin >= 0 && end > begin, `the output of ${lines[e.commandStart]}`);
      const output = run.stdout.slice(begin, end).split('\n').slice(1).map((l) => l.replace(/\r$/, ''));
      for (const pattern of e.patterns) {
        assert.ok(output.some((l) => matches(pattern, l)), `after\n  ${lines.slice(e.commandStart, e.commandEnd + 1).join('\n  ')}\nthe README shows\n  ${pattern}\nbut the command printed\n  ${output.join('\n  ')}\n(stderr: ${run.stderr})`);
        checked++;
      }
    });
  };

  for (const block of blocks) {
    let chunk: string[] = [];
    for (const line of block) {
      const start = /^(.*?)\bnpm start\b/.exec(line);
      if (/^npm (install|ci|test)\b/.test(line)) continue;
      if (start !== null) {
        await runChunk(chunk);
        chunk = [];
        let env = assignments(start[1]!);
        for (const [from, to] of substitutions) env = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.split(from).join(to)]));
        for (const [k, v] of Object.entries(env)) env[k] = v.split('127.0.0.1:3000').join(backend);
        if (gateway !== undefined) {
          gateway.child.process.kill('SIGTERM');
          await gateway.child.exited;
        }
        const before = gateway?.url;
        gateway = await startGatewayProcess(t, env, { limitMs: 300_000 });
        // The reader's gateway comes back on the same address; this one on another port.
        if (before !== undefined) writeFileSync(state, readFileSync(state, 'utf8').split(before).join(gateway.url));
        continue;
      }
      const background = /^(.*?)node examples\/backend\/server\.mjs &/.exec(line);
      if (background !== null) {
        backend = await startExampleBackend(t, assignments(background[1]!));
        continue;
      }
      chunk.push(line);
    }
    await runChunk(chunk);
  }
  assert.ok(checked >= 20, `the README's answers were checked (${checked})`);
});

test('the README stays a first read: under 300 lines (the detail lives in docs/)', () => {
  assert.ok(README.split('\n').length < 300, `README.md has ${README.split('\n').length} lines`);
});
