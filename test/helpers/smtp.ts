/**
 * A real SMTP server for the mail tests (`smtp-server`) on an ephemeral port of 127.0.0.1,
 * with a user and password the gateway's SMTP_URL carries; every message it takes is read with
 * `mailparser` and kept. While `refusing`, it answers every message 451 (a temporary failure,
 * as a full or greylisting server would), and counts the refusals. Tests wait for the exact
 * message (`nextMail`), never for time.
 */
import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface TestSmtp {
  /** smtp://user:password@127.0.0.1:<port> */
  url: string;
  /** Every message taken, in order. */
  readonly mails: ParsedMail[];
  /** For each message taken, whether its connection was TLS (STARTTLS or implicit). */
  readonly secured: boolean[];
  /** Messages refused while `refusing`. */
  readonly refused: number;
  refusing: boolean;
  /** The first message taken (already or later) that `match` accepts and no earlier call returned. */
  nextMail(match: (mail: ParsedMail) => boolean, limitMs?: number): Promise<ParsedMail>;
  /** Resolves once `count` messages have been refused in all. */
  refusals(count: number, limitMs?: number): Promise<void>;
}

const USER = 'gateway';
const PASSWORD = 'smtp-test-password-1';

/**
 * `tls`: the server's certificate, offered by STARTTLS (`starttls`) or from the first byte
 * (`implicit`, smtps); without it the server is plain and offers no STARTTLS.
 */
export async function startSmtp(t: TestContext, { tls }: { tls?: { mode: 'starttls' | 'implicit'; key: Buffer; cert: Buffer } } = {}): Promise<TestSmtp> {
  const events = new EventEmitter();
  const mails: ParsedMail[] = [];
  const secured: boolean[] = [];
  const handed = new Set<ParsedMail>();
  let refused = 0;
  const state = { refusing: false };
  const server = new SMTPServer({
    // Plain SMTP with AUTH on loopback unless `tls` is given: offered, nodemailer uses STARTTLS.
    ...(tls === undefined ? { hideSTARTTLS: true } : { key: tls.key, cert: tls.cert, secure: tls.mode === 'implicit' }),
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === USER && auth.password === PASSWORD) callback(null, { user: USER });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      if (state.refusing) {
        stream.resume();
        stream.on('end', () => {
          refused += 1;
          events.emit('refused');
          callback(Object.assign(new Error('Mailbox busy, try again later'), { responseCode: 451 }));
        });
        return;
      }
      simpleParser(stream).then((mail) => {
        mails.push(mail);
        secured.push(session.secure === true);
        events.emit('mail');
        callback();
      }, (err: Error) => callback(err));
    },
  });
  server.listen(0, '127.0.0.1');
  await once(server.server, 'listening');
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.server.address() as AddressInfo;

  async function until(check: () => boolean, event: string, what: string, limitMs: number): Promise<void> {
    const deadline = setTimeout(() => events.emit('timeout'), limitMs);
    try {
      while (!check()) {
        const [why] = await Promise.race([once(events, event).then(() => ['event']), once(events, 'timeout').then(() => ['timeout'])]);
        if (why === 'timeout') assert.fail(`no ${what} within ${limitMs} ms (taken: ${mails.map((m) => m.subject).join(' | ')})`);
      }
    } finally {
      clearTimeout(deadline);
    }
  }

  return {
    url: `${tls?.mode === 'implicit' ? 'smtps' : 'smtp'}://${USER}:${PASSWORD}@127.0.0.1:${port}`,
    mails,
    secured,
    get refused() { return refused; },
    get refusing() { return state.refusing; },
    set refusing(value: boolean) { state.refusing = value; },
    async nextMail(match, limitMs = 20_000) {
      const pick = () => mails.find((m) => !handed.has(m) && match(m));
      await until(() => pick() !== undefined, 'mail', 'matching mail', limitMs);
      const mail = pick()!;
      handed.add(mail);
      return mail;
    },
    refusals: (count, limitMs = 20_000) => until(() => refused >= count, 'refused', `${count} refusals`, limitMs),
  };
}

/** The one link of a mail's text whose path is `path`, with its fragment. */
export function linkIn(mail: ParsedMail, path: string): URL {
  const found = (mail.text ?? '').match(/https?:\/\/\S+/g)?.map((s) => new URL(s)).find((u) => u.pathname === path);
  assert.ok(found, `a link to ${path} in: ${mail.text}`);
  return found;
}
