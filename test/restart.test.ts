/**
 * A gateway on the embedded default (memory state) with configured signing keys, restarted:
 * its resets were in process memory and are gone, while the access tokens issued before the
 * restart still carry a valid signature. A reset must survive the restart anyway, so the new
 * process refuses every access token issued before it started (src/state/revocation/memory.ts);
 * their refresh tokens died with the old process. Real processes, as an operator restarts them.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { decodeProtectedHeader } from 'jose';
import { call, DEMO, postJson, sha256Hex, signIn, type TokenPair } from './helpers/gateway.js';
import { ADMIN_TOKEN } from './helpers/owner.js';
import { exitWithin, startGatewayProcess, type GatewayProcess } from './helpers/process.js';
import { adminTokenDigest } from '../src/http/owner/caller.js';

const KID = 'restart-1';

async function assertServed(gw: GatewayProcess, token: string, what: string): Promise<void> {
  const res = await call(`${gw.url}/api/roles`, { token });
  assert.equal(res.status, 200, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
}

async function assertRefused(gw: GatewayProcess, token: string, what: string): Promise<void> {
  const res = await call(`${gw.url}/api/roles`, { token });
  assert.equal(res.status, 401, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(res.body.message.code, 'invalid_token', what);
}

test('memory state, configured keys: a reset survives a restart; every access token from before it is refused, new ones work', async (t) => {
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const env = { SIGNING_KEYS: JSON.stringify([{ kid: KID, alg: 'EdDSA', pem }]) };

  const first = await startGatewayProcess(t, env);
  const reset: TokenPair = await signIn(first, DEMO.alice);
  const untouched: TokenPair = await signIn(first, DEMO.bob);
  const res = await postJson(`${first.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  await assertRefused(first, reset.accessToken, 'the reset token, before the restart');
  await assertServed(first, untouched.accessToken, 'a token never reset, before the restart');

  assert.ok(first.child.process.kill('SIGTERM'));
  assert.deepEqual(await exitWithin(first.child), { code: 0, signal: null });
  const second = await startGatewayProcess(t, env);

  await assertRefused(second, reset.accessToken, 'the token reset before the restart');
  // The new process cannot tell which tokens the lost resets covered, so it refuses them all.
  await assertRefused(second, untouched.accessToken, 'a token issued before the restart, never reset');
  const refresh = await postJson(`${second.url}/api/refresh`, { refreshToken: untouched.refreshToken });
  assert.equal(refresh.status, 401, `its refresh token died with the old process: ${JSON.stringify(refresh.body)}`);

  const fresh = await signIn(second, DEMO.alice);
  // Same key as before the restart: the old tokens are refused for their age, not their signature.
  assert.equal(decodeProtectedHeader(fresh.accessToken).kid, KID);
  assert.equal(decodeProtectedHeader(reset.accessToken).kid, KID);
  await assertServed(second, fresh.accessToken, 'a token signed in after the restart');
  await assertServed(second, (await signIn(second, DEMO.bob)).accessToken, 'another account, signed in after the restart');
});

test('the embedded default keeps what owners change: saved beside the demo data (never into it), read again after a restart', async (t) => {
  const demo = readFileSync(new URL('../config/demo-data.json', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'gw-demo-save-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const env = { DEMO_SAVE_FILE: join(dir, 'data', 'gateway-data.json'), OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([adminTokenDigest(ADMIN_TOKEN)]) };
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

  const first = await startGatewayProcess(t, env);
  const renamed = await fetch(`${first.url}/owner/v1/accounts/acct_alice`, { method: 'PATCH', headers: { ...admin, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Renamed before the restart' }) });
  assert.equal(renamed.status, 200, await renamed.text());
  const role = await fetch(`${first.url}/owner/v1/accounts/acct_alice/roles`, {
    method: 'POST', headers: { ...admin, 'content-type': 'application/json' },
    body: JSON.stringify({ id: 900, slug: 'kept', name: 'Kept role', description: '', public: true }),
  });
  assert.equal(role.status, 201, await role.text());
  assert.ok(first.child.process.kill('SIGTERM'));
  assert.deepEqual(await exitWithin(first.child), { code: 0, signal: null });

  const second = await startGatewayProcess(t, env);
  const account = await (await fetch(`${second.url}/owner/v1/accounts/acct_alice`, { headers: admin })).json() as { message: { name: string } };
  assert.equal(account.message.name, 'Renamed before the restart');
  const kept = await fetch(`${second.url}/owner/v1/accounts/acct_alice/roles/900`, { headers: admin });
  assert.equal(kept.status, 200, await kept.text());
  // And the data plane serves it: alice's roles through /api/roles.
  const { accessToken } = await signIn(second, DEMO.alice);
  const roles = await call(`${second.url}/api/roles?limit=100`, { token: accessToken });
  assert.ok((roles.body.message.items as { id: number }[]).some((r) => r.id === 900), JSON.stringify(roles.body));
  assert.deepEqual(readFileSync(new URL('../config/demo-data.json', import.meta.url)), demo, 'the shipped demo file is unchanged');
});
