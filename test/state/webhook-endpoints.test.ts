/**
 * Webhook endpoints: the contract (test/contracts/webhook-endpoints.contract.ts) on memory; and
 * the deliveries' queue on file (the outbox's contract covers its claims: test/state/outbox.test.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryWebhookEndpoints } from '../../src/state/webhooks/memory.js';
import { fileWebhookQueue } from '../../src/state/webhooks/queue.js';
import { runWebhookEndpointContract } from '../contracts/webhook-endpoints.contract.js';

runWebhookEndpointContract('memory', async () => ({ store: new MemoryWebhookEndpoints(), close: async () => {} }));

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
