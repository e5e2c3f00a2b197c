/**
 * Token resets in Redis: one hash per account (`account` and `key:<keyId>` fields, epoch ms),
 * written by a Lua script that also announces the reset on a pub/sub channel, so every
 * instance hears of it at once. The refresh-token rotate script reads the same hash.
 */
import type { Logger } from '../telemetry/log.js';
import type { RedisConnection } from './redis/client.js';
import type { AccountResets, ResetListener, ResetScope, RevocationStore } from './revocation.js';

export class RedisRevocationStore implements RevocationStore {
  readonly #redis: RedisConnection;
  readonly #retainMs: number;
  readonly #log: Logger;
  readonly #listeners: ResetListener[] = [];
  #subscribed = false;

  /** `retainMs`: how long a reset must be kept, the longest any token issued before it can live. */
  constructor(redis: RedisConnection, { retainMs, log }: { retainMs: number; log: Logger }) {
    this.#redis = redis;
    this.#retainMs = retainMs;
    this.#log = log;
  }

  async reset(scope: ResetScope, at: number): Promise<void> {
    const field = scope.keyId === undefined ? 'account' : `key:${scope.keyId}`;
    const notice = JSON.stringify({ accountId: scope.accountId, keyId: scope.keyId ?? null, at });
    const k = this.#redis.keys;
    await this.#redis.run((c) => c.gwReset(k.resets(scope.accountId), field, at, this.#retainMs, k.resetChannel, notice));
  }

  async read(accountId: string): Promise<AccountResets> {
    const fields = await this.#redis.run((c) => c.hgetall(this.#redis.keys.resets(accountId)));
    const resets: { account?: number; keys: Map<string, number> } = { keys: new Map() };
    for (const [field, value] of Object.entries(fields)) {
      const at = Number(value);
      if (!Number.isSafeInteger(at)) continue;
      if (field === 'account') resets.account = at;
      else if (field.startsWith('key:')) resets.keys.set(field.slice(4), at);
    }
    return resets;
  }

  watch(listener: ResetListener): void {
    this.#listeners.push(listener);
    if (this.#subscribed) return;
    this.#subscribed = true;
    this.#redis.subscribe(this.#redis.keys.resetChannel, (message) => this.#hear(message), () => {
      for (const l of this.#listeners) l.onGap();
    });
  }

  #hear(message: string): void {
    let notice: { accountId?: unknown; keyId?: unknown; at?: unknown };
    try {
      notice = JSON.parse(message);
    } catch {
      notice = {};
    }
    const { accountId, keyId, at } = notice;
    if (typeof accountId !== 'string' || (keyId !== null && typeof keyId !== 'string') || typeof at !== 'number') {
      this.#log.warn('ignored a malformed notice on the reset channel');
      // Something else wrote there: what we cached may be stale.
      for (const l of this.#listeners) l.onGap();
      return;
    }
    const scope: ResetScope = keyId === null ? { accountId } : { accountId, keyId };
    for (const l of this.#listeners) l.onReset(scope, at);
  }
}
