/**
 * DPoP across instances (docs/dpop.md): two real gateway processes on one redis-server, with one
 * signing key, one nonce secret and one public origin (`DPOP_PUBLIC_ORIGINS`, so a proof's `htu`
 * is the same at both, as behind a load balancer). A nonce one gives is good at the other, a
 * family bound at one refreshes at the other with the same key, and a proof used at one is a
 * replay at the other.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { makeProof, makeProofKey } from '../helpers/dpop.js';
import { call, DEMO, postJson, sha256Hex, show, type JsonResponse } from '../helpers/gateway.js';
import { startGatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const ORIGIN = 'https://gw.example';
const SUITE_LIMIT_MS = 60_000;

function iat(): number {
  return Math.floor(Date.now() / 1000);
}

function assertRefused(res: JsonResponse, error: string, what: string): void {
  assert.equal(res.status, 401, `${what}: ${show(res)}`);
  assert.equal(res.body.message.code, error, what);
  assert.match(res.headers.get('www-authenticate') ?? '', new RegExp(`^DPoP error="${error}"`), what);
}

test('DPoP on two instances sharing one Redis', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const env = {
    REDIS_URL: redis.url, SIGNING_KEYS: JSON.stringify([{ kid: 'dpop-shared-1', alg: 'EdDSA', pem }]), REDIS_COMMAND_TIMEOUT_MS: '5000',
    DPOP_NONCE: 'required', DPOP_NONCE_SECRET: randomBytes(32).toString('base64url'), DPOP_PUBLIC_ORIGINS: ORIGIN,
  };
  const [a, b] = await Promise.all([startGatewayProcess(t, env, { limitMs: SUITE_LIMIT_MS }), startGatewayProcess(t, env, { limitMs: SUITE_LIMIT_MS })]);
  const key = await makeProofKey('ES256');
  const credentials = { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) };

  const refused = await postJson(`${a.url}/api/signin`, credentials, { headers: { dpop: await makeProof(key, { htm: 'POST', htu: `${ORIGIN}/api/signin`, iat: iat() }) } });
  assertRefused(refused, 'use_dpop_nonce', 'no nonce at a');
  const nonce = refused.headers.get('dpop-nonce')!;

  const signedIn = await postJson(`${b.url}/api/signin`, credentials, { headers: { dpop: await makeProof(key, { htm: 'POST', htu: `${ORIGIN}/api/signin`, iat: iat(), nonce }) } });
  assert.equal(signedIn.status, 200, `a's nonce is good at b: ${show(signedIn)}`);
  const { accessToken, refreshToken } = signedIn.body.message as { accessToken: string; refreshToken: string };

  await t.test('a proof used at one instance is a replay at the other', async () => {
    const proof = await makeProof(key, { htm: 'GET', htu: `${ORIGIN}/api/roles`, iat: iat(), nonce, accessToken });
    const headers = { authorization: `DPoP ${accessToken}`, dpop: proof };
    const first = await call(`${a.url}/api/roles`, { headers });
    assert.equal(first.status, 200, show(first));
    assertRefused(await call(`${b.url}/api/roles`, { headers }), 'invalid_dpop_proof', 'the same proof at b');
  });

  await t.test('a family bound at b refreshes at a with a proof by its key, and not without', async () => {
    const refreshAt = async (withProof: boolean) => postJson(`${a.url}/api/refresh`, { refreshToken }, {
      headers: withProof ? { dpop: await makeProof(key, { htm: 'POST', htu: `${ORIGIN}/api/refresh`, iat: iat(), nonce }) } : {},
    });
    assertRefused(await refreshAt(false), 'invalid_dpop_proof', 'no proof');
    const res = await refreshAt(true);
    assert.equal(res.status, 200, show(res));
    assert.equal(res.body.message.token_type, 'DPoP');
  });
});
