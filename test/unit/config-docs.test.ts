/**
 * The settings table in docs/configuration.md is documentation operators rely on: it must list
 * every setting of the schema, with the same environment name and default, and nothing else.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { describeSettings } from '../../src/config/schema.js';

test('the settings table of docs/configuration.md matches the config schema', () => {
  const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
  const rows = new Map<string, { env: string; def: string }>();
  for (const line of page.split('\n')) {
    const m = /^\| `([a-zA-Z0-9.]+)` \| (`[A-Z0-9_]+`|—) \| (.+?) \| .+ \|$/.exec(line);
    if (m) rows.set(m[1]!, { env: m[2]!.replaceAll('`', ''), def: m[3]! });
  }
  const settings = describeSettings();
  assert.deepEqual([...rows.keys()], settings.map((s) => s.path));
  for (const s of settings) {
    const row = rows.get(s.path)!;
    assert.equal(row.env, s.env ?? '—', `${s.path}: environment name`);
    assert.equal(row.def, s.default === undefined ? '—' : `\`${JSON.stringify(s.default)}\``, `${s.path}: default`);
  }
});
