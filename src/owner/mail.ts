/**
 * Mail to owners: queued in the outbox (state/outbox/) by the change that causes it, sent by a
 * loop on every instance through nodemailer. The loop claims due mails for a lease (so two
 * instances never send one mail both), sends each, and settles it: sent, or due again after a
 * backoff (30 s, doubled per failure, at most an hour), or given up after `mail.maxAttempts`,
 * which is counted (gateway_mail_sent_total{result="failed"}), logged and audited (`mail.fail`)
 * in the account the mail was about. The first failure of a mail is audited too (`mail.delay`),
 * so an owner sees a stuck mail before it is given up.
 *
 * What it refuses: a mail's text never reaches a log line (it may hold a one-time link); a
 * full outbox drops the mail, never the change that caused it (the change is made and audited,
 * the drop is logged and counted). Without `mail.smtpUrl` there is no Mail at all (services.ts
 * logs so once) and owner code sends nothing. test/http/owner-mail.test.ts holds it against a
 * real SMTP server; test/http/owner-mail-outbox.test.ts the backoff on a manual clock, a restart
 * and two instances.
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { AuditEvent } from '../state/owners/records.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { ClaimedMail, NewMail, OutboxStore } from '../state/outbox/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Scheduler, Timer } from '../util/clock.js';
import { logEvents } from './audit.js';

/** A mail to queue: rendered (owner/mail-templates.ts), addressed, and said what it is about. */
export type MailDraft = Omit<NewMail, 'id' | 'createdAt'>;

/** What owner code sends mail through. */
export interface Mail {
  /** Where links in mails point (owner.publicOrigin). */
  readonly origin: string;
  readonly productName: string;
  /** Queues the drafts and wakes the sender; never throws (a failure is logged and counted as dropped). */
  queue(drafts: readonly MailDraft[]): Promise<void>;
}

/** Hands one mail to the SMTP server; throws when it was not taken. */
export type SendMail = (mail: { from: string; to: string; subject: string; text: string; html: string }) => Promise<void>;

export interface MailSender {
  /** Claims and sends what is due now; answers how many were claimed. Tests call it on a manual clock. */
  runOnce(): Promise<number>;
  /** Starts the loop: now, every POLL_MS, and whenever this instance queues a mail. */
  start(): void;
  /** Stops the loop and waits for a round under way. */
  stop(): Promise<void>;
}

/** How often each instance looks for due mail (another instance's, a retry's). */
const POLL_MS = 5_000;
/** A claim holds its mails this long: well past the SMTP timeouts below, so no live send outlasts it. */
const LEASE_MS = 5 * 60_000;
/** Mails one round claims at most. */
const CLAIM_LIMIT = 20;
const SMTP_TIMEOUT_MS = 30_000;
const FIRST_RETRY_MS = 30_000;
const LONGEST_RETRY_MS = 3_600_000;

/** The wait before the next attempt, after `failures` failed ones (1 or more). */
export function retryDelayMs(failures: number): number {
  return Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.max(0, failures - 1));
}

/** nodemailer over `mail.smtpUrl`: smtp:// upgrades with STARTTLS when offered, smtps:// is TLS from the start. */
export function smtpSender(smtpUrl: string): SendMail {
  // nodemailer is loaded with the first mail (about 50 ms of CPU a start would pay for nothing
  // until then), and its transport made once.
  let transport: Promise<{ sendMail(mail: Parameters<SendMail>[0]): Promise<unknown> }> | undefined;
  return async (mail) => {
    transport ??= import('nodemailer').then(({ createTransport }) => createTransport({ url: smtpUrl, connectionTimeout: SMTP_TIMEOUT_MS, greetingTimeout: SMTP_TIMEOUT_MS, socketTimeout: SMTP_TIMEOUT_MS }));
    await (await transport).sendMail(mail);
  };
}

export interface MailDeps {
  /** `mail.*`, with the sender and the origin links point at (config/schema.ts requires both with `mail.smtpUrl`). */
  config: Config['mail'] & { from: string; origin: string };
  outbox: OutboxStore;
  send: SendMail;
  clock: Scheduler;
  log: Logger;
  metrics: Pick<Metrics, 'mailSent' | 'watchOutbox'>;
  /** Where final failures are audited. */
  store: OwnerStore;
}

export function createMail(deps: MailDeps): { mail: Mail; sender: MailSender } {
  const { config, outbox, clock, log, metrics } = deps;
  metrics.watchOutbox(() => outbox.size());
  const sender = createSender(deps);
  const mail: Mail = {
    origin: config.origin,
    productName: config.productName,
    async queue(drafts) {
      if (drafts.length === 0) return;
      const now = clock.now();
      const mails = drafts.map((d): NewMail => ({ ...d, id: `mail_${randomBytes(9).toString('base64url')}`, createdAt: now }));
      try {
        if (!(await outbox.enqueue(mails, config.outboxMaxMails))) {
          mails.forEach(() => metrics.mailSent('dropped'));
          log.error({ mails: mails.map(({ id, kind }) => ({ id, kind })) }, 'mail outbox full (mail.outboxMaxMails): mail dropped');
          return;
        }
      } catch (err) {
        mails.forEach(() => metrics.mailSent('dropped'));
        log.error({ err, mails: mails.map(({ id, kind }) => ({ id, kind })) }, 'mail could not be queued: dropped');
        return;
      }
      sender.wake();
    },
  };
  return { mail, sender };
}

/** One mail's attempt: sent, or tried again after a backoff, or given up; counted, logged, and audited where it failed. */
function createAttempt({ config, outbox, send, clock, log, metrics, store }: MailDeps): (mail: ClaimedMail) => Promise<void> {
  /** The system's own event (owner/audit.ts makes an owner's or an operator's), in the account(s) the mail was about. */
  async function audit(mail: ClaimedMail, action: 'mail.fail' | 'mail.delay'): Promise<void> {
    const now = clock.now();
    const event: AuditEvent = {
      id: `evt_${String(now).padStart(13, '0')}_${randomBytes(6).toString('hex')}`,
      at: new Date(now).toISOString(),
      action,
      actor: { type: 'system' },
      target: { type: 'mail', id: mail.id },
    };
    const accounts = mail.accountId !== undefined ? [mail.accountId] : mail.ownerId !== undefined ? await store.accountsOf(mail.ownerId) : [];
    for (const accountId of accounts) {
      await store.appendAudit(accountId, [event]);
      logEvents(log, accountId, [event]);
    }
  }

  async function attempt(mail: ClaimedMail): Promise<void> {
    try {
      await send({ from: config.from, to: mail.to, subject: mail.subject, text: mail.text, html: mail.html });
    } catch (err) {
      const failures = mail.attempts + 1;
      const given = failures >= config.maxAttempts;
      // The server's answer names the failure; the mail itself is never logged.
      log.warn({ mailId: mail.id, kind: mail.kind, failures, err: { message: (err as Error).message, code: (err as { code?: string }).code } }, given ? 'mail given up' : 'mail failed: tried again later');
      metrics.mailSent(given ? 'failed' : 'retry');
      if (given) await outbox.sent(mail);
      else await outbox.retry(mail, clock.now() + retryDelayMs(failures));
      if (given || failures === 1) await audit(mail, given ? 'mail.fail' : 'mail.delay').catch((e: unknown) => log.warn({ err: e, mailId: mail.id }, 'mail failure could not be audited'));
      return;
    }
    metrics.mailSent('sent');
    log.info({ mailId: mail.id, kind: mail.kind }, 'mail sent');
    await outbox.sent(mail);
  }

  return attempt;
}

function createSender(deps: MailDeps): MailSender & { wake(): void } {
  const { outbox, clock, log } = deps;
  const attempt = createAttempt(deps);
  let timer: Timer | undefined;
  let running: Promise<number> | undefined;
  let again = false;
  let stopped = true;
  let stopping = false;

  async function round(): Promise<number> {
    if (stopping) return 0;
    const claimed = await outbox.claim(clock.now(), LEASE_MS, CLAIM_LIMIT);
    for (const mail of claimed) {
      // Stopping waits for one send, not a round's: the rest come due again at their lease's end.
      if (stopping) break;
      await attempt(mail);
    }
    return claimed.length;
  }

  function run(): Promise<number> {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      let total = 0;
      do {
        again = false;
        try {
          total += await round();
        } catch (err) {
          log.warn({ err }, 'mail outbox could not be read: tried again later');
        }
      } while (again && !stopping);
      return total;
    })().finally(() => {
      running = undefined;
      // A wake between the last round's end and this line found the run still set: honoured here.
      if (again && !stopping) void run();
    });
    return running;
  }

  function schedule(ms: number): void {
    timer?.cancel();
    if (stopped) return;
    timer = clock.setTimer(ms, () => {
      void run().finally(() => schedule(POLL_MS));
    });
  }

  return {
    runOnce() {
      // Asked for by name (a test after stop): the round runs whole.
      stopping = false;
      return run();
    },
    wake() {
      if (!stopped) schedule(0);
    },
    start() {
      stopped = false;
      stopping = false;
      schedule(0);
    },
    async stop() {
      stopped = true;
      stopping = true;
      timer?.cancel();
      await running;
    },
  };
}
