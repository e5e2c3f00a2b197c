/**
 * Webhook deliveries from the durable queue to a receiver on 127.0.0.1 (the policy allows
 * private networks, as an operator's `webhooks.allowPrivateNetworks` would): retries on the
 * mail's backoff by a manual clock, on 500s and on timeouts, given up after `maxAttempts`, the
 * delivery log per endpoint, signatures verified by the standardwebhooks package, and two
 * senders on one Redis delivering each delivery once.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import type { WebhookNetworkPolicy } from '../../src/owner/webhook-address.js';
import { createWebhookNotices } from '../../src/owner/webhook-notices.js';
import { createWebhookSender, type DeliveryResult, type EndpointTarget } from '../../src/owner/webhook-sender.js';
import { newWebhookSecret } from '../../src/owner/webhook-signing.js';
import type { AttemptRecord } from '../../src/state/webhooks/store.js';
import { memoryWebhookQueue, redisWebhookQueue, type WebhookDelivery, type WebhookQueue } from '../../src/state/webhooks/queue.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { ManualClock } from '../helpers/clock.js';
import { connectedRedis, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';

const OPEN: WebhookNetworkPolicy = { allowPrivateNetworks: true, allowCidrs: [], allowHttp: true };

let receiver: ReturnType<typeof createServer>;
let url: string;
const received: { headers: IncomingMessage['headers']; body: string }[] = [];
/** What the receiver does next; by default answers 200. */
const answers: ((res: ServerResponse) => void)[] = [];

before(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      (answers.shift() ?? ((r: ServerResponse) => r.end('ok')))(res);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
after(() => {
  receiver.closeAllConnections();
  receiver.close();
});

let seq = 0;
function delivery(clock: ManualClock, endpointId = 'whe_1'): WebhookDelivery {
  seq += 1;
  const body = JSON.stringify({ type: 'key.created', timestamp: new Date(clock.now()).toISOString(), data: { accountId: 'acc_1', n: seq } });
  return { id: `msg_${seq}`, accountId: 'acc_1', endpointId, type: 'key.created', body, createdAt: clock.now() };
}

function sender(queue: WebhookQueue, clock: ManualClock, endpoints: Map<string, EndpointTarget>, opts: { maxAttempts?: number; timeoutMs?: number } = {}) {
  const log: AttemptRecord[] = [];
  const results: DeliveryResult[] = [];
  const s = createWebhookSender({
    queue, clock, log: silentLog, maxAttempts: opts.maxAttempts ?? 5,
    delivery: { policy: OPEN, timeoutMs: opts.timeoutMs ?? 5000 },
    endpoint: async (_account, id) => endpoints.get(id),
    record: async (_endpoint, attempt) => void log.push(attempt),
    count: (r) => void results.push(r),
  });
  return { s, log, results };
}

test('a 500 is retried after 30 s, then after 60 s, with the same webhook-id, each attempt signed and logged', async () => {
  // Started now: the receiver's check (standardwebhooks) refuses timestamps 5 minutes off.
  const clock = new ManualClock(Date.now());
  const queue = memoryWebhookQueue();
  const secret = newWebhookSecret();
  const { s, log, results } = sender(queue, clock, new Map([['whe_1', { url, secret, enabled: true }]]));
  const d = delivery(clock);
  assert.equal(await queue.enqueue([d], 100), true);
  answers.push((r) => { r.statusCode = 500; r.end(); }, (r) => { r.statusCode = 503; r.end(); });
  const before = received.length;
  assert.equal(await s.runOnce(), 1);
  assert.equal(await s.runOnce(), 0, 'not due again at once');
  clock.advance(29_999);
  assert.equal(await s.runOnce(), 0, 'not before 30 s');
  clock.advance(1);
  assert.equal(await s.runOnce(), 1);
  clock.advance(59_999);
  assert.equal(await s.runOnce(), 0, 'the second wait is twice the first');
  clock.advance(1);
  assert.equal(await s.runOnce(), 1);
  assert.equal(await queue.size(), 0);
  assert.deepEqual(results, ['retry', 'retry', 'delivered']);
  assert.deepEqual(log.map((a) => [a.attempt, a.ok, a.status, a.deliveryId]), [[1, false, 500, d.id], [2, false, 503, d.id], [3, true, 200, d.id]]);
  assert.equal(log[0]!.error, 'answered 500');
  const got = received.slice(before);
  assert.equal(got.length, 3);
  for (const g of got) {
    assert.equal(g.headers['webhook-id'], d.id);
    assert.equal(g.body, d.body);
    new Webhook(secret).verify(g.body, g.headers as Record<string, string>);
  }
  assert.ok(!JSON.stringify(log).includes(secret.slice(6)), 'the log never holds the secret');
});

test('the metrics count each result and report the queue', async () => {
  const metrics = createMetrics({ processMetrics: false });
  const queue = memoryWebhookQueue();
  metrics.watchWebhookQueue(() => queue.size());
  await queue.enqueue([delivery(new ManualClock())], 10);
  metrics.webhookDelivered('retry');
  metrics.webhookDelivered('delivered');
  const text = await metrics.registry.metrics();
  assert.match(text, /gateway_webhook_deliveries_total\{result="retry"\} 1/);
  assert.match(text, /gateway_webhook_deliveries_total\{result="delivered"\} 1/);
  assert.match(text, /gateway_webhook_queue_size 1/);
});

test('a receiver that never answers: the attempt times out and is retried; given up after maxAttempts', async () => {
  const clock = new ManualClock();
  const queue = memoryWebhookQueue();
  const { s, log, results } = sender(queue, clock, new Map([['whe_1', { url, secret: newWebhookSecret(), enabled: true }]]), { maxAttempts: 2, timeoutMs: 200 });
  await queue.enqueue([delivery(clock)], 100);
  answers.push(() => {}, () => {});
  assert.equal(await s.runOnce(), 1);
  clock.advance(30_000);
  assert.equal(await s.runOnce(), 1);
  assert.deepEqual(results, ['retry', 'failed']);
  assert.deepEqual(log.map((a) => a.error), ['no answer within 200 ms', 'no answer within 200 ms']);
  assert.equal(await queue.size(), 0, 'given up: gone from the queue');
  receiver.closeAllConnections();
});

test('a delivery for an endpoint disabled or deleted since is dropped unsent', async () => {
  const clock = new ManualClock();
  const queue = memoryWebhookQueue();
  const { s, log, results } = sender(queue, clock, new Map([['whe_off', { url, secret: newWebhookSecret(), enabled: false }]]));
  const before = received.length;
  await queue.enqueue([delivery(clock, 'whe_off'), delivery(clock, 'whe_gone')], 100);
  assert.equal(await s.runOnce(), 2);
  assert.deepEqual(results, ['dropped', 'dropped']);
  assert.equal(received.length, before);
  assert.equal(log.length, 0);
});

test('a test send goes at once, outside the queue, and is logged', async () => {
  const clock = new ManualClock(Date.now());
  const queue = memoryWebhookQueue();
  const secret = newWebhookSecret();
  const { s, log } = sender(queue, clock, new Map());
  const d = delivery(clock);
  const attempt = await s.sendNow(d, { url, secret, enabled: true });
  assert.equal(attempt.ok, true);
  assert.equal(log.length, 1);
  assert.equal(await queue.size(), 0);
  new Webhook(secret).verify(received.at(-1)!.body, received.at(-1)!.headers as Record<string, string>);
});

test('an event queued while a round is under way is delivered by the next round at once, not at the next poll', { timeout: 20_000 }, async (t) => {
  // The manual clock never reaches the 5 s poll: only the wake can send the second delivery.
  const clock = new ManualClock(Date.now());
  const queue = memoryWebhookQueue();
  const { s, results } = sender(queue, clock, new Map([['whe_1', { url, secret: newWebhookSecret(), enabled: true }]]));
  t.after(() => s.stop());
  s.start();
  let held: ServerResponse | undefined;
  const first = new Promise<void>((resolve) => answers.push((r) => { held = r; resolve(); }));
  const second = new Promise<void>((resolve) => answers.push((r) => { r.end(); resolve(); }));
  await queue.enqueue([delivery(clock)], 100);
  s.wake();
  await first;
  // The first round is waiting on the receiver: this event comes after its claim.
  await queue.enqueue([delivery(clock)], 100);
  s.wake();
  held!.end();
  await second;
  while (results.length < 2) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(results, ['delivered', 'delivered']);
});

test('two senders on one Redis deliver each delivery exactly once', redisSuite(), async () => {
  const server = await startRedis();
  const settings = redisSettings(server.url, { keyPrefix: 'webhooks' });
  const [a, b] = [await connectedRedis(settings), await connectedRedis(settings)];
  try {
    const clock = new ManualClock();
    const endpoints = new Map([['whe_1', { url, secret: newWebhookSecret(), enabled: true }]]);
    const one = sender(redisWebhookQueue(a), clock, endpoints);
    const two = sender(redisWebhookQueue(b), clock, endpoints);
    const deliveries = Array.from({ length: 30 }, () => delivery(clock));
    assert.equal(await redisWebhookQueue(a).enqueue(deliveries, 1000), true);
    const before = received.length;
    // Each claims at most 20 per round: two rounds each cover the 30.
    const claimed = (await Promise.all([one.s.runOnce(), two.s.runOnce(), one.s.runOnce(), two.s.runOnce()])).reduce((x, y) => x + y, 0);
    assert.equal(claimed, 30);
    const ids = received.slice(before).map((r) => r.headers['webhook-id']);
    assert.equal(ids.length, 30);
    assert.equal(new Set(ids).size, 30, 'none twice');
    assert.equal(await redisWebhookQueue(b).size(), 0);
  } finally {
    await a.close();
    await b.close();
    await server.stop();
  }
});

test('the pipeline listener queues each webhook event once per enabled endpoint asking for it, and wakes the sender', async () => {
  const clock = new ManualClock();
  const queue = memoryWebhookQueue();
  let woken = 0;
  const listener = createWebhookNotices({
    endpointsOf: async (accountId) => (accountId === 'acc_1'
      ? [{ id: 'whe_all', enabled: true, events: [] }, { id: 'whe_resets', enabled: true, events: ['key.reset'] }, { id: 'whe_off', enabled: false, events: [] }]
      : []),
    queue, maxQueued: 3, clock, log: silentLog, wake: () => void (woken += 1),
  });
  const event = (id: string, action: string) => ({ id, at: new Date(clock.now()).toISOString(), action, actor: { type: 'owner' as const, id: 'own_1' }, target: { type: 'key', id: 'key_1' } });
  await listener({ audited: [{ accountId: 'acc_1', events: [event('evt_1', 'key.create'), event('evt_2', 'role.create'), event('evt_3', 'key.reset')] }, { accountId: 'acc_2', events: [event('evt_4', 'key.create')] }] });
  const claimed = await queue.claim(clock.now(), 1000, 10);
  assert.deepEqual(claimed.map((d) => [d.endpointId, d.type]).sort(), [['whe_all', 'key.created'], ['whe_all', 'key.reset'], ['whe_resets', 'key.reset']]);
  assert.equal(woken, 1);
  const payload = JSON.parse(claimed[0]!.body) as { type: string; timestamp: string; data: { accountId: string; auditEventId: string } };
  assert.deepEqual(Object.keys(payload), ['type', 'timestamp', 'data']);
  assert.equal(payload.data.accountId, 'acc_1');
  // Bounded: a change whose deliveries would not fit is dropped whole, the sender not woken.
  await listener({ audited: [{ accountId: 'acc_1', events: [event('evt_5', 'key.create')] }] });
  assert.equal(await queue.size(), 3);
  assert.equal(woken, 1);
});
