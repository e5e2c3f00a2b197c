/**
 * The owner API's types have one source, the server's schemas: the dashboard and the client
 * package compile against owner-api.generated.ts / api.generated.ts, which
 * `npm run generate:owner-types` writes from the OpenAPI document those schemas make
 * (scripts/generate-owner-types.ts). Here the text is generated again in memory and held to
 * each committed copy, and the client's type tests (packages/client/examples/owner-api-types.ts:
 * each method's answer and input exactly its operation's) are compiled. The dashboard's script,
 * which takes its types from its copy, is compiled by test/dashboard/assets.test.ts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { generateOwnerTypes, OUTPUTS } from '../../scripts/generate-owner-types.js';
import { ROOT } from '../helpers/process.js';

test('each committed copy of the owner API\'s types is what the server\'s schemas generate', () => {
  const fresh = generateOwnerTypes();
  assert.match(fresh, /export interface OwnerOperations \{/);
  assert.match(fresh, /getKey: \{[^]*?answer: \{[^]*?apiKey: string;/, 'the answers are spelt out');
  for (const output of OUTPUTS) {
    assert.ok(readFileSync(join(ROOT, output), 'utf8') === fresh, `${output} differs from the server's schemas: run \`npm run generate:owner-types\``);
  }
});

test('the client\'s owner types are exactly its operations\' answers and bodies (packages/client/examples/owner-api-types.ts)', async () => {
  const tsc = join(ROOT, 'node_modules/.bin/tsc');
  const result = await promisify(execFile)(tsc, ['-p', join(ROOT, 'packages/client/tsconfig.examples.json')], { cwd: ROOT }).then(
    () => ({ ok: true, output: '' }),
    (err: { stdout?: string; stderr?: string }) => ({ ok: false, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
  );
  assert.ok(result.ok, `the client's type tests fail to compile:\n${result.output}`);
});
