/**
 * The contract of SessionStore (src/state/sessions/store.ts), run once per implementation.
 *
 * Time moves through `elapse`: the memory store reads an injected ManualClock, so there it
 * advances the clock; a Redis store may sleep instead. Deadlines are therefore set relative to
 * `now()` and kept a few seconds apart, and only the tests about an ending session elapse time
 * (about 2 s in all). Every test uses digests and owner ids of its own.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { OwnerSession, SessionStore } from '../../src/state/sessions/store.js';

export interface SessionStoreUnderTest {
  sessions: SessionStore;
  /** The time the store reads (epoch ms). */
  now(): number;
  /** Lets `ms` of time pass for the store (memory: the clock; Redis: a real wait). */
  elapse(ms: number): Promise<void>;
  close(): Promise<void>;
}

function digest(): string {
  return `sha256:${randomBytes(32).toString('hex')}`;
}

function ownerId(): string {
  return `own_${randomBytes(6).toString('hex')}`;
}

export function runSessionStoreContract(name: string, make: () => Promise<SessionStoreUnderTest>, options: { skip?: string | false } = {}): void {
  test(`SessionStore contract: ${name}`, options, async (t) => {
    const { sessions, now, elapse, close } = await make();
    t.after(close);

    function session(owner: string, { idleMs = 60_000, maxMs = 3_600_000 } = {}): OwnerSession {
      const at = now();
      return { ownerId: owner, csrfToken: randomBytes(16).toString('hex'), createdAt: at, idleExpiresAt: at + idleMs, expiresAt: at + maxMs };
    }

    await t.test('a created session is found as it was stored, by its digest only', async () => {
      const d = digest();
      const s = session(ownerId());
      await sessions.create(d, s);
      assert.deepEqual(await sessions.find(d), s);
      assert.equal(await sessions.find(digest()), undefined, 'an unknown digest finds nothing');
    });

    await t.test('what find answers is a copy: changing it changes nothing stored', async () => {
      const d = digest();
      const s = session(ownerId());
      await sessions.create(d, s);
      const found = await sessions.find(d);
      found!.ownerId = 'someone_else';
      found!.idleExpiresAt += 999_999;
      assert.deepEqual(await sessions.find(d), s);
    });

    await t.test('delete ends a session; deleting an unknown one is no error', async () => {
      const d = digest();
      await sessions.create(d, session(ownerId()));
      await sessions.delete(d);
      assert.equal(await sessions.find(d), undefined);
      await sessions.delete(digest());
    });

    await t.test('a session unused past its idle deadline is gone; touch moves the deadline', async () => {
      const touched = digest();
      const idle = digest();
      await sessions.create(touched, session(ownerId(), { idleMs: 1500 }));
      await sessions.create(idle, session(ownerId(), { idleMs: 1500 }));
      await elapse(800);
      await sessions.touch(touched, now() + 1500);
      assert.ok((await sessions.find(touched))!.idleExpiresAt >= now() + 1000, 'the new idle deadline is stored');
      await elapse(1000);
      assert.equal(await sessions.find(idle), undefined, 'untouched: ended 1.5 s after creation');
      assert.notEqual(await sessions.find(touched), undefined, 'touched: alive past the first deadline');
    });

    await t.test('touch never moves the idle deadline past the absolute end', async () => {
      const d = digest();
      const s = session(ownerId(), { idleMs: 500, maxMs: 1200 });
      await sessions.create(d, s);
      await sessions.touch(d, now() + 60_000);
      assert.equal((await sessions.find(d))!.idleExpiresAt, s.expiresAt, 'capped at expiresAt');
      await elapse(1300);
      assert.equal(await sessions.find(d), undefined, 'ended at its absolute deadline, touched or not');
    });

    await t.test('touching an unknown or ended session does not bring it back', async () => {
      const d = digest();
      await sessions.touch(d, now() + 60_000);
      assert.equal(await sessions.find(d), undefined);
      await sessions.create(d, session(ownerId()));
      await sessions.delete(d);
      await sessions.touch(d, now() + 60_000);
      assert.equal(await sessions.find(d), undefined);
      // Idle past its deadline, and not looked at since: a touch then (a request that found it a
      // moment before) does not revive it.
      const idle = digest();
      await sessions.create(idle, session(ownerId(), { idleMs: 1500 }));
      await elapse(1600);
      await sessions.touch(idle, now() + 60_000);
      assert.equal(await sessions.find(idle), undefined, 'an idle-ended session stays ended');
    });

    await t.test('deleteOwnerSessions ends every session of the owner but the one kept, and no one else\'s', async () => {
      const owner = ownerId();
      const other = ownerId();
      const [a, b, kept, foreign] = [digest(), digest(), digest(), digest()];
      for (const d of [a, b, kept]) await sessions.create(d, session(owner));
      await sessions.create(foreign, session(other));
      await sessions.deleteOwnerSessions(owner, kept);
      assert.equal(await sessions.find(a), undefined);
      assert.equal(await sessions.find(b), undefined);
      assert.notEqual(await sessions.find(kept), undefined, 'the kept session lives');
      assert.notEqual(await sessions.find(foreign), undefined, 'another owner\'s session lives');
      await sessions.deleteOwnerSessions(owner);
      assert.equal(await sessions.find(kept), undefined, 'without keep: every session of the owner ends');
      assert.notEqual(await sessions.find(foreign), undefined);
      await sessions.deleteOwnerSessions(ownerId());
    });

    await t.test('listOwnerSessions answers the owner\'s live sessions, newest first, with what they were made with', async () => {
      const owner = ownerId();
      const made: { d: string; s: OwnerSession }[] = [];
      for (let i = 0; i < 3; i++) {
        const s = { ...session(owner), createdAt: now() + i, lastSeenAt: now() + i, ip: `192.0.2.${i}`, userAgent: `agent ${i}` };
        const d = digest();
        assert.deepEqual(await sessions.create(d, s), [], 'no cap: nothing ends');
        made.push({ d, s });
      }
      await sessions.create(digest(), session(ownerId()));
      await sessions.delete(made[1]!.d);
      const listed = await sessions.listOwnerSessions(owner);
      assert.deepEqual(listed, [{ digest: made[2]!.d, session: made[2]!.s }, { digest: made[0]!.d, session: made[0]!.s }]);
      assert.deepEqual(await sessions.listOwnerSessions(ownerId()), [], 'an owner without sessions has none');
      await sessions.deleteOwnerSessions(owner, made[0]!.d);
      assert.deepEqual((await sessions.listOwnerSessions(owner)).map((x) => x.digest), [made[0]!.d]);
    });

    await t.test('touch marks the session seen at the store\'s now', async () => {
      const d = digest();
      await sessions.create(d, { ...session(ownerId()), lastSeenAt: now() });
      await elapse(20);
      const at = now();
      await sessions.touch(d, at + 30_000);
      const seen = (await sessions.find(d))!.lastSeenAt!;
      assert.ok(seen >= at, 'lastSeenAt moved to the time of the touch');
    });

    await t.test('create with maxPerOwner ends the owner\'s oldest sessions and answers them, and no other owner\'s', async () => {
      const owner = ownerId();
      const other = ownerId();
      const foreign = digest();
      await sessions.create(foreign, session(other), { maxPerOwner: 2 });
      const made: string[] = [];
      const evicted: string[] = [];
      for (let i = 0; i < 5; i++) {
        const d = digest();
        made.push(d);
        const ended = await sessions.create(d, { ...session(owner), createdAt: now() + i }, { maxPerOwner: 2 });
        for (const e of ended) {
          assert.equal(e.session.ownerId, owner);
          evicted.push(e.digest);
        }
      }
      assert.deepEqual(evicted, made.slice(0, 3), 'the oldest went first, each once, as they were pushed out');
      for (const d of made.slice(0, 3)) assert.equal(await sessions.find(d), undefined);
      assert.deepEqual((await sessions.listOwnerSessions(owner)).map((x) => x.digest), [made[4], made[3]]);
      assert.notEqual(await sessions.find(foreign), undefined, 'another owner\'s session lives');
    });

    await t.test('a session created after deleteOwnerSessions is not affected by it', async () => {
      const owner = ownerId();
      await sessions.create(digest(), session(owner));
      await sessions.deleteOwnerSessions(owner);
      const fresh = digest();
      await sessions.create(fresh, session(owner));
      assert.notEqual(await sessions.find(fresh), undefined);
    });
  });
}
