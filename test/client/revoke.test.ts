/**
 * The client package's revoke() and signOut() against a real gateway (RFC 7009): signing out
 * ends the held refresh token's family and the held access token on the gateway, and forgets
 * the pair; revoke() of anything else answers as the gateway does.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayClient, InvalidRequestError, NetworkError, type TokenPair } from '../../packages/client/src/index.js';
import { call, DEMO, postJson, signIn, startGateway } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner-keys.js';

const alice = { apiKey: DEMO.alice.apiKey, apiSecret: DEMO.alice.secret };

/** A storage hook that keeps the pair where the test can read it. */
function memoryStorage() {
  const box: { pair: TokenPair | undefined; saves: number } = { pair: undefined, saves: 0 };
  return { box, storage: { load: () => box.pair, save: (pair: TokenPair | undefined) => { box.pair = pair; box.saves++; } } };
}

test('signOut revokes the held refresh token (its family) and access token, then forgets them', async (t) => {
  const gw = await startGateway(t);
  const { box, storage } = memoryStorage();
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, storage });
  await client.roles();
  const held = box.pair!;
  assert.ok(held.accessToken !== undefined && held.refreshToken !== undefined);
  assert.equal((await call(`${gw.url}/api/roles`, { token: held.accessToken })).status, 200);

  await client.signOut();
  assert.equal(box.pair, undefined, 'forgotten in the storage hook');
  const refused = await call(`${gw.url}/api/roles`, { token: held.accessToken });
  assert.equal(refused.status, 401, 'the access token is refused before it expires');
  assert.equal(refused.body.message.code, 'invalid_token');
  assert.equal((await postJson(`${gw.url}/api/refresh`, { refreshToken: held.refreshToken })).status, 401, 'the family is over');
  // With key credentials the client signs in again at its next call.
  await client.roles();
  assert.notEqual((box.pair as TokenPair | undefined)?.accessToken, held.accessToken);
});

test('signOut with a handed-over pair ends that session for every holder of its refresh token', async (t) => {
  const gw = await startGateway(t);
  const pair = await signIn(gw);
  const client = new GatewayClient({ baseUrl: gw.url, credentials: { refreshToken: pair.refreshToken, accessToken: pair.accessToken } });
  // A renewal first: the family now has a successor, which sign-out must end too.
  const elsewhere = memoryStorage();
  const renewed = new GatewayClient({ baseUrl: gw.url, credentials: { refreshToken: pair.refreshToken }, storage: elsewhere.storage });
  await renewed.roles();
  const successor = elsewhere.box.pair!.refreshToken;
  assert.notEqual(successor, pair.refreshToken);
  await client.signOut();
  assert.equal((await postJson(`${gw.url}/api/refresh`, { refreshToken: successor })).status, 401, 'the successor held elsewhere is dead too');
  assert.equal((await call(`${gw.url}/api/roles`, { token: elsewhere.box.pair!.accessToken })).status, 401, 'and so is the access token renewed elsewhere');
  assert.equal((await call(`${gw.url}/api/roles`, { token: pair.accessToken })).status, 401);
});

test('revoke(): unknown tokens answer normally; a settings token is refused with unsupported_token_type', async (t) => {
  const gw = await startOwnerGateway(t);
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  await client.revoke('not-a-token-of-this-gateway');
  await client.revoke('abc.def.ghi', { tokenTypeHint: 'access_token' });
  const created = await operator(gw).post(`/accounts/${DEMO.alice.accountId}/settings-tokens`, { name: 'ci' });
  assert.equal(created.status, 201);
  const err = await client.revoke(created.body.message.token).catch((e: unknown) => e);
  assert.ok(err instanceof InvalidRequestError);
  assert.equal(err.code, 'unsupported_token_type');
  // A token of its own, revoked by hand: the client's pair is left alone.
  const pair = await signIn(gw);
  await client.revoke(pair.accessToken, { tokenTypeHint: 'access_token' });
  assert.equal((await call(`${gw.url}/api/roles`, { token: pair.accessToken })).status, 401);
});

test('signOut forgets the pair even when the gateway cannot be reached, and says so', async () => {
  const { box, storage } = memoryStorage();
  box.pair = { accessToken: 'a.b.c', refreshToken: 'r' };
  const client = new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: alice, storage, retry: false });
  const err = await client.signOut().catch((e: unknown) => e);
  assert.ok(err instanceof NetworkError, String(err));
  assert.equal(box.pair, undefined);
  assert.ok(!String((err as Error).message).includes('a.b.c'), 'the token is not quoted');
});
