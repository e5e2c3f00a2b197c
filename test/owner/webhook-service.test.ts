/**
 * The webhook endpoints' service over the memory endpoint store, with the real sender: input
 * refused with 4xx errors (bad URLs, private addresses, unknown event types), the secret only in
 * create's and roll's answers, a test send reaching a receiver on 127.0.0.1 (allowed by the
 * policy) signed with the current secret and logged for the endpoint.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { GatewayError } from '../../src/errors/errors.js';
import type { WebhookNetworkPolicy } from '../../src/owner/webhook-address.js';
import { createWebhookSender } from '../../src/owner/webhook-sender.js';
import { createWebhookService } from '../../src/owner/webhooks.js';
import { MemoryWebhookEndpoints } from '../../src/state/webhooks/memory.js';
import { memoryWebhookQueue } from '../../src/state/webhooks/queue.js';
import { ManualClock } from '../helpers/clock.js';
import { silentLog } from '../helpers/redis.js';

let receiver: ReturnType<typeof createServer>;
let url: string;
const received: { headers: IncomingMessage['headers']; body: string }[] = [];
before(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
after(() => receiver.close());

function service(policy: WebhookNetworkPolicy) {
  const clock = new ManualClock(Date.now());
  const store = new MemoryWebhookEndpoints();
  const sender = createWebhookSender({
    queue: memoryWebhookQueue(), clock, log: silentLog, maxAttempts: 3, delivery: { policy, timeoutMs: 5000 },
    endpoint: (a, id) => store.find(a, id), record: (a, id, attempt) => store.record(a, id, attempt),
  });
  return createWebhookService({ store, policy, clock, sender });
}

async function refused(p: Promise<unknown>, status: number, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => err instanceof GatewayError && err.status === status && pattern.test(err.message));
}

test('bad input: 4xx errors naming the fault, never a store write', async () => {
  const s = service({ allowPrivateNetworks: false, allowCidrs: [], allowHttp: false });
  for (const bad of ['https://127.0.0.1/', 'https://10.0.0.1/', 'https://169.254.169.254/', 'https://[::1]/', 'https://[::ffff:127.0.0.1]/']) {
    await refused(s.create('acc_1', { url: bad }), 400, /private or reserved/);
  }
  await refused(s.create('acc_1', { url: 'http://hooks.example.com/' }), 400, /https/);
  await refused(s.create('acc_1', { url: 'not a url' }), 400, /absolute URL/);
  await refused(s.create('acc_1', {}), 400, /url is required/);
  await refused(s.create('acc_1', { url: 'https://hooks.example.com/', events: ['key.created', 'nope'] }), 400, /unknown event types: nope/);
  await refused(s.get('acc_1', 'whe_none'), 404, /No webhook endpoint/);
  assert.deepEqual(await s.list('acc_1'), []);
});

test('create answers the secret once; list and get never; roll answers a new one; delete', async () => {
  const s = service({ allowPrivateNetworks: false, allowCidrs: [], allowHttp: false });
  const made = await s.create('acc_1', { url: 'https://hooks.example.com/in', events: ['key.created', 'key.created'] });
  assert.match(made.secret, /^whsec_/);
  assert.deepEqual(made.events, ['key.created']);
  assert.equal('secret' in (await s.get('acc_1', made.id)), false);
  assert.equal('secret' in (await s.list('acc_1'))[0]!, false);
  const updated = await s.update('acc_1', made.id, { enabled: false, events: [] });
  assert.deepEqual([updated.enabled, updated.events, updated.url], [false, [], 'https://hooks.example.com/in']);
  const rolled = await s.rollSecret('acc_1', made.id);
  assert.notEqual(rolled.secret, made.secret);
  await s.remove('acc_1', made.id);
  await refused(s.get('acc_1', made.id), 404, /No webhook endpoint/);
  await refused(s.get('acc_2', made.id), 404, /No webhook endpoint/);
});

test('a test send reaches the receiver signed with the current secret, and is in the delivery log', async () => {
  const s = service({ allowPrivateNetworks: true, allowCidrs: [], allowHttp: true });
  const made = await s.create('acc_1', { url });
  const rolled = await s.rollSecret('acc_1', made.id);
  const attempt = await s.sendTest('acc_1', made.id);
  assert.equal(attempt.ok, true);
  const got = received.at(-1)!;
  assert.equal((new Webhook(rolled.secret).verify(got.body, got.headers as Record<string, string>) as { type: string }).type, 'webhook.test');
  assert.throws(() => new Webhook(made.secret).verify(got.body, got.headers as Record<string, string>), 'the old secret no longer signs');
  const log = await s.deliveries('acc_1', made.id);
  assert.deepEqual(log.map((a) => [a.type, a.ok, a.status]), [['webhook.test', true, 200]]);
  assert.ok(!JSON.stringify(log).includes(rolled.secret.slice(6)));
});
