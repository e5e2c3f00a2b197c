/**
 * Rate counters in process memory: the store of a gateway running alone, and the fallback of
 * limits whose Redis fails. Bounded: at most `maxEntries` windows are kept, least recently used
 * first out, so an attacker rotating addresses cannot grow it. Dropping a window forgets its
 * count; the windows dropped are the ones nobody touched for longest, never one being hammered.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import { entryBound } from '../../util/lru.js';
import type { CounterWindow, RateCounters, Tally } from './store.js';

interface Slot {
  count: number;
  endsAt: number;
}

export class MemoryRateCounters implements RateCounters {
  readonly #slots: LRUCache<string, Slot>;
  readonly #clock: Clock;

  constructor({ clock, maxEntries }: { clock: Clock; maxEntries: number }) {
    this.#clock = clock;
    this.#slots = new LRUCache<string, Slot>(entryBound(maxEntries));
  }

  /** Windows currently held, for tests of the bound. */
  get size(): number {
    return this.#slots.size;
  }

  async hit(subject: string, windows: readonly CounterWindow[], cost: number): Promise<Tally> {
    const now = this.#clock.now();
    const slots = windows.map((w) => this.#open(subject, w, now));
    const admitted = windows.every((w, i) => slots[i]!.count + cost <= w.limit);
    if (admitted) {
      windows.forEach((w, i) => {
        const slot = slots[i]!;
        slot.count += cost;
        // A window opens on its first admitted unit, as in Redis (a refused hit opens nothing).
        if (slot.endsAt <= now) {
          slot.endsAt = now + w.ms;
          this.#slots.set(key(subject, w), slot);
        }
      });
    }
    return {
      admitted,
      counts: slots.map((s) => s.count),
      resetsInMs: slots.map((s, i) => (s.endsAt > now ? s.endsAt - now : windows[i]!.ms)),
    };
  }

  async refund(subject: string, windows: readonly CounterWindow[], cost: number): Promise<void> {
    const now = this.#clock.now();
    for (const w of windows) {
      const k = key(subject, w);
      const slot = this.#slots.get(k);
      if (slot === undefined || slot.endsAt <= now) continue;
      slot.count = Math.max(0, slot.count - cost);
      // As in Redis: a window back at 0 is forgotten, so a given-back attempt takes no entry.
      if (slot.count === 0) this.#slots.delete(k);
    }
  }

  async clear(subject: string, windows: readonly CounterWindow[]): Promise<void> {
    for (const w of windows) this.#slots.delete(key(subject, w));
  }

  /** The window's slot, or a fresh empty one (not stored until something is admitted). */
  #open(subject: string, w: CounterWindow, now: number): Slot {
    const slot = this.#slots.get(key(subject, w));
    return slot !== undefined && slot.endsAt > now ? slot : { count: 0, endsAt: 0 };
  }
}

function key(subject: string, w: CounterWindow): string {
  return `${w.ms}|${subject}`;
}
