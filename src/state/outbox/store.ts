/**
 * The mail outbox: mails the gateway owes someone (invites, verification, password resets,
 * security notices), kept in the state store until an SMTP server has taken them, so that a
 * restart or a second instance loses none and sends none twice. Memory (tests), a file of its own
 * beside the data file on a gateway alone (`mail.outboxFile`), Redis whenever Redis is configured.
 * One contract: test/contracts/outbox.contract.ts.
 *
 * A sender claims due mails for a lease: no other claim gets them until the lease ends (a sender
 * that died mid-send: its mails come due again then). What it claimed it settles with `sent`
 * (gone for good) or `retry` (due again at the time given, one attempt more). A settle whose
 * claim is no longer the mail's current one (the lease ended and another claim took the mail)
 * changes nothing.
 *
 * A queued mail holds its whole text, links included (a reset link's token is in it): it lives
 * only until sent, and the outbox is kept as the rest of the owner data is (file mode 0600).
 */

/** A mail as queued: what the sender needs, rendered. */
export interface NewMail {
  /** "mail_" and random characters: the same id names the mail in every log line and audit event. */
  id: string;
  /** One address. */
  to: string;
  subject: string;
  text: string;
  html: string;
  /** What kind of message (invite, verify_email, password_reset, notice): a metric label and a log field, never a secret. */
  kind: string;
  /** The account whose audit trail records a final failure, if any. */
  accountId?: string;
  /** Without `accountId`: the owner whose accounts' audit trails record a final failure. */
  ownerId?: string;
  /** Epoch ms. */
  createdAt: number;
}

export interface QueuedMail extends NewMail {
  /** Sending attempts that failed so far. */
  attempts: number;
}

export interface ClaimedMail extends QueuedMail {
  /** This claim's token: `sent` and `retry` take effect only while it is the mail's current claim. */
  claim: string;
}

/**
 * What any durable queue of this shape holds (the outbox's mails, the webhooks' deliveries,
 * state/webhooks/): an id and when it was queued; the rest is the item's own, kept as JSON.
 */
export interface QueueItem {
  id: string;
  /** Epoch ms: due at once. */
  createdAt: number;
}

export type Queued<N extends QueueItem> = N & { attempts: number };
export type Claimed<N extends QueueItem> = Queued<N> & { claim: string };

/** The outbox's contract for any item: the same claims, leases and settling. */
export interface QueueStore<N extends QueueItem> {
  enqueue(items: readonly N[], max: number): Promise<boolean>;
  claim(now: number, leaseMs: number, limit: number): Promise<Claimed<N>[]>;
  sent(item: Claimed<N>): Promise<void>;
  retry(item: Claimed<N>, dueAt: number): Promise<void>;
  size(): Promise<number>;
}

export interface OutboxStore {
  /**
   * Queues the mails, all or none: false (nothing queued) when they would take the outbox past
   * `max` mails. Each is due at once.
   */
  enqueue(mails: readonly NewMail[], max: number): Promise<boolean>;
  /** Up to `limit` mails due at `now`, oldest due first, each held for `leaseMs` by this claim. */
  claim(now: number, leaseMs: number, limit: number): Promise<ClaimedMail[]>;
  /** The mail was taken by the SMTP server (or given up): it leaves the outbox. */
  sent(mail: ClaimedMail): Promise<void>;
  /** The attempt failed: due again at `dueAt` with one attempt more. */
  retry(mail: ClaimedMail, dueAt: number): Promise<void>;
  /** How many mails are queued (claimed ones included). */
  size(): Promise<number>;
}
