/**
 * The contract of RateCounters (src/state/rate-counters/store.ts), run once per implementation.
 *
 * Time moves through `elapse`: the memory counters read an injected ManualClock, so there it
 * advances the clock; Redis windows use real PTTL, so there it sleeps. Only the one test about
 * a window ending elapses time (1.1 s in all, on a 1-second window); every other test uses
 * windows far longer than it runs. `slackMs` is how much less than announced a Redis window
 * may have left when read (its PTTL runs while the test does); the memory counters are exact.
 * Every test counts subjects of its own, so the tests do not see each other's counts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { CounterWindow, RateCounters, Tally } from '../../src/state/rate-counters/store.js';

export interface CountersUnderTest {
  counters: RateCounters;
  /** Lets `ms` of time pass for the counters (memory: the clock; Redis: a real wait). */
  elapse(ms: number): Promise<void>;
  /** How many windows the store holds now, of every subject (memory: its entries; Redis: DBSIZE). */
  held(): Promise<number>;
  /** How far below the expected time left a window's `resetsInMs` may read (0: exact). */
  slackMs: number;
  close(): Promise<void>;
}

const MINUTE = 60_000;
const HOUR = 3_600_000;

function subject(label = 's'): string {
  return `${label}:${randomBytes(6).toString('hex')}`;
}

export function runRateCountersContract(name: string, make: () => Promise<CountersUnderTest>, options: { skip?: string | false } = {}): void {
  test(`RateCounters contract: ${name}`, options, async (t) => {
    const { counters, elapse, held, slackMs, close } = await make();
    t.after(close);

    /** `resetsInMs` of each window: exactly `expected` for a window just opened, else within the slack below it. */
    function assertResets(tally: Tally, expected: number[], what: string): void {
      assert.equal(tally.resetsInMs.length, expected.length, `${what}: one resetsInMs per window`);
      expected.forEach((ms, i) => {
        const got = tally.resetsInMs[i]!;
        // A timer may fire a millisecond early against Redis's clock: a hair above is allowed there.
        const above = slackMs > 0 ? 5 : 0;
        assert.ok(got >= ms - slackMs && got <= ms + above, `${what}: window ${i} resets in ${got} ms, expected ${ms} (slack ${slackMs})`);
      });
    }

    /** `n` hits in a row; returns the tallies. */
    async function hits(s: string, windows: readonly CounterWindow[], n: number, cost = 1): Promise<Tally[]> {
      const out: Tally[] = [];
      for (let i = 0; i < n; i++) out.push(await counters.hit(s, windows, cost));
      return out;
    }

    await t.test('a first hit opens every window: admitted, counts 1, each window resets in its full length', async () => {
      const s = subject();
      const windows = [{ limit: 3, ms: MINUTE }, { limit: 10, ms: HOUR }];
      const tally = await counters.hit(s, windows, 1);
      assert.equal(tally.admitted, true);
      assert.deepEqual(tally.counts, [1, 1]);
      // A window just opened announces exactly its length, in both implementations.
      assert.deepEqual(tally.resetsInMs, [MINUTE, HOUR]);
    });

    await t.test('admits up to the limit, then refuses without adding, and reports the counts', async () => {
      const s = subject();
      const windows = [{ limit: 3, ms: MINUTE }];
      const tallies = await hits(s, windows, 5);
      assert.deepEqual(tallies.map((x) => x.admitted), [true, true, true, false, false]);
      assert.deepEqual(tallies.map((x) => x.counts[0]), [1, 2, 3, 3, 3], 'a refused hit adds nothing');
      for (const x of tallies.slice(1)) assertResets(x, [MINUTE], 'a window counts from its first unit');
    });

    await t.test('several windows: a hit refused by the burst window spends nothing of the sustained one', async () => {
      const s = subject();
      const burst = { limit: 2, ms: MINUTE };
      const sustained = { limit: 5, ms: HOUR };
      const tallies = await hits(s, [burst, sustained], 4);
      assert.deepEqual(tallies.map((x) => x.admitted), [true, true, false, false]);
      assert.deepEqual(tallies.map((x) => x.counts), [[1, 1], [2, 2], [2, 2], [2, 2]]);
      // The sustained window alone (same subject, same length: the same counter) still holds 2.
      const alone = await counters.hit(s, [sustained], 1);
      assert.equal(alone.admitted, true);
      assert.deepEqual(alone.counts, [3], 'the two refused hits did not count in the sustained window');
    });

    await t.test('several windows: a hit refused by the sustained window spends nothing of the burst one', async () => {
      const s = subject();
      const burst = { limit: 5, ms: MINUTE };
      const sustained = { limit: 2, ms: HOUR };
      const tallies = await hits(s, [burst, sustained], 3);
      assert.deepEqual(tallies.map((x) => x.admitted), [true, true, false]);
      assert.deepEqual(tallies[2]!.counts, [2, 2]);
      const alone = await counters.hit(s, [burst], 1);
      assert.deepEqual([alone.admitted, alone.counts], [true, [3]], 'the refused hit did not count in the burst window');
    });

    await t.test('counts and resetsInMs are reported per window, in the order given', async () => {
      const s = subject();
      const a = { limit: 10, ms: MINUTE };
      const b = { limit: 10, ms: 2 * MINUTE };
      await hits(s, [a], 2);
      const tally = await counters.hit(s, [b, a], 1);
      assert.equal(tally.admitted, true);
      assert.deepEqual(tally.counts, [1, 3]);
      assert.equal(tally.resetsInMs[0], 2 * MINUTE, 'b was opened by this hit');
      assertResets(tally, [2 * MINUTE, MINUTE], 'b then a');
      const reversed = await counters.hit(s, [a, b], 1);
      assert.deepEqual(reversed.counts, [4, 2]);
    });

    await t.test('exactly `limit` of 200 concurrent hits are admitted, each seeing its own count', async () => {
      const s = subject();
      const windows = [{ limit: 50, ms: MINUTE }, { limit: 80, ms: HOUR }];
      const tallies = await Promise.all(Array.from({ length: 200 }, () => counters.hit(s, windows, 1)));
      const admitted = tallies.filter((x) => x.admitted);
      assert.equal(admitted.length, 50);
      assert.deepEqual(admitted.map((x) => x.counts[0]).sort((p, q) => p! - q!), Array.from({ length: 50 }, (_, i) => i + 1), 'admitted hits saw the counts 1..50, once each');
      for (const x of tallies.filter((y) => !y.admitted)) assert.deepEqual(x.counts, [50, 50]);
      const after = await counters.hit(s, [windows[1]!], 1);
      assert.deepEqual(after.counts, [51], 'the sustained window holds exactly the 50 admitted');
    });

    // Hits asked for in one turn may go to the store together (Redis: one script call): each
    // still counts as if alone, in the order asked.
    await t.test('hits on several subjects in one turn: a subject refused does not affect another', async () => {
      const full = subject('full');
      const free = subject('free');
      const windows = [{ limit: 2, ms: MINUTE }, { limit: 5, ms: HOUR }];
      await hits(full, windows, 2);
      const [a, b, c, d] = await Promise.all([
        counters.hit(full, windows, 1),
        counters.hit(free, windows, 1),
        counters.hit(full, windows, 1),
        counters.hit(free, windows, 1),
      ]);
      assert.deepEqual([a!.admitted, a!.counts], [false, [2, 2]]);
      assert.deepEqual([b!.admitted, b!.counts], [true, [1, 1]]);
      assert.deepEqual([c!.admitted, c!.counts], [false, [2, 2]]);
      assert.deepEqual([d!.admitted, d!.counts], [true, [2, 2]]);
    });

    await t.test('hits, refunds and a clear in one turn act in the order asked', async () => {
      const s = subject();
      const windows = [{ limit: 3, ms: MINUTE }];
      const [first, second] = await Promise.all([counters.hit(s, windows, 2), counters.hit(s, windows, 2), counters.refund(s, windows, 1)]);
      assert.deepEqual([first.admitted, first.counts, second.admitted, second.counts], [true, [2], false, [2]]);
      assert.deepEqual((await counters.hit(s, windows, 1)).counts, [2], 'the refund gave one back');
      const [, cleared] = await Promise.all([counters.hit(s, windows, 1), counters.clear(s, windows)]);
      assert.equal(cleared, undefined);
      assert.deepEqual((await counters.hit(s, windows, 1)).counts, [1], 'the hit before the clear was cleared with it');
    });

    await t.test('a cost counts as that many units; a cost larger than what is left is refused and adds nothing', async () => {
      const s = subject();
      const windows = [{ limit: 10, ms: MINUTE }, { limit: 100, ms: HOUR }];
      const first = await counters.hit(s, windows, 3);
      assert.deepEqual([first.admitted, first.counts], [true, [3, 3]]);
      const tooMuch = await counters.hit(s, windows, 8);
      assert.deepEqual([tooMuch.admitted, tooMuch.counts], [false, [3, 3]]);
      const exact = await counters.hit(s, windows, 7);
      assert.deepEqual([exact.admitted, exact.counts], [true, [10, 10]], 'a cost that fills the window exactly is admitted');
      const one = await counters.hit(s, windows, 1);
      assert.deepEqual([one.admitted, one.counts], [false, [10, 10]]);
    });

    await t.test('a cost above the limit is refused on a fresh subject and opens no window', async () => {
      const s = subject();
      const windows = [{ limit: 5, ms: MINUTE }];
      const refused = await counters.hit(s, windows, 6);
      assert.equal(refused.admitted, false);
      assert.deepEqual(refused.counts, [0]);
      assert.deepEqual(refused.resetsInMs, [MINUTE], 'no window open: it would reset a full length after its first unit');
      const next = await counters.hit(s, windows, 5);
      assert.deepEqual([next.admitted, next.counts, next.resetsInMs], [true, [5], [MINUTE]], 'the window opens with the first admitted unit');
    });

    await t.test('a window ends its length after its first admitted unit and starts over; refund does not reopen it', async () => {
      const s = subject();
      const short = { limit: 2, ms: 1000 };
      const long = { limit: 100, ms: HOUR };
      const a = await counters.hit(s, [short, long], 1);
      assert.deepEqual([a.admitted, a.counts, a.resetsInMs], [true, [1, 1], [1000, HOUR]]);
      await elapse(600);
      const b = await counters.hit(s, [short, long], 1);
      assert.deepEqual([b.admitted, b.counts], [true, [2, 2]]);
      assertResets(b, [400, HOUR - 600], 'the window runs from the first unit, not the last');
      const c = await counters.hit(s, [short, long], 1);
      assert.deepEqual([c.admitted, c.counts], [false, [2, 2]]);
      await elapse(500);
      // The short window has ended: a refund gives back only to the long one, and opens nothing.
      await counters.refund(s, [short, long], 1);
      const d = await counters.hit(s, [short, long], 1);
      assert.equal(d.admitted, true, 'the short window started over');
      assert.deepEqual(d.counts, [1, 2], 'short: a new window; long: 2 - 1 refunded + 1');
      assert.equal(d.resetsInMs[0], 1000, 'the new short window was opened by this hit, not by the refund');
      assertResets(d, [1000, HOUR - 1100], 'after the window ended');
    });

    await t.test('refund gives units back to the open windows', async () => {
      const s = subject();
      const windows = [{ limit: 3, ms: MINUTE }, { limit: 10, ms: HOUR }];
      await hits(s, windows, 3);
      assert.equal((await counters.hit(s, windows, 1)).admitted, false);
      await counters.refund(s, windows, 2);
      const tallies = await hits(s, windows, 3);
      assert.deepEqual(tallies.map((x) => x.admitted), [true, true, false]);
      assert.deepEqual(tallies.map((x) => x.counts), [[2, 2], [3, 3], [3, 3]]);
    });

    await t.test('refund never takes a count below 0', async () => {
      const s = subject();
      const windows = [{ limit: 3, ms: MINUTE }];
      await hits(s, windows, 2);
      await counters.refund(s, windows, 5);
      const tallies = await hits(s, windows, 5);
      assert.deepEqual(tallies.map((x) => x.counts[0]), [1, 2, 3, 3, 3], 'from 0, not from -3');
      assert.equal(tallies.filter((x) => x.admitted).length, 3);
    });

    await t.test('a refund back to 0 leaves nothing held: a refused attempt leaves no trace', async () => {
      const s = subject();
      const windows = [{ limit: 3, ms: MINUTE }, { limit: 10, ms: HOUR }];
      const before = await held();
      await hits(s, windows, 2);
      assert.equal(await held(), before + 2, 'one entry per window');
      await counters.refund(s, windows, 1);
      assert.equal(await held(), before + 2, 'a window still counting is kept');
      await counters.refund(s, windows, 1);
      assert.equal(await held(), before, 'windows back at 0 are gone');
      const again = await counters.hit(s, windows, 1);
      assert.deepEqual([again.admitted, again.counts], [true, [1, 1]]);
      assertResets(again, [MINUTE, HOUR], 'the next hit opens new windows');
    });

    await t.test('refund on a subject never counted opens no window and leaves no credit', async () => {
      const s = subject();
      const windows = [{ limit: 2, ms: MINUTE }];
      await counters.refund(s, windows, 4);
      const tallies = await hits(s, windows, 3);
      assert.deepEqual(tallies.map((x) => x.admitted), [true, true, false]);
      assert.deepEqual(tallies[0]!.counts, [1]);
      assert.deepEqual(tallies[0]!.resetsInMs, [MINUTE], 'the window opened with the hit, not the refund');
    });

    await t.test('clear forgets the subject: its windows start over', async () => {
      const s = subject();
      const windows = [{ limit: 2, ms: MINUTE }, { limit: 3, ms: HOUR }];
      await hits(s, windows, 3);
      await counters.clear(s, windows);
      const tally = await counters.hit(s, windows, 1);
      assert.deepEqual([tally.admitted, tally.counts, tally.resetsInMs], [true, [1, 1], [MINUTE, HOUR]]);
    });

    await t.test('clear forgets only that subject', async () => {
      const s = subject();
      const other = subject();
      const windows = [{ limit: 2, ms: MINUTE }];
      await hits(s, windows, 2);
      await hits(other, windows, 2);
      await counters.clear(s, windows);
      assert.deepEqual((await counters.hit(s, windows, 1)).counts, [1]);
      const kept = await counters.hit(other, windows, 1);
      assert.deepEqual([kept.admitted, kept.counts], [false, [2]]);
    });

    await t.test('clear of a subject never counted is harmless', async () => {
      const s = subject();
      const windows = [{ limit: 2, ms: MINUTE }];
      await counters.clear(s, windows);
      assert.deepEqual((await counters.hit(s, windows, 1)).counts, [1]);
    });

    await t.test('subjects are independent, whatever characters they hold', async () => {
      const base = subject();
      const windows = [{ limit: 2, ms: MINUTE }];
      await hits(base, windows, 3);
      for (const s of [`${base}x`, `${base}:1`, `{${base}}`, `${base}|${MINUTE}`, `${MINUTE}|${base}`, base.toUpperCase()]) {
        const tally = await counters.hit(s, windows, 1);
        assert.deepEqual([tally.admitted, tally.counts], [true, [1]], `subject ${s}`);
      }
      const full = await counters.hit(base, windows, 1);
      assert.deepEqual([full.admitted, full.counts], [false, [2]]);
    });

    await t.test('windows of different lengths of one subject are independent counters', async () => {
      const s = subject();
      const minute = { limit: 2, ms: MINUTE };
      const twoMinutes = { limit: 2, ms: 2 * MINUTE };
      await hits(s, [minute], 2);
      assert.equal((await counters.hit(s, [minute], 1)).admitted, false);
      const other = await counters.hit(s, [twoMinutes], 1);
      assert.deepEqual([other.admitted, other.counts, other.resetsInMs], [true, [1], [2 * MINUTE]]);
      // And back: the minute window is still full, the two-minute one holds 1.
      const both = await counters.hit(s, [twoMinutes, minute], 1);
      assert.deepEqual([both.admitted, both.counts], [false, [1, 2]]);
    });
  });
}
