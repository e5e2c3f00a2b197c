/**
 * An API settings token outlives a restart of a memory-state gateway. A restart makes the new
 * process refuse every JWT issued before it (its resets were lost: test/restart.test.ts); a
 * settings token's validity is in the owner store, so it keeps working, and one revoked there
 * stays refused. Real processes, as an operator restarts them.
 */
import assert from 'node:assert/strict';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { mintSettingsToken, settingsTokenDigest, settingsTokenStart } from '../../src/domain/settings-token.js';
import { call } from '../helpers/gateway.js';
import { exitWithin, startGatewayProcess, tempDir } from '../helpers/process.js';

test('memory state: a settings token works before and after a restart; a revoked one stays refused', async (t) => {
  const live = mintSettingsToken();
  const revoked = mintSettingsToken();
  const data = JSON.parse(readFileSync(new URL('../../config/demo-data.json', import.meta.url), 'utf8'));
  const createdAt = new Date(Date.now() - 86_400_000).toISOString();
  const record = (id: string, token: string, extra: Record<string, string> = {}) => ({ id, name: id, digest: settingsTokenDigest(token), start: settingsTokenStart(token), scopes: [], createdAt, ...extra });
  data.accounts.find((a: { id: string }) => a.id === 'acct_alice').settingsTokens = [
    record('stk_live', live),
    record('stk_revoked', revoked, { revokedAt: createdAt }),
  ];
  const file = join(tempDir(t), 'data.json');
  writeFileSync(file, JSON.stringify(data));
  const env = { GATEWAY_DATA_FILE: file };

  const roles = async (url: string, token: string) => (await call(`${url}/api/roles`, { token })).status;
  const first = await startGatewayProcess(t, env);
  assert.equal(await roles(first.url, live), 200, 'before the restart');
  assert.equal(await roles(first.url, revoked), 401, 'a revoked one, before');
  assert.ok(first.child.process.kill('SIGTERM'));
  assert.deepEqual(await exitWithin(first.child), { code: 0, signal: null });

  const second = await startGatewayProcess(t, env);
  assert.equal(await roles(second.url, live), 200, 'after the restart: not refused for being older than the new process');
  assert.equal(await roles(second.url, revoked), 401, 'a revoked one, after');
  // Ended here, before its data file's directory goes: it may be writing a token's last use.
  assert.ok(second.child.process.kill('SIGTERM'));
  assert.deepEqual(await exitWithin(second.child), { code: 0, signal: null });
});
