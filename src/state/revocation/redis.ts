/**
 * Token resets in Redis: one hash per account (`account` and `key:<keyId>` fields, epoch ms),
 * written by a Lua script that also announces the reset on a pub/sub channel, so every
 * instance hears of it at once. The refresh-token rotate script reads the same hash.
 *
 * The epoch record (`<prefix>:epoch`, state/revocation/store.ts) is read, or made when missing, on
 * every (re)connection and every `checkEveryMs` while watched: a Redis restarted empty is seen
 * on the reconnection, a FLUSHALL or an eviction within `checkEveryMs`. test/redis/data-loss.test.ts
 * holds it.
 */
import type { Logger } from '../../telemetry/log.js';
import { systemClock, type Clock } from '../../util/clock.js';
import type { RedisConnection } from '../redis/client.js';
import type { AccountResets, ResetScope, RevocationListener, RevocationStore } from './store.js';

export class RedisRevocationStore implements RevocationStore {
  readonly #redis: RedisConnection;
  readonly #retainMs: number;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #checkEveryMs: number;
  readonly #listeners: RevocationListener[] = [];
  #subscribed = false;
  /** The epoch this handle last read; undefined until the first read. */
  #startedAt: number | undefined;
  #reading: Promise<number> | undefined;
  /** The record's last value that was not a time, once reported. */
  #unreadable: string | undefined;

  /**
   * `retainMs`: how long a reset must be kept, the longest any token issued before it can live.
   * `checkEveryMs`: how often the epoch record is read again while watched.
   */
  constructor(redis: RedisConnection, { retainMs, log, clock = systemClock, checkEveryMs = 1000 }: { retainMs: number; log: Logger; clock?: Clock; checkEveryMs?: number }) {
    this.#redis = redis;
    this.#retainMs = retainMs;
    this.#log = log;
    this.#clock = clock;
    this.#checkEveryMs = checkEveryMs;
  }

  epoch(): Promise<number> {
    // One read at a time: a reconnection, the timer and the first token may all ask at once.
    this.#reading ??= this.#readEpoch().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  async #readEpoch(): Promise<number> {
    const [value, made] = await this.#redis.run((c) => c.gwEpoch(this.#redis.keys.epoch, this.#clock.now()));
    const startedAt = Number(value);
    // Something else wrote there: no start can be trusted, so nothing is refused for it (as
    // while Redis is unreadable), and the operator is told, once per value (this runs each second).
    if (!Number.isSafeInteger(startedAt)) {
      if (value !== this.#unreadable) {
        this.#unreadable = value;
        this.#log.warn({ key: this.#redis.keys.epoch }, 'the epoch record does not hold a time: ignored until it is deleted (an instance reading it then makes a new one); tokens are checked against the resets alone');
      }
      throw new Error('the epoch record does not hold a time');
    }
    this.#unreadable = undefined;
    const known = this.#startedAt;
    if (startedAt === known) return startedAt;
    this.#startedAt = startedAt;
    if (known !== undefined) {
      this.#log.warn({ previousEpoch: known, epoch: startedAt }, 'redis lost the gateway\'s data (its epoch record was gone or replaced): access tokens issued before the new epoch are refused');
    } else if (made === 1) {
      this.#log.warn({ epoch: startedAt }, 'redis held no epoch record: started a new epoch (expected on the first start of a new deployment; otherwise Redis lost its data, and access tokens issued before it are refused)');
    }
    for (const l of this.#listeners) l.onEpoch(startedAt);
    return startedAt;
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

  watch(listener: RevocationListener): void {
    this.#listeners.push(listener);
    if (this.#subscribed) return;
    this.#subscribed = true;
    this.#redis.keepChecking(this.#checkEveryMs, () => this.epoch());
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
