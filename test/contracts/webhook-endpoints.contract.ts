/**
 * The contract of WebhookEndpointStore (src/state/webhooks/endpoints.ts), run once per
 * implementation (memory so far; the owner store's data file and Redis are to pass it too).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { DELIVERY_LOG_LENGTH, MAX_ENDPOINTS, type WebhookEndpoint, type WebhookEndpointStore } from '../../src/state/webhooks/endpoints.js';

export function newEndpoint(over: Partial<WebhookEndpoint> = {}): WebhookEndpoint {
  const at = '2026-01-01T00:00:00.000Z';
  return { id: `whe_${randomBytes(6).toString('hex')}`, url: 'https://hooks.example.com/in', description: '', events: [], enabled: true, secret: `whsec_${randomBytes(32).toString('base64')}`, createdAt: at, updatedAt: at, ...over };
}

export function runWebhookEndpointContract(name: string, make: () => Promise<{ store: WebhookEndpointStore; reopen?: () => Promise<WebhookEndpointStore>; close(): Promise<void> }>): void {
  test(`WebhookEndpointStore contract: ${name}`, async (t) => {
    const { store, reopen, close } = await make();
    t.after(close);
    const account = `acc_${randomBytes(4).toString('hex')}`;

    await t.test('add, list without secrets, find with it, per account', async () => {
      const a = newEndpoint({ events: ['key.created'] });
      assert.equal(await store.add(account, a), true);
      assert.equal(await store.add(account, a), false, 'the same id twice');
      const listed = await store.list(account);
      assert.deepEqual(listed.map((e) => e.id), [a.id]);
      assert.equal('secret' in listed[0]!, false);
      assert.deepEqual(await store.find(account, a.id), a);
      assert.equal(await store.find('acc_other', a.id), undefined);
      assert.deepEqual(await store.list('acc_other'), []);
    });

    await t.test('update and remove: false when gone', async () => {
      const e = newEndpoint();
      await store.add(account, e);
      assert.equal(await store.update(account, { ...e, enabled: false, events: ['key.reset'] }), true);
      assert.deepEqual((await store.find(account, e.id))?.events, ['key.reset']);
      assert.equal(await store.remove(account, e.id), true);
      assert.equal(await store.remove(account, e.id), false);
      assert.equal(await store.update(account, e), false);
    });

    await t.test('the log keeps the newest attempts, newest first; none for a gone endpoint', async () => {
      const e = newEndpoint();
      await store.add(account, e);
      for (let i = 1; i <= DELIVERY_LOG_LENGTH + 5; i += 1) {
        await store.record(account, e.id, { deliveryId: `msg_${i}`, type: 'key.created', at: '2026-01-01T00:00:00.000Z', attempt: 1, ok: i % 2 === 0, status: 200, durationMs: i });
      }
      const log = await store.log(account, e.id);
      assert.equal(log.length, DELIVERY_LOG_LENGTH);
      assert.equal(log[0]!.deliveryId, `msg_${DELIVERY_LOG_LENGTH + 5}`);
      await store.record(account, 'whe_gone', { deliveryId: 'msg_x', type: 'x', at: 'x', attempt: 1, ok: true, durationMs: 0 });
      assert.deepEqual(await store.log(account, 'whe_gone'), []);
      await store.remove(account, e.id);
      assert.deepEqual(await store.log(account, e.id), [], 'the log goes with its endpoint');
    });

    await t.test('an account has MAX_ENDPOINTS at most', async () => {
      const full = `acc_${randomBytes(4).toString('hex')}`;
      for (let i = 0; i < MAX_ENDPOINTS; i += 1) assert.equal(await store.add(full, newEndpoint()), true);
      assert.equal(await store.add(full, newEndpoint()), false);
    });

    if (reopen !== undefined) {
      await t.test('what was stored outlives a restart', async () => {
        const e = newEndpoint();
        await store.add(account, e);
        assert.deepEqual(await (await reopen()).find(account, e.id), e);
      });
    }
  });
}
