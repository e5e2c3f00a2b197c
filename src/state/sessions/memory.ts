/**
 * Owner sessions in process memory: a restart signs every owner out (docs/owner.md). Bounded
 * (lru-cache), so a flood of sign-ins cannot grow memory without end; the oldest sessions go
 * first. Entries expire by themselves at their idle or absolute deadline.
 *
 * Each owner's sessions are also indexed by owner, in the order they were made, so that listing
 * and ending them reads only that owner's, and so that `create` with `maxPerOwner` ends the
 * owner's own oldest session: one owner's flood of valid sign-ins then holds at most that many
 * entries and cannot push other owners' sessions out of the shared bound (the cache is sized
 * for many owners at their cap). test/state/sessions.test.ts holds it.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import { entryBound } from '../../util/lru.js';
import type { OwnerSession, SessionStore, StoredSession } from './store.js';

export class MemorySessionStore implements SessionStore {
  readonly #sessions: LRUCache<string, OwnerSession>;
  /** Owner id → their session digests, oldest first (a Set keeps insertion order). */
  readonly #byOwner = new Map<string, Set<string>>();
  readonly #clock: Clock;

  constructor({ clock, max = 100_000 }: { clock: Clock; max?: number }) {
    this.#clock = clock;
    // Bounded by entry count without allocating every slot up front (util/lru.ts); whatever
    // leaves the cache (evicted, expired, deleted) leaves its owner's index with it.
    this.#sessions = new LRUCache({ ...entryBound(max), dispose: (session, digest) => this.#unindex(session.ownerId, digest) });
  }

  #unindex(ownerId: string, digest: string): void {
    const digests = this.#byOwner.get(ownerId);
    if (digests === undefined) return;
    digests.delete(digest);
    if (digests.size === 0) this.#byOwner.delete(ownerId);
  }

  #live(digest: string): OwnerSession | undefined {
    const session = this.#sessions.get(digest, { updateAgeOnGet: false });
    if (session === undefined) return undefined;
    const now = this.#clock.now();
    if (now >= session.idleExpiresAt || now >= session.expiresAt) {
      this.#sessions.delete(digest);
      return undefined;
    }
    return session;
  }

  async create(digest: string, session: OwnerSession, { maxPerOwner }: { maxPerOwner?: number } = {}): Promise<StoredSession[]> {
    this.#sessions.set(digest, { ...session });
    let digests = this.#byOwner.get(session.ownerId);
    if (digests === undefined) this.#byOwner.set(session.ownerId, (digests = new Set()));
    digests.add(digest);
    const evicted: StoredSession[] = [];
    if (maxPerOwner === undefined) return evicted;
    // Ended ones first leave the index (without counting as evicted), then the oldest live ones.
    for (const d of [...digests]) if (d !== digest) this.#live(d);
    for (const d of [...digests]) {
      if (digests.size <= maxPerOwner) break;
      if (d === digest) continue;
      const ended = this.#sessions.peek(d);
      this.#sessions.delete(d);
      if (ended !== undefined) evicted.push({ digest: d, session: { ...ended } });
    }
    return evicted;
  }

  async listOwnerSessions(ownerId: string): Promise<StoredSession[]> {
    const found: StoredSession[] = [];
    for (const digest of [...(this.#byOwner.get(ownerId) ?? [])]) {
      const session = this.#live(digest);
      if (session !== undefined) found.push({ digest, session: { ...session } });
    }
    return found.reverse();
  }

  async find(digest: string): Promise<OwnerSession | undefined> {
    const session = this.#live(digest);
    return session === undefined ? undefined : { ...session };
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
    session.lastSeenAt = this.#clock.now();
  }

  async delete(digest: string): Promise<void> {
    this.#sessions.delete(digest);
  }

  async deleteOwnerSessions(ownerId: string, keep?: string): Promise<void> {
    for (const digest of [...(this.#byOwner.get(ownerId) ?? [])]) {
      if (digest !== keep) this.#sessions.delete(digest);
    }
  }
}
