/**
 * The contract of WebhookLogStore (src/state/webhooks/store.ts), run once per implementation:
 * memory (test/state/webhook-log.test.ts) and Redis (the same file, against a real redis-server).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { DELIVERY_LOG_LENGTH, type AttemptRecord, type WebhookLogStore } from '../../src/state/webhooks/store.js';

function attempt(n: number, over: Partial<AttemptRecord> = {}): AttemptRecord {
  return { deliveryId: `msg_${n}`, type: 'key.created', at: new Date(1_800_000_000_000 + n).toISOString(), attempt: 1, ok: true, status: 200, durationMs: n, ...over };
}

export function runWebhookLogContract(name: string, make: () => Promise<{ store: WebhookLogStore; close(): Promise<void> }>, options: { skip: string | false } = { skip: false }): void {
  test(`WebhookLogStore contract: ${name}`, options, async (t) => {
    const { store, close } = await make();
    t.after(close);
    const endpoint = `whe_${randomBytes(6).toString('hex')}`;

    await t.test('an unknown endpoint has an empty log', async () => {
      assert.deepEqual(await store.list(`whe_${randomBytes(6).toString('hex')}`), []);
    });

    await t.test('newest first, every field kept, optional ones absent when absent', async () => {
      await store.record(endpoint, attempt(1));
      await store.record(endpoint, attempt(2, { ok: false, status: 500, error: 'answered 500', attempt: 2 }));
      const { status: _s, ...noStatus } = attempt(3, { ok: false, error: 'timed out' });
      await store.record(endpoint, noStatus);
      assert.deepEqual(await store.list(endpoint), [noStatus, attempt(2, { ok: false, status: 500, error: 'answered 500', attempt: 2 }), attempt(1)]);
    });

    await t.test(`bounded: the newest ${DELIVERY_LOG_LENGTH} kept, also when written at once`, async () => {
      const busy = `whe_${randomBytes(6).toString('hex')}`;
      await Promise.all(Array.from({ length: DELIVERY_LOG_LENGTH + 20 }, (_, i) => store.record(busy, attempt(i))));
      const log = await store.list(busy);
      assert.equal(log.length, DELIVERY_LOG_LENGTH);
      assert.deepEqual(new Set(log.map((a) => a.durationMs)).size, DELIVERY_LOG_LENGTH, 'no entry twice');
    });

    await t.test('logs are per endpoint, and forget drops one', async () => {
      const other = `whe_${randomBytes(6).toString('hex')}`;
      await store.record(other, attempt(9));
      await store.forget(endpoint);
      assert.deepEqual(await store.list(endpoint), []);
      assert.deepEqual(await store.list(other), [attempt(9)]);
      await store.forget(endpoint);
    });
  });
}
