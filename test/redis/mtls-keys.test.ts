/**
 * A key bound to a client certificate where Redis holds the accounts and the keys
 * (KEY_SOURCE=redis): the binding is written with the key's sign-in record (the account's
 * script) and read back through its pointer, by this gateway and by a second one sharing the
 * Redis, so a bound key never signs in without its certificate on any instance. The HTTP side
 * of mTLS is test/tls/mtls.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sha256Hex, startGateway } from '../helpers/gateway.js';
import { ADMIN_TOKEN, startOwnerGateway } from '../helpers/owner.js';
import { redisSuite, startRedis } from '../helpers/redis.js';
import { httpsCall, makeTestCa, type HttpsCallOptions } from '../helpers/tls.js';

test('Redis: a key bound by the owner API signs in only with its certificate, on this instance and another', redisSuite(), async (t) => {
  const ca = makeTestCa();
  const server = ca.leaf('main', ['localhost', '127.0.0.1']);
  const bound = ca.client('bound', '/CN=bound client');
  const other = ca.client('other', '/CN=other client');
  const shared = { redis: { url: (await startRedis(t)).url, keyPrefix: 'mtls' }, data: { keySource: 'redis' }, directory: { store: 'redis' }, tls: { certFile: server.certFile, keyFile: server.keyFile, clientCaFile: ca.caFile } };
  const gw = await startOwnerGateway(t, { overrides: shared });
  const call = (url: string, options: Omit<HttpsCallOptions, 'caPem'> = {}) => httpsCall(url, { ...options, caPem: ca.caPem });

  const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const account = await call(`${gw.url}/owner/v1/accounts`, { method: 'POST', headers: operator, body: { id: 'acct_mtls', name: 'mTLS' } });
  assert.equal(account.status, 201, JSON.stringify(account.body));
  const created = await call(`${gw.url}/owner/v1/accounts/acct_mtls/keys`, { method: 'POST', headers: operator, body: { name: 'bound', certificateSha256: bound.fingerprint256 } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const credentials = { apiKey: created.body.message.key.apiKey as string, apiSecret: sha256Hex(created.body.message.apiSecret as string) };

  const second = await startGateway(t, { overrides: { ...shared, data: { ...shared.data, file: gw.services.config.data.file } } });
  for (const instance of [gw, second]) {
    for (const as of [undefined, other]) {
      const refused = await call(`${instance.url}/api/signin`, { method: 'POST', body: credentials, as });
      assert.equal(refused.status, 401, JSON.stringify(refused.body));
      assert.equal(refused.body.message.code, 'client_certificate_required');
    }
    const signedIn = await call(`${instance.url}/api/signin`, { method: 'POST', body: credentials, as: bound });
    assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
    const claims = JSON.parse(Buffer.from((signedIn.body.message.accessToken as string).split('.')[1]!, 'base64url').toString('utf8'));
    assert.equal(claims.cnf['x5t#S256'], Buffer.from(bound.fingerprint256.replaceAll(':', ''), 'hex').toString('base64url'));
  }
});
