/**
 * Real owner changes raise webhooks: the key service's changes (create, reset) through the owner
 * pipeline, heard by the webhook listener, queued for the account's endpoints, delivered by the
 * sender to a receiver on 127.0.0.1 (the policy allows it) and verified with standardwebhooks.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import type { Revocations } from '../../src/auth/revocation.js';
import { loadConfig } from '../../src/config/load.js';
import type { RateLimits } from '../../src/limits/rate-limits.js';
import { createKeyService } from '../../src/owner/keys.js';
import type { Actor } from '../../src/owner/types.js';
import { createWebhookNotices } from '../../src/owner/webhook-notices.js';
import { createWebhookSender } from '../../src/owner/webhook-sender.js';
import { createWebhookService } from '../../src/owner/webhooks.js';
import { dataFileSchema } from '../../src/state/data-file/data-file.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { MemoryWebhookEndpoints } from '../../src/state/webhooks/memory.js';
import { memoryWebhookQueue } from '../../src/state/webhooks/queue.js';
import { ManualClock } from '../helpers/clock.js';
import { silentLog } from '../helpers/redis.js';

const OPERATOR: Actor = { caller: { kind: 'operator' }, meta: { ip: '192.0.2.1', requestId: 'req-1' } };
const POLICY = { allowPrivateNetworks: true, allowCidrs: [], allowHttp: true };

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

test('a key created and reset: each event delivered, signed, to the endpoints asking for it', async () => {
  const clock = new ManualClock(Date.now());
  const endpoints = new MemoryWebhookEndpoints();
  const queue = memoryWebhookQueue();
  const sender = createWebhookSender({
    queue, clock, log: silentLog, maxAttempts: 3, delivery: { policy: POLICY, timeoutMs: 5000 },
    endpoint: (a, id) => endpoints.find(a, id), record: (a, id, attempt) => endpoints.record(a, id, attempt),
  });
  const webhooks = createWebhookService({ store: endpoints, policy: POLICY, clock, sender });
  const all = await webhooks.create('acct_a', { url });
  const resets = await webhooks.create('acct_a', { url: `${url}?resets`, events: ['key.reset'] });
  const store = new MemoryOwnerStore(dataFileSchema.parse({ accounts: [{ id: 'acct_a', name: 'A' }] }), { maxAuditEvents: 100, persist: async () => {} });
  const keys = createKeyService({
    store,
    sessions: new MemorySessionStore({ clock }),
    revocations: { reset: async () => clock.now() } as unknown as Revocations,
    clock,
    limits: {} as RateLimits,
    log: silentLog,
    config: loadConfig({ env: {}, overrides: {} }),
    listeners: [createWebhookNotices({ endpointsOf: (a) => endpoints.list(a), queue, maxQueued: 100, clock, log: silentLog, wake: () => {} })],
  });
  const { key } = await keys.create(OPERATOR, 'acct_a', { name: 'ci' });
  await keys.resetKey(OPERATOR, 'acct_a', key.id);
  const before = received.length;
  assert.equal(await sender.runOnce(), 3, 'key.created to one endpoint, key.reset to two');
  const verified = received.slice(before).map((r) => {
    for (const secret of [all.secret, resets.secret]) {
      try {
        return [secret === all.secret ? 'all' : 'resets', (new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as { type: string; data: { target: { id: string } } })] as const;
      } catch {
        // Not this endpoint's: try the other.
      }
    }
    assert.fail('a delivery no endpoint secret verifies');
  });
  assert.deepEqual(verified.map(([who, e]) => `${who} ${e.type} ${e.data.target.id}`).sort(), [`all key.created ${key.id}`, `all key.reset ${key.id}`, `resets key.reset ${key.id}`]);
  assert.equal((await webhooks.deliveries('acct_a', all.id)).length, 2);
  assert.equal((await webhooks.deliveries('acct_a', resets.id)).length, 1);
});
