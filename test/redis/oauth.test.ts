/**
 * The token endpoint's narrowed grant on Redis (docs/oauth.md, docs/tokens.md): two gateways
 * on one redis-server, so a family narrowed on one is refreshed on the other through the Lua
 * scripts, keeps its grant there, and refuses a handle edited to drop it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import * as oauth from 'openid-client';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { newKey, writeDataFile } from '../helpers/proxy.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const key = newKey('shared', 'acct_shared', ['orders:read', 'orders:write', 'reports']);

function configFor(gw: TestGateway): Promise<oauth.Configuration> {
  return oauth.discovery(new URL(gw.url), key.apiKey, undefined, oauth.ClientSecretPost(key.secret), { algorithm: 'oauth2', execute: [oauth.allowInsecureRequests] });
}

async function errorOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof oauth.ResponseBodyError, String(err));
    return err.error;
  }
  assert.fail('the grant succeeded');
}

test('a family narrowed on one instance keeps its grant when refreshed on another, in Redis', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const file = writeDataFile(t, [key]);
  const settings = { data: { file }, redis: { url: redis.url, keyPrefix: `oauth-${process.pid}` }, tokens: { memoryStoreMaxTokens: 10_000 } };
  const a = await startGateway(t, { overrides: settings });
  const b = await startGateway(t, { overrides: settings });
  const [onA, onB] = [await configFor(a), await configFor(b)];

  const first = await oauth.clientCredentialsGrant(onA, { scope: 'reports orders:read' });
  assert.equal(first.scope, 'orders:read reports');
  const second = await oauth.refreshTokenGrant(onB, first.refresh_token!);
  assert.equal(second.scope, 'orders:read reports', 'the grant came from the family kept in Redis');
  assert.equal(decodeJwt(second.access_token).scope, 'orders:read reports');
  assert.equal(await errorOf(oauth.refreshTokenGrant(onA, second.refresh_token!, { scope: 'orders:write' })), 'invalid_scope');

  const [handle, secret] = second.refresh_token!.split('.') as [string, string];
  const parts = JSON.parse(Buffer.from(handle, 'base64url').toString('utf8')) as string[];
  const edited = `${Buffer.from(JSON.stringify([...parts.slice(0, 4), 'orders:read orders:write reports'])).toString('base64url')}.${secret}`;
  assert.equal(await errorOf(oauth.refreshTokenGrant(onA, edited)), 'invalid_grant', 'a handle naming a wider grant');
  const third = await oauth.refreshTokenGrant(onA, second.refresh_token!);
  assert.equal(third.scope, 'orders:read reports', 'the refused attempts consumed nothing');
});
