/**
 * Owner sessions in process memory: a restart signs every owner out (docs/owner.md). Bounded
 * (lru-cache), so a flood of sign-ins cannot grow memory without end; the oldest sessions go
 * first. Entries expire by themselves at their idle or absolute deadline.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import { entryBound } from '../../util/lru.js';
import type { OwnerSession, SessionStore } from './store.js';

export class MemorySessionStore implements SessionStore {
  readonly #sessions: LRUCache<string, OwnerSession>;
  readonly #clock: Clock;

  constructor({ clock, max = 100_000 }: { clock: Clock; max?: number }) {
    this.#clock = clock;
    // Bounded by entry count without allocating every slot up front (util/lru.ts).
    this.#sessions = new LRUCache(entryBound(max));
  }

  async create(digest: string, session: OwnerSession): Promise<void> {
    this.#sessions.set(digest, { ...session });
  }

  async find(digest: string): Promise<OwnerSession | undefined> {
    const session = this.#sessions.get(digest);
    if (session === undefined) return undefined;
    const now = this.#clock.now();
    if (now >= session.idleExpiresAt || now >= session.expiresAt) {
      this.#sessions.delete(digest);
      return undefined;
    }
    return { ...session };
  }

  async touch(digest: string, idleExpiresAt: number): Promise<void> {
    const session = this.#sessions.get(digest);
    if (session === undefined) return;
    // Ended already (as Redis has let its key expire): a touch does not revive it.
    if (this.#clock.now() >= Math.min(session.idleExpiresAt, session.expiresAt)) {
      this.#sessions.delete(digest);
      return;
    }
    session.idleExpiresAt = Math.min(idleExpiresAt, session.expiresAt);
  }

  async delete(digest: string): Promise<void> {
    this.#sessions.delete(digest);
  }

  async deleteOwnerSessions(ownerId: string, keep?: string): Promise<void> {
    for (const [digest, session] of this.#sessions.entries()) {
      if (session.ownerId === ownerId && digest !== keep) this.#sessions.delete(digest);
    }
  }
}
