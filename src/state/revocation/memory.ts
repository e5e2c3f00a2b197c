/**
 * Token resets in process memory, for a gateway that runs alone: listeners are called at once.
 * An entry is kept as long as any token issued before it can live (`retainMs`), then dropped.
 *
 * Its epoch begins when it is made, at the process's start: a restart forgets every reset,
 * while access tokens signed with a configured key outlive it, so every token issued before
 * the start is refused (a reset survives the restart, as it does on Redis). Their refresh
 * tokens were in memory too and are gone: clients sign in again either way, at the first call
 * instead of the first refresh.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import { NO_RESETS, type AccountResets, type ResetScope, type RevocationListener, type RevocationStore } from './store.js';
import { entryBound } from '../../util/lru.js';

export class MemoryRevocationStore implements RevocationStore {
  readonly #resets: LRUCache<string, { account?: number; keys: Map<string, number> }>;
  readonly #listeners: RevocationListener[] = [];
  readonly #retainMs: number;
  readonly #clock: Clock;
  readonly #startedAt: number;

  constructor({ clock, retainMs }: { clock: Clock; retainMs: number }) {
    this.#clock = clock;
    this.#retainMs = retainMs;
    this.#startedAt = clock.now();
    // Bounded by the number of accounts in the data file; `max` only guards the worst case.
    this.#resets = new LRUCache({ ...entryBound(1_000_000), ttl: retainMs, perf: { now: () => clock.now() }, ttlResolution: 0, ttlAutopurge: false });
  }

  async reset(scope: ResetScope, at: number): Promise<void> {
    const entry = this.#resets.get(scope.accountId) ?? { keys: new Map<string, number>() };
    if (scope.keyId === undefined) entry.account = Math.max(entry.account ?? 0, at);
    else entry.keys.set(scope.keyId, Math.max(entry.keys.get(scope.keyId) ?? 0, at));
    // Kept until the latest of its resets no longer matters: an earlier reset never shortens it.
    const remaining = this.#resets.has(scope.accountId) ? this.#resets.getRemainingTTL(scope.accountId) : 0;
    this.#resets.set(scope.accountId, entry, { ttl: Math.max(1, remaining, at + this.#retainMs - this.#clock.now()) });
    for (const listener of this.#listeners) listener.onReset(scope, at);
  }

  async read(accountId: string): Promise<AccountResets> {
    const entry = this.#resets.get(accountId);
    return entry === undefined ? NO_RESETS : { account: entry.account, keys: new Map(entry.keys) };
  }

  /** For the memory token store, which checks resets inside its own synchronous rotate. */
  readNow(accountId: string): AccountResets {
    return this.#resets.get(accountId) ?? NO_RESETS;
  }

  async epoch(): Promise<number> {
    return this.#startedAt;
  }

  watch(listener: RevocationListener): void {
    this.#listeners.push(listener);
  }
}
