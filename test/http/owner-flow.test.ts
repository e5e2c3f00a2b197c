/**
 * Acceptance of issue 14 on the embedded default: a real gateway process on a temporary data
 * file runs the whole owner flow (helpers/owner-flow.ts), then is restarted on the same file
 * and still has every owner, key, settings token, role, sign record and audit event. The file
 * itself stays valid for the watcher and never holds a secret.
 */
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { makeAdminToken } from '../helpers/owner-api.js';
import { checkPersisted, runOwnerFlow } from '../helpers/owner-flow.js';
import { exitWithin, ROOT, startGatewayProcess, tempDir } from '../helpers/process.js';

const LIMIT_MS = 90_000;

test('file state: the owner flow on a real gateway, then a restart keeps all of it', async (t) => {
  const admin = makeAdminToken();
  const backend = await startBackend(t);
  const file = join(tempDir(t), 'data.json');
  copyFileSync(join(ROOT, 'config/demo-data.json'), file);
  const env = {
    GATEWAY_DATA_FILE: file,
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([admin.digest]),
    ROUTES: JSON.stringify([{ name: 'echo', prefix: '/echo', targets: [backend.url] }]),
  };
  const first = await startGatewayProcess(t, env, { limitMs: LIMIT_MS });
  const gw = { name: 'the gateway', url: first.url };
  // One instance: the data file's own watcher is the freshness to allow for (data.watchIntervalMs).
  const state = await runOwnerFlow({ a: gw, b: gw, adminToken: admin.token, backend, roleReachMs: 2000 });

  const written = readFileSync(file, 'utf8');
  const data = JSON.parse(written) as { owners?: { email: string }[]; accounts: { id: string }[] };
  assert.ok(data.owners?.some((o) => o.email === state.email), 'the owner is in the data file');
  assert.ok(data.accounts.some((a) => a.id === state.accountId), 'the account is in the data file');
  for (const secret of [state.apiSecret, state.keptToken, state.password]) assert.ok(!written.includes(secret), 'no secret is written to the file');

  assert.ok(first.child.process.kill('SIGTERM'));
  assert.deepEqual(await exitWithin(first.child), { code: 0, signal: null });
  const second = await startGatewayProcess(t, env, { limitMs: LIMIT_MS });
  await checkPersisted({ name: 'the restarted gateway', url: second.url }, state);
});
