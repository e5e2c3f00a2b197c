/**
 * The contract of OutboxStore (src/state/outbox/store.ts), run once per implementation: memory,
 * the file outbox (also read back from its file, as after a restart) and Redis. Times are given
 * to the store (claim's `now`), so no test waits. `second` is another handle on the same outbox
 * (another instance: Redis; the same object where there is one process).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { NewMail, OutboxStore } from '../../src/state/outbox/store.js';

export interface OutboxUnderTest {
  outbox: OutboxStore;
  /** Another instance's handle on the same outbox. */
  second: OutboxStore;
  /** The outbox as a restarted gateway reads it, where it outlives a restart; undefined for memory. */
  reopen?: () => Promise<OutboxStore>;
  close(): Promise<void>;
}

const T0 = Date.UTC(2026, 0, 1);

export function newMail(over: Partial<NewMail> = {}): NewMail {
  return { id: `mail_${randomBytes(6).toString('hex')}`, to: 'owner@example.com', subject: 's', text: 't', html: '<p>t</p>', kind: 'notice', createdAt: T0, ...over };
}

export function runOutboxContract(name: string, make: () => Promise<OutboxUnderTest>, options: { skip?: string | false } = {}): void {
  test(`OutboxStore contract: ${name}`, options, async (t) => {
    const { outbox, second, reopen, close } = await make();
    t.after(close);

    await t.test('a queued mail is claimed once, whole, then gone when sent', async () => {
      const mail = newMail({ accountId: 'acct_1', text: 'hello\nworld', html: '<p>&amp;</p>' });
      assert.equal(await outbox.enqueue([mail], 100), true);
      assert.equal(await outbox.size(), 1);
      const [claimed, ...rest] = await outbox.claim(T0, 60_000, 10);
      assert.deepEqual(rest, []);
      const { claim, ...queued } = claimed!;
      assert.equal(typeof claim, 'string');
      assert.deepEqual(queued, { ...mail, attempts: 0 });
      // Held by the lease: no other claim (another instance's neither) gets it.
      assert.deepEqual(await second.claim(T0 + 59_999, 60_000, 10), []);
      await outbox.sent(claimed!);
      assert.equal(await outbox.size(), 0);
      assert.deepEqual(await outbox.claim(T0 + 10 * 60_000, 60_000, 10), []);
    });

    await t.test('a mail is not due before its time; a retry makes it due later with one attempt more', async () => {
      const mail = newMail({ createdAt: T0 + 1000 });
      await outbox.enqueue([mail], 100);
      assert.deepEqual(await outbox.claim(T0, 60_000, 10), []);
      const [claimed] = await outbox.claim(T0 + 1000, 60_000, 10);
      await outbox.retry(claimed!, T0 + 31_000);
      assert.deepEqual(await outbox.claim(T0 + 30_999, 60_000, 10), []);
      const [again] = await second.claim(T0 + 31_000, 60_000, 10);
      assert.equal(again!.id, mail.id);
      assert.equal(again!.attempts, 1);
      await second.sent(again!);
      assert.equal(await outbox.size(), 0);
    });

    await t.test('a lapsed lease lets another claim take the mail; the first claim then settles nothing', async () => {
      const mail = newMail();
      await outbox.enqueue([mail], 100);
      const [first] = await outbox.claim(T0, 1000, 10);
      const [taken] = await second.claim(T0 + 1000, 60_000, 10);
      assert.equal(taken!.id, mail.id);
      assert.notEqual(taken!.claim, first!.claim);
      await outbox.sent(first!);
      await outbox.retry(first!, T0);
      assert.equal(await outbox.size(), 1, 'the stale claim removed nothing');
      assert.deepEqual(await outbox.claim(T0 + 2000, 1000, 10), [], 'nor made it due again');
      await second.sent(taken!);
      assert.equal(await outbox.size(), 0);
    });

    await t.test('claims take the oldest due first, at most `limit`', async () => {
      const mails = [newMail({ createdAt: T0 + 3 }), newMail({ createdAt: T0 + 1 }), newMail({ createdAt: T0 + 2 })];
      await outbox.enqueue(mails, 100);
      const claimed = await outbox.claim(T0 + 10, 60_000, 2);
      assert.deepEqual(claimed.map((m) => m.id), [mails[1]!.id, mails[2]!.id]);
      const last = await second.claim(T0 + 10, 60_000, 2);
      assert.deepEqual(last.map((m) => m.id), [mails[0]!.id]);
      for (const m of [...claimed, ...last]) await outbox.sent(m);
    });

    await t.test('the bound: mails that would go past it are refused, all of them', async () => {
      assert.equal(await outbox.enqueue([newMail(), newMail()], 2), true);
      assert.equal(await outbox.enqueue([newMail()], 2), false);
      assert.equal(await outbox.size(), 2);
      for (const m of await outbox.claim(T0, 60_000, 10)) await outbox.sent(m);
      assert.equal(await outbox.enqueue([newMail(), newMail(), newMail()], 2), false, 'all or none');
      assert.equal(await outbox.size(), 0);
    });

    await t.test('concurrent claims of many instances get each mail once', async () => {
      const mails = Array.from({ length: 20 }, () => newMail());
      await outbox.enqueue(mails, 100);
      const rounds = await Promise.all([outbox, second, outbox, second].map((o) => o.claim(T0, 60_000, 7)));
      const ids = rounds.flat().map((m) => m.id);
      assert.equal(ids.length, 20);
      assert.equal(new Set(ids).size, 20);
      for (const m of rounds.flat()) await outbox.sent(m);
    });

    if (reopen !== undefined) {
      await t.test('queued mails outlive a restart, with their attempts; a claim cut short is due at its lease\'s end', async () => {
        const [a, b] = [newMail(), newMail()];
        await outbox.enqueue([a, b], 100);
        const claimed = await outbox.claim(T0, 60_000, 1);
        await outbox.retry(claimed[0]!, T0 + 5000);
        await outbox.claim(T0 + 5000, 60_000, 10);
        const restarted = await reopen();
        assert.equal(await restarted.size(), 2);
        assert.deepEqual(await restarted.claim(T0 + 64_999, 60_000, 10), []);
        const due = await restarted.claim(T0 + 65_000, 60_000, 10);
        assert.deepEqual(due.map((m) => m.id).sort(), [a.id, b.id].sort());
        assert.deepEqual(due.map((m) => m.attempts).sort(), [0, 1]);
        for (const m of due) await restarted.sent(m);
      });
    }
  });
}
