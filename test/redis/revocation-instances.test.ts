/**
 * Revocation (RFC 7009) and introspection (RFC 7662) across two gateway processes on one
 * redis-server (KEY_SOURCE=redis): what is revoked or reset on A is refused, and introspected
 * inactive, on B within a second, though B had the access token cached as verified. Each claim
 * polls B with a bounded deadline and reports when it turned.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { call, postJson, sha256Hex, type JsonResponse } from '../helpers/gateway.js';
import { startGatewayProcess, type GatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const ADMIN = `gwadm_${'R'.repeat(43)}`;
const REACH_MS = 1000;

function form(gw: GatewayProcess, path: string, token: string, caller?: string): Promise<JsonResponse> {
  return call(`${gw.url}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token }).toString(),
    ...(caller === undefined ? {} : { token: caller }),
  });
}

/**
 * Resolves once the clock (every instance's: one machine) has passed the current millisecond:
 * a token issued in a reset's own millisecond is covered by it.
 */
async function pastThisMillisecond(): Promise<void> {
  const now = Date.now();
  while (Date.now() <= now) await new Promise((resolve) => setImmediate(resolve));
}

/** Milliseconds from `since` until `turned` holds on B, polled; undefined past the deadline. */
async function turnedWithin(check: () => Promise<boolean>, since: number, limitMs = REACH_MS * 3): Promise<number | undefined> {
  while (Date.now() - since < limitMs) {
    if (await check()) return Date.now() - since;
    await sleep(20);
  }
  return undefined;
}

test('two instances on one Redis: revocations, resets, disabled and deleted keys reach the other within a second', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  // One signing key for both, as every deployment of several instances has.
  const env = { SIGNING_KEYS: JSON.stringify([{ kid: 'rv-1', alg: 'EdDSA', pem }]), REDIS_COMMAND_TIMEOUT_MS: '5000', REDIS_URL: redis.url, KEY_SOURCE: 'redis', DIRECTORY_STORE: 'redis', OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([adminTokenDigest(ADMIN)]) };
  const [a, b] = await Promise.all([startGatewayProcess(t, env), startGatewayProcess(t, env)]);
  const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
  const owner = (method: string, path: string, body?: unknown) => call(`${a.url}/owner/v1${path}`, { method, headers: admin, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  assert.equal((await owner('POST', '/accounts', { id: 'acct_rv', name: 'Revoke' })).status, 201);
  const makeKey = async (name: string, scopes: string[]) => {
    const created = await owner('POST', '/accounts/acct_rv/keys', { name, scopes });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return { keyId: created.body.message.key.id as string, apiKey: created.body.message.key.apiKey as string, apiSecret: sha256Hex(created.body.message.apiSecret as string) };
  };
  const client = await makeKey('client', []);
  const backendKey = await makeKey('backend', ['introspect']);
  const signIn = async (gw: GatewayProcess, key: { apiKey: string; apiSecret: string }) => {
    const res = await postJson(`${gw.url}/api/signin`, { apiKey: key.apiKey, apiSecret: key.apiSecret });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.message as { accessToken: string; refreshToken: string };
  };
  const checker = (await signIn(b, backendKey)).accessToken;
  const activeOnB = async (token: string) => {
    const res = await form(b, '/api/introspect', token, checker);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.active as boolean;
  };

  await t.test('an access token revoked on A is refused and inactive on B', async () => {
    const pair = await signIn(a, client);
    assert.equal((await call(`${b.url}/api/roles`, { token: pair.accessToken })).status, 200, 'accepted, and cached as verified, on B');
    assert.equal(await activeOnB(pair.accessToken), true);
    const since = Date.now();
    assert.equal((await form(a, '/api/revoke', pair.accessToken)).status, 200);
    assert.equal((await call(`${a.url}/api/roles`, { token: pair.accessToken })).status, 401, 'refused on A at once');
    const refused = await turnedWithin(async () => (await call(`${b.url}/api/roles`, { token: pair.accessToken })).status === 401, since);
    assert.ok(refused !== undefined && refused <= REACH_MS, `refused on B after ${refused} ms`);
    assert.equal(await activeOnB(pair.accessToken), false);
  });

  await t.test('a refresh token revoked on A ends its family on B: its successor and its access tokens too', async () => {
    const pair = await signIn(a, client);
    const next = await postJson(`${b.url}/api/refresh`, { refreshToken: pair.refreshToken });
    assert.equal(next.status, 200);
    assert.equal(await activeOnB(next.body.message.refreshToken), true);
    assert.equal((await call(`${b.url}/api/roles`, { token: next.body.message.accessToken })).status, 200, 'accepted, and cached, on B');
    const since = Date.now();
    assert.equal((await form(a, '/api/revoke', pair.refreshToken)).status, 200);
    // One store: the family is over for every instance in the same step.
    assert.equal(await activeOnB(next.body.message.refreshToken), false);
    assert.equal((await postJson(`${b.url}/api/refresh`, { refreshToken: next.body.message.refreshToken })).status, 401);
    // Its access tokens, by their session, through the notice.
    const refused = await turnedWithin(async () => (await call(`${b.url}/api/roles`, { token: next.body.message.accessToken })).status === 401, since);
    assert.ok(refused !== undefined && refused <= REACH_MS, `the family's access token refused on B after ${refused} ms`);
  });

  await t.test('a reset on A makes the tokens inactive on B', async () => {
    const pair = await signIn(a, client);
    assert.equal(await activeOnB(pair.accessToken), true);
    const since = Date.now();
    assert.equal((await postJson(`${a.url}/api/reset`, { apiKey: client.apiKey, apiSecret: client.apiSecret })).status, 200);
    const inactive = await turnedWithin(async () => !(await activeOnB(pair.accessToken)), since);
    assert.ok(inactive !== undefined && inactive <= REACH_MS, `inactive on B after ${inactive} ms`);
    assert.equal(await activeOnB(pair.refreshToken), false);
  });

  await t.test('a key disabled on A makes its tokens inactive on B', async () => {
    await pastThisMillisecond();
    const pair = await signIn(a, client);
    assert.equal(await activeOnB(pair.accessToken), true);
    assert.equal(await activeOnB(pair.refreshToken), true);
    const since = Date.now();
    assert.equal((await owner('PATCH', `/accounts/acct_rv/keys/${client.keyId}`, { enabled: false })).status, 200);
    const inactive = await turnedWithin(async () => !(await activeOnB(pair.accessToken)) && !(await activeOnB(pair.refreshToken)), since);
    assert.ok(inactive !== undefined && inactive <= REACH_MS, `inactive on B after ${inactive} ms`);
  });

  await t.test('an owner\'s reset of the key, and the key\'s deletion, reach B too', async () => {
    assert.equal((await owner('PATCH', `/accounts/acct_rv/keys/${client.keyId}`, { enabled: true })).status, 200);
    await pastThisMillisecond();
    const pair = await signIn(a, client);
    assert.equal(await activeOnB(pair.accessToken), true);
    let since = Date.now();
    assert.equal((await owner('POST', `/accounts/acct_rv/keys/${client.keyId}/reset`)).status, 200);
    let inactive = await turnedWithin(async () => !(await activeOnB(pair.accessToken)) && !(await activeOnB(pair.refreshToken)), since);
    assert.ok(inactive !== undefined && inactive <= REACH_MS, `reset: inactive on B after ${inactive} ms`);

    const doomed = await makeKey('doomed', []);
    const other = await signIn(a, doomed);
    assert.equal(await activeOnB(other.refreshToken), true);
    since = Date.now();
    assert.equal((await owner('DELETE', `/accounts/acct_rv/keys/${doomed.keyId}`)).status, 200);
    inactive = await turnedWithin(async () => !(await activeOnB(other.accessToken)) && !(await activeOnB(other.refreshToken)), since);
    assert.ok(inactive !== undefined && inactive <= REACH_MS, `deleted: inactive on B after ${inactive} ms`);
  });

  await t.test('an instance started after a revocation refuses the token too', async (tt) => {
    assert.equal((await owner('PATCH', `/accounts/acct_rv/keys/${client.keyId}`, { enabled: true })).status, 200);
    await pastThisMillisecond();
    const pair = await signIn(a, client);
    assert.equal((await form(a, '/api/revoke', pair.accessToken)).status, 200);
    const c = await startGatewayProcess(tt, env);
    const refused = await turnedWithin(async () => (await call(`${c.url}/api/roles`, { token: pair.accessToken })).status === 401, Date.now(), 10_000);
    assert.notEqual(refused, undefined, 'the new instance read the deny list');
  });
});
