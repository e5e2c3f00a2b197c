/**
 * The outbox in this process's memory: the tests' store, and what the file outbox (file.ts)
 * keeps between writes. One process only: its claims are its own.
 */
import { randomBytes } from 'node:crypto';
import type { Claimed, NewMail, Queued, QueueItem, QueueStore } from './store.js';

/** A mail (or any queued item) as this store holds it. */
export interface HeldMail<N extends QueueItem = NewMail> {
  mail: Queued<N>;
  /** When it is due (or, while claimed, when its lease ends). */
  dueAt: number;
  claim?: string;
}

export class MemoryOutbox<N extends QueueItem = NewMail> implements QueueStore<N> {
  protected readonly held = new Map<string, HeldMail<N>>();

  constructor(initial: readonly HeldMail<N>[] = []) {
    for (const entry of initial) this.held.set(entry.mail.id, { mail: entry.mail, dueAt: entry.dueAt });
  }

  async enqueue(mails: readonly N[], max: number): Promise<boolean> {
    const fresh = mails.filter((m) => !this.held.has(m.id));
    if (this.held.size + fresh.length > max) return false;
    for (const mail of fresh) this.held.set(mail.id, { mail: { ...mail, attempts: 0 }, dueAt: mail.createdAt });
    await this.changed();
    return true;
  }

  async claim(now: number, leaseMs: number, limit: number): Promise<Claimed<N>[]> {
    const due = [...this.held.values()].filter((h) => h.dueAt <= now).sort((a, b) => a.dueAt - b.dueAt).slice(0, limit);
    const claimed = due.map((h) => {
      h.claim = randomBytes(12).toString('hex');
      h.dueAt = now + leaseMs;
      return { ...h.mail, claim: h.claim };
    });
    if (claimed.length > 0) await this.changed();
    return claimed;
  }

  async sent(mail: Claimed<N>): Promise<void> {
    if (this.held.get(mail.id)?.claim !== mail.claim) return;
    this.held.delete(mail.id);
    await this.changed();
  }

  async retry(mail: Claimed<N>, dueAt: number): Promise<void> {
    const h = this.held.get(mail.id);
    if (h?.claim !== mail.claim) return;
    this.held.set(mail.id, { mail: { ...h.mail, attempts: h.mail.attempts + 1 }, dueAt });
    await this.changed();
  }

  async size(): Promise<number> {
    return this.held.size;
  }

  /** After each change: the file outbox writes itself out here. */
  protected async changed(): Promise<void> {}
}
