/**
 * The contract of TokenDenylist (src/state/denylist/store.ts), run once per implementation:
 * `a` and `b` are two instances' handles on one store (memory: the same object). Time is passed
 * in explicitly (`now`); a notice is waited for as the event it is, never by sleeping.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { DeniedToken, TokenDenylist } from '../../src/state/denylist/store.js';

export interface DenylistUnderTest {
  a: TokenDenylist;
  b: TokenDenylist;
  /** The bound both handles were made with. */
  maxEntries: number;
  close(): Promise<void>;
}

const MINUTE = 60_000;

const jti = () => randomBytes(16).toString('base64url');

export function runDenylistContract(name: string, make: () => Promise<DenylistUnderTest>, options: { skip?: string | false } = {}): void {
  test(`TokenDenylist contract: ${name}`, options, async (t) => {
    // Near the real clock, taken when the contract runs (not when the file was loaded, which in
    // a shared test process can be minutes earlier): a Redis store sets real TTLs from these times.
    const T0 = Date.now();
    const { a, b, maxEntries, close } = await make();
    t.after(close);
    // Every notice b hears, and the gaps; each test waits for the one it caused.
    const heard: DeniedToken[] = [];
    const waiting: { jti: string; resolve: () => void }[] = [];
    b.watch({
      onDenied(token) {
        heard.push(token);
        for (const w of waiting.filter((w) => w.jti === token.jti)) w.resolve();
      },
      onGap() {},
    });
    const heardOnB = (id: string) => heard.some((h) => h.jti === id) ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ jti: id, resolve }));

    await t.test('a token denied on one handle is listed and announced on the other', async () => {
      const id = jti();
      const notice = heardOnB(id);
      assert.equal(await a.deny({ jti: id, expiresAt: T0 + MINUTE }, T0), 'denied');
      await notice;
      assert.deepEqual(heard.find((h) => h.jti === id), { jti: id, expiresAt: T0 + MINUTE });
      assert.ok((await b.list(T0)).some((d) => d.jti === id && d.expiresAt === T0 + MINUTE));
    });

    await t.test('denied again: known, and the later expiry is kept', async () => {
      const id = jti();
      assert.equal(await a.deny({ jti: id, expiresAt: T0 + MINUTE }, T0), 'denied');
      assert.equal(await b.deny({ jti: id, expiresAt: T0 + 2 * MINUTE }, T0), 'known');
      assert.equal(await a.deny({ jti: id, expiresAt: T0 + 30_000 }, T0), 'known');
      assert.equal((await a.list(T0)).find((d) => d.jti === id)?.expiresAt, T0 + 2 * MINUTE);
    });

    await t.test('an entry is listed until its expiry, not at or after it', async () => {
      const id = jti();
      await a.deny({ jti: id, expiresAt: T0 + 5000 }, T0);
      assert.ok((await a.list(T0 + 4999)).some((d) => d.jti === id));
      assert.ok(!(await a.list(T0 + 5000)).some((d) => d.jti === id));
    });

    await t.test('bounded: past maxEntries live entries nothing is recorded; expired ones make room', async () => {
      // Whatever earlier tests left has expired by T0 + 10 minutes.
      const later = T0 + 10 * MINUTE;
      const ids = Array.from({ length: maxEntries }, jti);
      for (const id of ids) assert.equal(await a.deny({ jti: id, expiresAt: later + 1000 }, later), 'denied');
      const extra = jti();
      assert.equal(await b.deny({ jti: extra, expiresAt: later + 1000 }, later), 'full');
      assert.ok(!(await a.list(later)).some((d) => d.jti === extra), 'not recorded');
      assert.equal(await a.deny({ jti: ids[0]!, expiresAt: later + 2000 }, later), 'known', 'a known one may still move its expiry');
      assert.equal(await b.deny({ jti: extra, expiresAt: later + 5000 }, later + 1000), 'denied', 'once the others expired');
    });
  });
}
