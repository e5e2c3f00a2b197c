/**
 * docs/oauth.md's "Try it", pasted as a reader would: its `sh` blocks in bash against a real
 * gateway on its demo data, with the page's `http://127.0.0.1:8080` standing for the gateway's
 * address, and every answer the page shows (a `# {…}` line right under a command, `…` standing
 * for anything) matched, in order, by a line the commands printed.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { startGateway } from '../helpers/gateway.js';
import { ROOT } from '../helpers/process.js';

const PAGE_BASE = 'http://127.0.0.1:8080';

function tryItBlocks(): string[] {
  const page = readFileSync(join(ROOT, 'docs/oauth.md'), 'utf8');
  const from = page.indexOf('## Try it');
  assert.ok(from >= 0, 'docs/oauth.md has its "Try it" section');
  const blocks = [...page.slice(from).matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  assert.ok(blocks.length > 0, 'with commands to run');
  return blocks;
}

/** The answers shown: `# {` or `# [` lines directly under a command line, as patterns (`…` for anything). */
function shownAnswers(script: string, base: string): RegExp[] {
  const lines = script.split('\n');
  return lines.flatMap((line, i) => {
    const previous = lines[i - 1];
    if (!/^# [{[]/.test(line) || previous === undefined || previous === '' || previous.startsWith('#')) return [];
    const pattern = line.slice(2).replaceAll(PAGE_BASE, base).split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*');
    return [new RegExp(`^${pattern}$`)];
  });
}

test('docs/oauth.md: every command of "Try it" runs against a real gateway and prints the answers the page shows', async (t) => {
  const gw = await startGateway(t);
  for (const block of tryItBlocks()) {
    // The answers shown name the page's address too: the gateway answers with its own.
    const patterns = shownAnswers(block, gw.url);
    assert.ok(patterns.length > 0);
    const script = `set -eu\n${block.replaceAll(PAGE_BASE, gw.url)}`;
    // Asynchronously: the gateway answering the commands runs in this process.
    const run = await promisify(execFile)('bash', ['-c', script], {
      encoding: 'utf8',
      env: { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? '/tmp' },
      timeout: 60_000,
    });
    const printed = run.stdout.split('\n');
    let at = 0;
    for (const pattern of patterns) {
      const found = printed.findIndex((line, i) => i >= at && pattern.test(line));
      assert.ok(found >= 0, `no printed line (after line ${at}) matches ${pattern}:\n${run.stdout}`);
      at = found + 1;
    }
  }
});
