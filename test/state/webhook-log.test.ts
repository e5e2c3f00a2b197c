/**
 * Webhook delivery logs: the contract (test/contracts/webhook-log.contract.ts) on memory and on
 * a real redis-server; and the deliveries' queue on file (the outbox's contract covers its
 * claims: test/state/outbox.test.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryWebhookLog } from '../../src/state/webhooks/memory.js';
import { fileWebhookQueue } from '../../src/state/webhooks/queue.js';
import { RedisWebhookLog } from '../../src/state/webhooks/redis.js';
import { runWebhookLogContract } from '../contracts/webhook-log.contract.js';
import { redisSuite, serverWithConnection } from '../helpers/redis.js';

runWebhookLogContract('memory', async () => ({ store: new MemoryWebhookLog(), close: async () => {} }));

runWebhookLogContract('redis', async () => {
  const { redis, close } = await serverWithConnection();
  return { store: new RedisWebhookLog(redis), close };
}, redisSuite());

test('the webhook queue on file outlives a restart, and a file that is not a queue names its setting', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-webhook-queue-'));
  try {
    const file = join(dir, 'queue.json');
    const d = { id: 'msg_1', accountId: 'acc_1', endpointId: 'whe_1', type: 'key.created', body: '{}', createdAt: 1 };
    assert.equal(await fileWebhookQueue(file).enqueue([d], 10), true);
    const again = fileWebhookQueue(file);
    assert.deepEqual((await again.claim(2, 1000, 10)).map(({ claim: _c, ...rest }) => rest), [{ ...d, attempts: 0 }]);
    writeFileSync(file, '{"mails": 3}');
    assert.throws(() => fileWebhookQueue(file), /webhooks\.queueFile .*queue\.json is not an outbox/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
