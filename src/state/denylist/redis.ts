/**
 * The access-token deny list in Redis, shared by every instance: one sorted set (`<prefix>:denied`,
 * jti scored by its expiry), written by one Lua script that drops the expired entries, checks
 * the bound, adds the token and announces it on a pub/sub channel, so every instance hears of
 * it at once. An instance reads the whole set when it starts and after every gap in the notices.
 * One key, so one Cluster slot: the set is bounded (`maxEntries`), and read whole anyway.
 */
import type { Logger } from '../../telemetry/log.js';
import type { RedisConnection } from '../redis/client.js';
import type { DeniedToken, DenyOutcome, DenylistListener, TokenDenylist } from './store.js';

const OUTCOMES: Record<number, DenyOutcome> = { 0: 'full', 1: 'denied', 2: 'known' };

export class RedisTokenDenylist implements TokenDenylist {
  readonly #redis: RedisConnection;
  readonly #maxEntries: number;
  readonly #log: Logger;
  readonly #listeners: DenylistListener[] = [];
  #subscribed = false;

  constructor(redis: RedisConnection, { maxEntries, log }: { maxEntries: number; log: Logger }) {
    this.#redis = redis;
    this.#maxEntries = maxEntries;
    this.#log = log;
  }

  async deny({ jti, expiresAt }: DeniedToken, now: number): Promise<DenyOutcome> {
    const k = this.#redis.keys;
    const notice = JSON.stringify({ jti, expiresAt });
    const outcome = await this.#redis.run((c) => c.gwDenyToken(k.deniedTokens, jti, expiresAt, now, this.#maxEntries, k.deniedChannel, notice));
    return OUTCOMES[outcome] ?? 'full';
  }

  async list(now: number): Promise<DeniedToken[]> {
    const flat = await this.#redis.run((c) => c.zrangebyscore(this.#redis.keys.deniedTokens, `(${now}`, '+inf', 'WITHSCORES'));
    const tokens: DeniedToken[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const expiresAt = Number(flat[i + 1]);
      if (Number.isSafeInteger(expiresAt)) tokens.push({ jti: flat[i]!, expiresAt });
    }
    return tokens;
  }

  watch(listener: DenylistListener): void {
    this.#listeners.push(listener);
    if (this.#subscribed) return;
    this.#subscribed = true;
    // The gap is reported once Redis confirms each (re)subscription: the list is read again then.
    this.#redis.subscribe(this.#redis.keys.deniedChannel, (message) => this.#hear(message), () => {
      for (const l of this.#listeners) l.onGap();
    });
  }

  #hear(message: string): void {
    let notice: { jti?: unknown; expiresAt?: unknown };
    try {
      notice = JSON.parse(message);
    } catch {
      notice = {};
    }
    const { jti, expiresAt } = notice;
    if (typeof jti !== 'string' || typeof expiresAt !== 'number') {
      this.#log.warn('ignored a malformed notice on the denied-tokens channel');
      for (const l of this.#listeners) l.onGap();
      return;
    }
    for (const l of this.#listeners) l.onDenied({ jti, expiresAt });
  }
}
