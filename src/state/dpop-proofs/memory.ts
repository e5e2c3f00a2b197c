/**
 * Proofs seen, in process memory, for a gateway that runs alone. remember() does not await
 * between its look-up and its write, so it is atomic as the contract requires. Bounded by count
 * (lru-cache `max`): a flood of fresh proofs makes the oldest be forgotten before their window
 * ends, which docs/dpop.md states (Redis keeps every one).
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import type { DpopProofStore } from './store.js';

export class MemoryDpopProofStore implements DpopProofStore {
  readonly #seen: LRUCache<string, true>;

  constructor({ clock, maxEntries }: { clock: Clock; maxEntries: number }) {
    // ttlResolution 0: read the injected clock on every check.
    this.#seen = new LRUCache({ max: maxEntries, ttl: 1, perf: { now: () => clock.now() }, ttlResolution: 0, ttlAutopurge: false, updateAgeOnGet: false });
  }

  async remember(id: string, expiresAt: number, now: number): Promise<boolean> {
    if (this.#seen.has(id)) return false;
    this.#seen.set(id, true, { ttl: Math.max(1, expiresAt - now) });
    return true;
  }
}
