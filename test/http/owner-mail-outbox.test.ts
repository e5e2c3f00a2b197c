/**
 * The mail outbox's promises, on in-process gateways with a manual clock (no test waits for
 * time): a refusing SMTP server makes retries with backoff, counted in /metrics and audited,
 * until the mail is given up; a mail queued before a restart is sent by the gateway after it
 * (file state); two gateways on one Redis send each mail once; reset requests are throttled per
 * email (answered alike, nothing sent) and per address (429), and none of it counts against
 * sign-in; and without SMTP_URL nothing of it happens. The senders' own timers are stopped:
 * each test runs the rounds itself.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { ParsedMail } from 'mailparser';
import { retryDelayMs } from '../../src/owner/mail.js';
import { ManualClock } from '../helpers/clock.js';
import { show, type TestGateway } from '../helpers/gateway.js';
import { anonymous, operator, startOwnerGateway } from '../helpers/owner.js';
import { redisSuite, startRedis } from '../helpers/redis.js';
import { linkIn, startSmtp, type TestSmtp } from '../helpers/smtp.js';

const ORIGIN = 'http://gateway.test';

function dataDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-outbox-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(resolve('config/demo-data.json'), join(dir, 'data.json'));
  return dir;
}

async function mailGateway(t: TestContext, smtp: TestSmtp, { dir, clock = new ManualClock(), extra = {} }: { dir: string; clock?: ManualClock; extra?: Record<string, unknown> }): Promise<TestGateway> {
  const gw = await startOwnerGateway(t, {
    clock,
    overrides: {
      owner: { publicOrigin: ORIGIN },
      data: { file: join(dir, 'data.json') },
      mail: { smtpUrl: smtp.url, from: 'noreply@gateway.test', outboxFile: join(dir, 'outbox.json'), maxAttempts: 3 },
      ...extra,
    },
  });
  await gw.services.mailSender!.stop();
  return gw;
}

async function invite(gw: TestGateway, accountId: string, email: string): Promise<string> {
  const res = await operator(gw).send('POST', `/accounts/${accountId}/invites`, { email });
  assert.equal(res.status, 201, show(res));
  return res.body.message.token as string;
}

async function account(gw: TestGateway, id: string): Promise<void> {
  const res = await operator(gw).send('POST', '/accounts', { id, name: id });
  assert.equal(res.status, 201, show(res));
}

function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(name));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const inviteFor = (address: string) => (mail: ParsedMail) => !Array.isArray(mail.to) && mail.to?.value[0]?.address === address;

test('a refusing SMTP server: retries with backoff on the clock, then given up; counted in /metrics, audited', async (t) => {
  const smtp = await startSmtp(t);
  const clock = new ManualClock();
  const gw = await mailGateway(t, smtp, { dir: dataDir(t), clock });
  const sender = gw.services.mailSender!;
  await account(gw, 'acct_refused');
  smtp.refusing = true;
  await invite(gw, 'acct_refused', 'late@example.com');

  assert.equal(await sender.runOnce(), 1);
  assert.equal(smtp.refused, 1);
  let scraped = await gw.services.metrics.scrape();
  assert.equal(metric(scraped, 'gateway_mail_sent_total{result="retry"}'), 1);
  assert.equal(metric(scraped, 'gateway_mail_outbox_size'), 1);
  // Not due before its backoff, due at it: 30 s, then twice that.
  clock.advance(retryDelayMs(1) - 1);
  assert.equal(await sender.runOnce(), 0);
  clock.advance(1);
  assert.equal(await sender.runOnce(), 1);
  assert.equal(smtp.refused, 2);
  clock.advance(retryDelayMs(2) - 1);
  assert.equal(await sender.runOnce(), 0);
  clock.advance(1);
  assert.equal(await sender.runOnce(), 1);
  assert.equal(smtp.refused, 3);

  scraped = await gw.services.metrics.scrape();
  assert.equal(metric(scraped, 'gateway_mail_sent_total{result="retry"}'), 2);
  assert.equal(metric(scraped, 'gateway_mail_sent_total{result="failed"}'), 1);
  assert.equal(metric(scraped, 'gateway_mail_outbox_size'), 0, 'given up after mail.maxAttempts: out of the outbox');
  const audit = await operator(gw).get('/accounts/acct_refused/audit');
  const actions = audit.body.message.items.map((e: { action: string }) => e.action);
  assert.ok(actions.includes('mail.delay') && actions.includes('mail.fail'), show(audit));
  const failed = audit.body.message.items.find((e: { action: string }) => e.action === 'mail.fail');
  assert.deepEqual([failed.actor.type, failed.target.type], ['system', 'mail']);
  clock.advance(24 * 3_600_000);
  assert.equal(await sender.runOnce(), 0, 'nothing is tried again');
});

test('a mail queued before a restart is sent by the gateway after it (file state)', async (t) => {
  const smtp = await startSmtp(t);
  const dir = dataDir(t);
  const first = await mailGateway(t, smtp, { dir });
  await account(first, 'acct_restart');
  const token = await invite(first, 'acct_restart', 'later@example.com');
  await first.close();
  assert.equal(smtp.mails.length, 0, 'nothing was sent before the restart');

  const second = await mailGateway(t, smtp, { dir });
  assert.equal(await second.services.mailSender!.runOnce(), 1);
  const mail = await smtp.nextMail(inviteFor('later@example.com'));
  assert.equal(linkIn(mail, '/owner/invite').hash, `#${token}`);
  assert.equal(await second.services.mailSender!.runOnce(), 0, 'sent once');
});

test('two gateways on one Redis send each mail once', redisSuite(), async (t) => {
  const smtp = await startSmtp(t);
  const redis = await startRedis(t);
  const shared = { redis: { url: redis.url, keyPrefix: 'mail2' }, data: { keySource: 'redis' } };
  const a = await mailGateway(t, smtp, { dir: dataDir(t), extra: shared });
  const b = await mailGateway(t, smtp, { dir: dataDir(t), extra: shared });
  await account(a, 'acct_shared');
  const emails = Array.from({ length: 8 }, (_, i) => `person${i}@example.com`);
  for (const [i, email] of emails.entries()) await invite(i % 2 === 0 ? a : b, 'acct_shared', email);
  // Both at once: each claim is atomic in Redis, so between them they claim each mail once.
  const claimed = await Promise.all([a.services.mailSender!.runOnce(), b.services.mailSender!.runOnce()]);
  assert.equal(claimed.reduce((x, y) => x + y, 0), 8);
  for (const email of emails) await smtp.nextMail(inviteFor(email));
  assert.equal(smtp.mails.length, 8, 'each mail once');
  const sent = metric(await a.services.metrics.scrape(), 'gateway_mail_sent_total{result="sent"}') + metric(await b.services.metrics.scrape(), 'gateway_mail_sent_total{result="sent"}');
  assert.equal(sent, 8);
});

/** Runs the outbox's rounds until `count` mails were sent in all (requests queue their mail after their answer). */
async function untilSent(gw: TestGateway, count: number): Promise<void> {
  const sent = async () => metric(await gw.services.metrics.scrape(), 'gateway_mail_sent_total{result="sent"}');
  while (await sent() < count) {
    await gw.services.mailSender!.runOnce();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test('reset requests: per email nothing more is sent (same answer) but to the owner\'s own browser, per address 429; sign-in is not counted', async (t) => {
  const smtp = await startSmtp(t);
  const gw = await mailGateway(t, smtp, {
    dir: dataDir(t),
    extra: { limits: { mode: 'enforce', ownerMail: { perEmail: [{ limit: 2, seconds: 900 }], perAddress: [{ limit: 6, seconds: 600 }] } } },
  });
  const alice = { email: 'alice@demo.example', password: 'alice demo passphrase' };
  const first = await anonymous(gw).send('POST', '/session', alice);
  assert.equal(first.status, 200, show(first));
  const device = first.headers.getSetCookie().map((c) => /^(gw_device=[^;]+)/.exec(c)?.[1]).find((c) => c !== undefined)!;
  const ask = (email: string, headers: Record<string, string> = {}) => anonymous(gw).send('POST', '/password-reset', { email }, headers);
  const resetMails = () => smtp.mails.filter((m) => (m.subject ?? '').includes('reset your password')).length;
  const answers = [];
  for (let i = 0; i < 3; i++) answers.push(await ask(alice.email));
  assert.deepEqual(answers.map((r) => [r.status, r.body]), Array(3).fill([202, { success: true, message: { accepted: true } }]), 'past the email\'s share: the same answer');
  await untilSent(gw, 3);
  assert.equal(await gw.services.mailSender!.runOnce(), 0);
  assert.equal(resetMails(), 2, 'two reset mails for two requests within the email\'s share, none for the third');
  // The owner's own browser: strangers who spent the email's share keep no one from their reset.
  assert.equal((await ask(alice.email, { cookie: device })).status, 202);
  await untilSent(gw, 4);
  assert.equal(resetMails(), 3);
  await ask('other@example.com');
  await ask('other@example.com');
  const limited = await ask('third@example.com');
  assert.equal(limited.status, 429, show(limited));
  const complete = await anonymous(gw).send('POST', '/password-reset/complete', { token: `gwrst_${'a'.repeat(43)}.own_x`, password: 'whatever-password-123' });
  assert.equal(complete.status, 429, 'completions count per address too');
  // None of it is a failed sign-in: the owner signs in from the same address, without the device cookie too.
  const signedIn = await anonymous(gw).send('POST', '/session', alice);
  assert.equal(signedIn.status, 200, show(signedIn));
});

test('without SMTP_URL: said once at start-up, nothing queued, the flows answer as ever', async (t) => {
  const gw = await startOwnerGateway(t);
  assert.equal(gw.logs.filter((line) => line.includes('mail is off (no SMTP_URL)')).length, 1);
  assert.equal(gw.services.mailSender, undefined);
  await account(gw, 'acct_nomail');
  assert.match(await invite(gw, 'acct_nomail', 'x@example.com'), /^gwinv_/, 'the inviter still gets the link');
  const res = await anonymous(gw).send('POST', '/password-reset', { email: 'alice@demo.example' });
  assert.deepEqual([res.status, res.body], [202, { success: true, message: { accepted: true } }]);
});
