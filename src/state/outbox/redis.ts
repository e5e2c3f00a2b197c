/**
 * The outbox in Redis, shared by every instance: a hash of the mails, a sorted set of when each
 * is due, a hash of each mail's current claim, all under one hash tag (`{mail}`), so each of the
 * three scripts (redis/scripts.ts OUTBOX_*) runs on one Cluster node and is atomic across
 * instances: two instances claiming at once never get the same mail, and a mail is sent once
 * unless its sender outlives its lease (the lease is longer than the SMTP timeouts, owner/mail.ts).
 */
import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '../redis/client.js';
import type { Claimed, NewMail, Queued, QueueItem, QueueStore } from './store.js';

export class RedisOutbox<N extends QueueItem = NewMail> implements QueueStore<N> {
  readonly #redis: RedisConnection;
  readonly #keyNames: [string, string, string];

  /** `keys`: the items, their due times, their claims, under one hash tag (the mail outbox's by default). */
  constructor(redis: RedisConnection, keys?: [string, string, string]) {
    this.#redis = redis;
    this.#keyNames = keys ?? [redis.keys.outboxMails, redis.keys.outboxDue, redis.keys.outboxClaims];
  }

  get #keys(): [string, string, string] {
    return this.#keyNames;
  }

  async enqueue(mails: readonly N[], max: number): Promise<boolean> {
    if (mails.length === 0) return true;
    const [m, due] = this.#keys;
    const args = mails.flatMap((mail) => [mail.id, JSON.stringify({ ...mail, attempts: 0 } as Queued<N>), mail.createdAt]);
    return (await this.#redis.run((c) => c.gwOutboxEnqueue(m, due, max, ...args))) === 1;
  }

  async claim(now: number, leaseMs: number, limit: number): Promise<Claimed<N>[]> {
    const out = await this.#redis.run((c) => c.gwOutboxClaim(...this.#keys, now, now + leaseMs, limit, randomBytes(12).toString('hex')));
    const claimed: Claimed<N>[] = [];
    for (let i = 0; i + 1 < out.length; i += 2) claimed.push({ ...(JSON.parse(out[i]!) as Queued<N>), claim: out[i + 1]! });
    return claimed;
  }

  async sent(mail: Claimed<N>): Promise<void> {
    await this.#redis.run((c) => c.gwOutboxSettle(...this.#keys, mail.id, mail.claim, '', 0));
  }

  async retry(mail: Claimed<N>, dueAt: number): Promise<void> {
    const { claim: _claim, ...queued } = mail;
    const again = { ...queued, attempts: mail.attempts + 1 };
    await this.#redis.run((c) => c.gwOutboxSettle(...this.#keys, mail.id, mail.claim, JSON.stringify(again), dueAt));
  }

  async size(): Promise<number> {
    return this.#redis.run((c) => c.hlen(this.#keyNames[0]));
  }
}
