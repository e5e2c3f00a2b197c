/**
 * A reset reaches open WebSockets on every instance: two real gateway processes
 * (`node --import tsx src/main.ts`) share one real redis-server and one signing key, with a
 * WebSocket route to an echo backend in this process. A socket opened through B is closed by B
 * as soon as B hears of a reset made through A; another account's socket on B stays open.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { WebSocket } from 'ws';
import { DEMO, postJson, sha256Hex, type TokenPair } from '../helpers/gateway.js';
import { startGatewayProcess, type GatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';
import { eventually } from '../helpers/proxy.js';
import { openClient, roundTrip, startWsBackend, whenClosed } from '../helpers/ws-backend.js';

/** Every process of the suite is killed after this long, whatever happens. */
const SUITE_LIMIT_MS = 30_000;
/** A reset must reach every instance's open sockets within this (a hang guard with room for a loaded machine). */
const RESET_REACH_MS = 2000;

async function signInOn(gw: GatewayProcess, who: { apiKey: string; secret: string }): Promise<TokenPair> {
  const res = await postJson(`${gw.url}/api/signin`, { apiKey: who.apiKey, apiSecret: sha256Hex(who.secret) });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.message as TokenPair;
}

test('a reset through one instance closes the account\'s WebSockets open on another', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const backend = await startWsBackend(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const env = {
    REDIS_URL: redis.url,
    SIGNING_KEYS: JSON.stringify([{ kid: 'ws-shared-1', alg: 'EdDSA', pem }]),
    ROUTES: JSON.stringify([{ prefix: '/ws', targets: [backend.url], websocket: true }]),
    LOG_LEVEL: 'info',
  };
  const [a, b] = await Promise.all([startGatewayProcess(t, env, { limitMs: SUITE_LIMIT_MS }), startGatewayProcess(t, env, { limitMs: SUITE_LIMIT_MS })]);

  const alice = await signInOn(a, DEMO.alice);
  const bob = await signInOn(b, DEMO.bob);
  const onB = await openClient(b.url, '/ws/b', { token: alice.accessToken });
  const onBViaProtocol = await openClient(b.url, '/ws/b2', { protocols: ['bearer', `bearer.${alice.accessToken}`] });
  const onA = await openClient(a.url, '/ws/a', { token: alice.accessToken });
  const bobOnB = await openClient(b.url, '/ws/bob', { token: bob.accessToken });
  t.after(() => { for (const ws of [onB, onBViaProtocol, onA, bobOnB]) ws.terminate(); });
  for (const ws of [onB, onBViaProtocol, onA, bobOnB]) assert.equal((await roundTrip(ws, 'before')).data.toString(), 'before');
  assert.equal(backend.open(), 4);
  const aliceSockets = [onB, onBViaProtocol, onA];
  const closes = aliceSockets.map((ws) => whenClosed(ws, RESET_REACH_MS));
  let bobClosed = false;
  bobOnB.once('close', () => { bobClosed = true; });

  const reset = await postJson(`${a.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret), scope: 'account' });
  assert.equal(reset.status, 200, JSON.stringify(reset.body));

  const closed = await Promise.all(closes);
  assert.deepEqual(closed.map((c) => c.code), [4003, 4003, 4003], 'a close frame with the documented code');
  await eventually(() => backend.open() === 1, 'the backend sides of alice\'s sockets closed');
  assert.equal((await roundTrip(bobOnB, 'still here')).data.toString(), 'still here');
  assert.equal(bobClosed, false, 'bob\'s socket on B stayed open');

  // B says why it closed them, without the token.
  const tokenId = decodeJwt(alice.accessToken).jti;
  await eventually(() => b.logs().filter((l) => l.msg === 'websocket closed by the gateway').length >= 2, 'B logged the closes', 1000);
  const linesOnB = b.logs().filter((l) => l.msg === 'websocket closed by the gateway');
  for (const line of linesOnB) assert.deepEqual([line.reason, line.accountId, line.tokenId], ['reset', DEMO.alice.accountId, tokenId]);
  assert.equal(linesOnB.length, 2, `one line per socket B closed: ${JSON.stringify(linesOnB)}`);
  for (const [name, gw] of [['A', a], ['B', b]] as const) {
    assert.ok(!gw.child.stdout().includes(alice.accessToken.split('.')[2]!), `${name}'s log holds no token`);
    assert.deepEqual(gw.logs().filter((l) => typeof l.level === 'number' && l.level >= 50), [], `${name} logged no error`);
  }

  // A new sign-in after the reset opens a socket on B again.
  const fresh = await signInOn(a, DEMO.alice);
  const again = await openClient(b.url, '/ws/again', { token: fresh.accessToken });
  t.after(() => again.terminate());
  assert.equal((await roundTrip(again, 'after')).data.toString(), 'after');
  assert.equal(again.readyState, WebSocket.OPEN);
});
