/**
 * Key records read from Redis (KEY_SOURCE=redis), kept a short while so that a sign-in or a
 * refresh costs one round trip, its token script, rather than an HGETALL of the key first.
 *
 * Every write of a key record is announced on the keys channel (key-directory.redis.ts, and
 * the owner store's projection script), so a copy is trusted only while that announcement
 * would reach it:
 *
 *   - nothing is served from here unless the channel's subscription is confirmed and its
 *     connection up (`listening`): while it is down, every lookup reads Redis;
 *   - every notice, and every gap in them (a new subscription), drops the whole cache, and a
 *     read that began before the drop answers its caller but is not kept;
 *   - a copy is served for `ttlMs` from the start of the read that made it, the bound for a
 *     writer that does not announce its writes (a hand edit in redis-cli);
 *   - a key found absent is not kept, so a key just created signs in at once; an unknown
 *     apiKey costs a read each time, as the sign-in limits allow.
 *
 * Key changes are rare next to sign-ins, so a notice drops everything rather than the records
 * it names: the cost is one more read per key in use, and no notice can be under-announced.
 * So a disabled, deleted or rolled key stops signing in as soon as the notice arrives.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../util/clock.js';
import { entryBound } from '../../util/lru.js';
import type { ApiKeyRecord } from './store.js';

export interface KeyCacheSettings {
  /** How long a copy is served without a notice; 0 keeps nothing. */
  ttlMs: number;
  maxEntries: number;
  clock: Clock;
}

interface Entry {
  record: ApiKeyRecord;
  /** When the read that made this copy began. */
  at: number;
}

interface Reading {
  generation: number;
  read: Promise<ApiKeyRecord | undefined>;
}

export class KeyRecordCache {
  readonly #ttlMs: number;
  readonly #clock: Clock;
  readonly #entries: LRUCache<string, Entry>;
  /** Reads under way, shared by the lookups of one name that come meanwhile. */
  readonly #reading = new Map<string, Reading>();
  /** +1 per notice or gap: a read that began under an older generation is not kept. */
  #generation = 0;
  #heard: { readonly listening: boolean } = { listening: false };

  constructor({ ttlMs, maxEntries, clock }: KeyCacheSettings) {
    this.#ttlMs = ttlMs;
    this.#clock = clock;
    this.#entries = new LRUCache<string, Entry>(entryBound(maxEntries));
  }

  /** Where the notices come from: copies are served only while it is listening. */
  listenTo(subscription: { readonly listening: boolean }): void {
    this.#heard = subscription;
  }

  /** After a notice or a gap: nothing kept so far is trusted. */
  drop(): void {
    this.#generation++;
    this.#entries.clear();
  }

  /** The record under `name`: a copy while it may be trusted, else what `read` answers. */
  find(name: string, read: () => Promise<ApiKeyRecord | undefined>): Promise<ApiKeyRecord | undefined> {
    if (!this.#heard.listening || this.#ttlMs === 0) return read();
    const now = this.#clock.now();
    const kept = this.#entries.get(name);
    if (kept !== undefined && now - kept.at < this.#ttlMs) return Promise.resolve(kept.record);
    const pending = this.#reading.get(name);
    if (pending !== undefined && pending.generation === this.#generation) return pending.read;

    const generation = this.#generation;
    const reading = read().then((record) => {
      if (record === undefined) return undefined;
      const frozen = freeze(record);
      if (generation === this.#generation && this.#heard.listening) this.#entries.set(name, { record: frozen, at: now });
      return frozen;
    }).finally(() => {
      if (this.#reading.get(name)?.read === reading) this.#reading.delete(name);
    });
    this.#reading.set(name, { generation, read: reading });
    return reading;
  }

  get size(): number {
    return this.#entries.size;
  }
}

/** One record goes to many callers: none may change it for the others. */
function freeze(record: ApiKeyRecord): ApiKeyRecord {
  return Object.freeze({ ...record, scopes: Object.freeze([...record.scopes]) });
}
