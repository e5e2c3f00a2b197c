/**
 * Ceremonies in process memory, bounded (lru-cache): a flood of started ceremonies pushes out
 * the oldest, never grows memory without end (each start is also throttled, owner/passkeys.ts).
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import { entryBound } from '../../util/lru.js';
import type { Ceremony, CeremonyStore } from './store.js';

export class MemoryCeremonyStore implements CeremonyStore {
  readonly #ceremonies: LRUCache<string, Ceremony>;
  readonly #clock: Clock;

  constructor({ clock, max = 10_000 }: { clock: Clock; max?: number }) {
    this.#clock = clock;
    this.#ceremonies = new LRUCache(entryBound(max));
  }

  async put(id: string, ceremony: Ceremony): Promise<void> {
    if (ceremony.expiresAt <= this.#clock.now()) return;
    this.#ceremonies.set(id, { ...ceremony });
  }

  async take(id: string): Promise<Ceremony | undefined> {
    const ceremony = this.#ceremonies.get(id);
    if (ceremony === undefined) return undefined;
    this.#ceremonies.delete(id);
    return ceremony.expiresAt > this.#clock.now() ? ceremony : undefined;
  }
}
