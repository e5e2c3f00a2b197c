/**
 * A gateway on the embedded default (memory state) with configured signing keys, restarted:
 * its resets were in process memory and are gone, while the access tokens issued before the
 * restart still carry a valid signature. A reset must survive the restart anyway, so the new
 * process refuses every access token issued before it started (src/stores/revocation.memory.ts);
 * their refresh tokens died with the old process. Real processes, as an operator restarts them.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { decodeProtectedHeader } from 'jose';
import { call, DEMO, postJson, sha256Hex, signIn, type TokenPair } from './helpers/gateway.js';
import { exitWithin, startGatewayProcess, type GatewayProcess } from './helpers/process.js';

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
