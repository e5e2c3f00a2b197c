/**
 * The outbox in Redis, shared by every instance: a hash of the mails, a sorted set of when each
 * is due, a hash of each mail's current claim, all under one hash tag (`{mail}`), so each of the
 * three scripts (redis/scripts.ts OUTBOX_*) runs on one Cluster node and is atomic across
 * instances: two instances claiming at once never get the same mail, and a mail is sent once
 * unless its sender outlives its lease (the lease is longer than the SMTP timeouts, owner/mail.ts).
 */
import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '../redis/client.js';
import type { ClaimedMail, NewMail, OutboxStore, QueuedMail } from './store.js';

export class RedisOutbox implements OutboxStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  get #keys(): [string, string, string] {
    const k = this.#redis.keys;
    return [k.outboxMails, k.outboxDue, k.outboxClaims];
  }

  async enqueue(mails: readonly NewMail[], max: number): Promise<boolean> {
    if (mails.length === 0) return true;
    const [m, due] = this.#keys;
    const args = mails.flatMap((mail) => [mail.id, JSON.stringify({ ...mail, attempts: 0 } satisfies QueuedMail), mail.createdAt]);
    return (await this.#redis.run((c) => c.gwOutboxEnqueue(m, due, max, ...args))) === 1;
  }

  async claim(now: number, leaseMs: number, limit: number): Promise<ClaimedMail[]> {
    const out = await this.#redis.run((c) => c.gwOutboxClaim(...this.#keys, now, now + leaseMs, limit, randomBytes(12).toString('hex')));
    const claimed: ClaimedMail[] = [];
    for (let i = 0; i + 1 < out.length; i += 2) claimed.push({ ...(JSON.parse(out[i]!) as QueuedMail), claim: out[i + 1]! });
    return claimed;
  }

  async sent(mail: ClaimedMail): Promise<void> {
    await this.#redis.run((c) => c.gwOutboxSettle(...this.#keys, mail.id, mail.claim, '', 0));
  }

  async retry(mail: ClaimedMail, dueAt: number): Promise<void> {
    const { claim: _claim, ...queued } = mail;
    const again: QueuedMail = { ...queued, attempts: mail.attempts + 1 };
    await this.#redis.run((c) => c.gwOutboxSettle(...this.#keys, mail.id, mail.claim, JSON.stringify(again), dueAt));
  }

  async size(): Promise<number> {
    return this.#redis.run((c) => c.hlen(this.#redis.keys.outboxMails));
  }
}
