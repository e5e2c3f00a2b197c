/**
 * Ceremonies in Redis: `<prefix>:ceremony:<id>`, a JSON string that expires at the ceremony's
 * end (PEXPIRE from this gateway's clock, as sessions do), taken with GETDEL so that only one
 * answer ever gets it, whichever instance it reaches.
 */
import { z } from 'zod';
import type { Clock } from '../../util/clock.js';
import type { RedisConnection } from '../redis/client.js';
import type { Ceremony, CeremonyStore } from './store.js';

const ceremonySchema = z.strictObject({
  kind: z.enum(['registration', 'authentication']),
  challenge: z.string().min(1).max(512),
  ownerId: z.string().max(256).optional(),
  expiresAt: z.number().int(),
});

export class RedisCeremonyStore implements CeremonyStore {
  readonly #redis: RedisConnection;
  readonly #clock: Clock;

  constructor(redis: RedisConnection, { clock }: { clock: Clock }) {
    this.#redis = redis;
    this.#clock = clock;
  }

  async put(id: string, ceremony: Ceremony): Promise<void> {
    const ttl = ceremony.expiresAt - this.#clock.now();
    if (ttl <= 0) return;
    await this.#redis.run((c) => c.set(this.#redis.keys.ceremony(id), JSON.stringify(ceremony), 'PX', ttl));
  }

  async take(id: string): Promise<Ceremony | undefined> {
    const stored = await this.#redis.run((c) => c.getdel(this.#redis.keys.ceremony(id)));
    if (stored === null) return undefined;
    const parsed = ceremonySchema.safeParse(JSON.parse(stored));
    if (!parsed.success || parsed.data.expiresAt <= this.#clock.now()) return undefined;
    const { ownerId, ...rest } = parsed.data;
    return ownerId === undefined ? rest : { ...rest, ownerId };
  }
}
