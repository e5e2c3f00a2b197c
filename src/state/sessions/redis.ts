/**
 * Owner sessions in Redis, whenever Redis is configured: every instance knows every session,
 * and a restart signs no one out. A session is a hash, `<prefix>:sess:<digest>`, that expires
 * by itself at its idle or absolute end, whichever is sooner; each owner has a set of their
 * session digests, `<prefix>:owner-sess:<ownerId>`, for ending them all at once.
 *
 * TTLs are set relative (PEXPIRE), from the deadlines and this gateway's clock, which made
 * them: a Redis whose clock disagrees still ends a session when the gateway says so. `find`
 * also compares the deadlines with the clock, so a session never outlives them by Redis's
 * expiry granularity. On a Cluster the session and its owner's set lie in different slots:
 * the session is written first, so the set never misses a live session (the set may name
 * ended ones, which are skipped and pruned when it is used).
 *
 * The set is also the owner's index for listing their sessions and for the per-owner cap: a
 * `create` with `maxPerOwner` that finds the set fuller than that reads the owner's sessions
 * (one HGETALL each: bounded by the cap and the pruning) and ends the oldest by createdAt. Two
 * sign-ins of one owner at once may each end one: the cap holds, at the cost of a session.
 */
import { ID_PATTERN } from '../../domain/formats.js';
import type { Clock } from '../../util/clock.js';
import type { RedisConnection } from '../redis/client.js';
import type { OwnerSession, SessionStore, StoredSession } from './store.js';

/** Digests an owner's set may hold before a sign-in prunes the ended ones. */
const PRUNE_ABOVE = 16;

export class RedisSessionStore implements SessionStore {
  readonly #redis: RedisConnection;
  readonly #clock: Clock;

  constructor(redis: RedisConnection, { clock }: { clock: Clock }) {
    this.#redis = redis;
    this.#clock = clock;
  }

  async create(digest: string, session: OwnerSession, { maxPerOwner }: { maxPerOwner?: number } = {}): Promise<StoredSession[]> {
    const k = this.#redis.keys;
    const now = this.#clock.now();
    const ttl = Math.min(session.idleExpiresAt, session.expiresAt) - now;
    if (ttl <= 0) return [];
    const fields: Record<string, string> = {
      ownerId: session.ownerId,
      csrfToken: session.csrfToken,
      createdAt: String(session.createdAt),
      expiresAt: String(session.expiresAt),
      idleExpiresAt: String(Math.min(session.idleExpiresAt, session.expiresAt)),
      ...(session.lastSeenAt === undefined ? {} : { lastSeenAt: String(session.lastSeenAt) }),
      ...(session.ip === undefined ? {} : { ip: session.ip }),
      ...(session.userAgent === undefined ? {} : { userAgent: session.userAgent }),
    };
    await this.#redis.run(async (c) => {
      const results = await c.multi().hset(k.session(digest), fields).pexpire(k.session(digest), ttl).exec();
      const failed = results?.find(([err]) => err !== null);
      if (results === null || failed !== undefined) throw failed?.[0] ?? new Error('transaction aborted');
    });
    const held = await this.#redis.run((c) => c.gwSessionLink(k.ownerSessions(session.ownerId), digest, Math.max(1, session.expiresAt - now)));
    if (maxPerOwner !== undefined && held > maxPerOwner) return this.#endOldest(session.ownerId, digest, maxPerOwner);
    // Housekeeping: a failure leaves the ended digests for the next sign-in, and fails no sign-in.
    if (held > PRUNE_ABOVE) await this.#prune(session.ownerId, digest).catch(() => {});
    return [];
  }

  /** The owner's live sessions, newest first; ended digests found on the way leave the set. */
  async #readOwner(ownerId: string): Promise<StoredSession[]> {
    const k = this.#redis.keys;
    const digests = await this.#redis.run((c) => c.smembers(k.ownerSessions(ownerId)));
    const read = await Promise.all(digests.map(async (digest) => ({ digest, session: await this.find(digest) })));
    const ended = read.filter((r) => r.session === undefined).map((r) => r.digest);
    // Housekeeping: a failure leaves them for the next read.
    if (ended.length > 0) await this.#redis.run((c) => c.srem(k.ownerSessions(ownerId), ...ended)).catch(() => {});
    const live = read.filter((r): r is StoredSession => r.session !== undefined && r.session.ownerId === ownerId);
    return live.sort((a, b) => b.session.createdAt - a.session.createdAt || (a.digest < b.digest ? -1 : 1));
  }

  /** Ends the owner's oldest sessions past `max`, never `keep` (the one just made); answers them. */
  async #endOldest(ownerId: string, keep: string, max: number): Promise<StoredSession[]> {
    const live = await this.#readOwner(ownerId);
    const others = live.filter((s) => s.digest !== keep);
    const evicted = others.slice(Math.max(0, max - 1));
    if (evicted.length === 0) return [];
    const k = this.#redis.keys;
    await Promise.all(evicted.map(({ digest }) => this.#redis.run((c) => c.del(k.session(digest)))));
    await this.#redis.run((c) => c.srem(k.ownerSessions(ownerId), ...evicted.map((s) => s.digest)));
    return evicted;
  }

  async listOwnerSessions(ownerId: string): Promise<StoredSession[]> {
    return this.#readOwner(ownerId);
  }

  /**
   * Drops the digests of ended sessions from the owner's set: each sign-in extends the set's
   * TTL, so an owner who signs in often would keep every ended session's digest in it for ever.
   * One EXISTS per digest (on a Cluster they lie in different slots), only past PRUNE_ABOVE.
   */
  async #prune(ownerId: string, keep: string): Promise<void> {
    const k = this.#redis.keys;
    const digests = (await this.#redis.run((c) => c.smembers(k.ownerSessions(ownerId)))).filter((d) => d !== keep);
    const exists = await Promise.all(digests.map((d) => this.#redis.run((c) => c.exists(k.session(d)))));
    const ended = digests.filter((_, i) => exists[i] === 0);
    if (ended.length > 0) await this.#redis.run((c) => c.srem(k.ownerSessions(ownerId), ...ended));
  }

  async find(digest: string): Promise<OwnerSession | undefined> {
    const session = toSession(await this.#redis.run((c) => c.hgetall(this.#redis.keys.session(digest))));
    if (session === undefined) return undefined;
    const now = this.#clock.now();
    return now >= session.idleExpiresAt || now >= session.expiresAt ? undefined : session;
  }

  async touch(digest: string, idleExpiresAt: number): Promise<void> {
    await this.#redis.run((c) => c.gwSessionTouch(this.#redis.keys.session(digest), idleExpiresAt, this.#clock.now()));
  }

  async delete(digest: string): Promise<void> {
    // The owner's set keeps the digest until it is next used: it names a session that is gone.
    await this.#redis.run((c) => c.del(this.#redis.keys.session(digest)));
  }

  async deleteOwnerSessions(ownerId: string, keep?: string): Promise<void> {
    const k = this.#redis.keys;
    const digests = await this.#redis.run((c) => c.smembers(k.ownerSessions(ownerId)));
    const ending = digests.filter((d) => d !== keep);
    if (ending.length === 0) return;
    // One command per session: on a Cluster they lie in different slots.
    await Promise.all(ending.map((d) => this.#redis.run((c) => c.del(k.session(d)))));
    await this.#redis.run((c) => c.srem(k.ownerSessions(ownerId), ...ending));
  }
}

/** A stored session, or undefined when a field is missing or malformed (never trusted half-written). */
function toSession(fields: Record<string, string>): OwnerSession | undefined {
  const { ownerId, csrfToken, createdAt, expiresAt, idleExpiresAt, lastSeenAt, ip, userAgent } = fields;
  if (ownerId === undefined || !ID_PATTERN.test(ownerId) || csrfToken === undefined || csrfToken === '') return undefined;
  const times = [createdAt, expiresAt, idleExpiresAt].map(toTime);
  if (times.some((t) => t === undefined)) return undefined;
  const [created, expires, idle] = times as number[];
  const seen = toTime(lastSeenAt);
  return {
    ownerId, csrfToken, createdAt: created!, expiresAt: expires!, idleExpiresAt: idle!,
    // Sessions stored before these were kept have none of them.
    ...(seen === undefined ? {} : { lastSeenAt: seen }),
    ...(ip === undefined ? {} : { ip }),
    ...(userAgent === undefined ? {} : { userAgent }),
  };
}

function toTime(t: string | undefined): number | undefined {
  return t !== undefined && /^[0-9]{1,16}$/.test(t) ? Number(t) : undefined;
}
