/**
 * Webhooks across two gateway processes on one redis-server: an endpoint made on A is B's too;
 * what B's owner changes raise (keys made, a leak report) reaches the receiver once each,
 * signed with the endpoint's secret (checked with standardwebhooks); and the delivery log
 * B's sender writes is what A answers. The single-gateway flows: test/owner/webhooks.test.ts.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { show } from '../helpers/gateway.js';
import { api, makeSecrets, newAccount, report, reportOf, startKeyServer } from '../helpers/leak-reporter.js';
import { makeAdminToken } from '../helpers/owner-api.js';
import { startGatewayProcess } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';

test('Redis, two instances: an endpoint made on A gets B\'s events once each, and A reads B\'s delivery log', redisSuite(), async (t) => {
  const receiver = await startWebhookReceiver(t);
  const { received } = receiver;

  const redis = await startRedis(t);
  const keys = await startKeyServer(t);
  const admin = makeAdminToken();
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const env = {
    REDIS_URL: redis.url,
    KEY_SOURCE: 'redis',
    SIGNING_KEYS: JSON.stringify([{ kid: 'webhooks-1', alg: 'EdDSA', pem }]),
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([admin.digest]),
    LEAK_REPORT_KEYS_URL: keys.url,
    WEBHOOKS_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOKS_ALLOW_HTTP: 'true',
  };
  const [a, b] = await Promise.all([startGatewayProcess(t, env), startGatewayProcess(t, env)]);
  const account = 'acct_webhooks_redis';
  await newAccount(a, admin.token, account);
  const made = await api(a, admin.token, `/accounts/${account}/webhooks`, { method: 'POST', json: { url: `${receiver.origin}/in`, events: ['key.created', 'key.leak_reported'] } });
  assert.equal(made.status, 201, show(made));
  const { webhook, secret } = made.body.message as { webhook: { id: string }; secret: string };
  assert.equal((await api(b, admin.token, `/accounts/${account}/webhooks/${webhook.id}`)).status, 200, 'B has the endpoint');

  // Three keys made on B, then a leak report of one key's secret to B: four events.
  const s = await makeSecrets(b, admin.token, account);
  for (const name of ['two', 'three']) assert.equal((await api(b, admin.token, `/accounts/${account}/keys`, { method: 'POST', json: { name } })).status, 201);
  const leak = await report(b, reportOf([{ token: s.apiSecret, type: 'gateway_api_secret' }]), { key: keys.privateKey });
  assert.equal(leak.status, 200, show(leak));
  await receiver.arrived(4);
  const events = received.map((r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as { type: string; data: { target: { id: string } } });
  assert.deepEqual(events.map((e) => e.type).sort(), ['key.created', 'key.created', 'key.created', 'key.leak_reported']);
  assert.equal(events.find((e) => e.type === 'key.leak_reported')?.data.target.id, s.keyId);
  assert.equal(new Set(received.map((r) => r.headers['webhook-id'])).size, 4, 'each event once, each with its own id');

  // The log is written once the receiver's answer is read: asked until it holds all four.
  let log: { type: string; ok: boolean }[] = [];
  for (let i = 0; i < 200 && log.length < 4; i++) log = (await api(a, admin.token, `/accounts/${account}/webhooks/${webhook.id}/deliveries`)).body.message.items;
  assert.deepEqual(log.map((x) => `${x.type} ${x.ok}`).sort(), ['key.created true', 'key.created true', 'key.created true', 'key.leak_reported true']);
});
