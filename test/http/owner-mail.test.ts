/**
 * Mail to owners end to end, against a gateway process with a real SMTP server (smtp-server,
 * read with mailparser): every flow is finished by following the link in its mail, as an owner
 * would. One gateway for the file (file state: the data file and the outbox file), its tests in
 * order, each starting from what the one before made:
 *
 * - an owner an operator adds gets a verification mail; its link verifies the email, once;
 * - an invite is mailed to the invitee (and still answered to the inviter), its link accepts it,
 *   and the new owner's email is verified by mail in turn;
 * - a sign-in from a new device, a key made: security notices to the right people;
 * - a reset asked for an unknown email is answered exactly as for a known one; the known one's
 *   link sets the password, ends every session, mails a notice and is audited;
 * - no token or password of any of these reaches the gateway's log.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { ParsedMail } from 'mailparser';
import { formatDataFile } from '../../src/state/data-file/writer.js';
import { call, show } from '../helpers/gateway.js';
import { startGatewayProcess, tempDir, type GatewayProcess } from '../helpers/process.js';
import { linkIn, startSmtp, type TestSmtp } from '../helpers/smtp.js';

const ADMIN = `gwadm_${'M4i1T3st0'.repeat(4)}abcdefg`;
const ORIGIN = 'http://gateway.test';
const ACCOUNT = 'acct_mail';
const ACCOUNT_NAME = 'Mail & <Co>';

interface World {
  gw: GatewayProcess;
  smtp: TestSmtp;
  /** Every secret the tests saw: none may be in the log. */
  secrets: string[];
}

async function start(t: TestContext): Promise<World> {
  const smtp = await startSmtp(t);
  const dir = tempDir(t, 'gw-mail-');
  const file = join(dir, 'data.json');
  writeFileSync(file, formatDataFile({ accounts: [], owners: [] }));
  const gw = await startGatewayProcess(t, {
    GATEWAY_DATA_FILE: file,
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([`sha256:${createHash('sha256').update(ADMIN).digest('hex')}`]),
    OWNER_PUBLIC_ORIGIN: ORIGIN,
    SMTP_URL: smtp.url,
    MAIL_FROM: 'Acme API <noreply@gateway.test>',
    MAIL_PRODUCT_NAME: 'Acme API',
    MAIL_OUTBOX_FILE: join(dir, 'outbox.json'),
  });
  return { gw, smtp, secrets: [] };
}

function api(gw: GatewayProcess, path: string, { method = 'GET', json, headers = {} }: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) {
  return call(`${gw.url}/owner/v1${path}`, { method, headers: { ...(json === undefined ? {} : { 'content-type': 'application/json' }), ...headers }, ...(json === undefined ? {} : { body: JSON.stringify(json) }) });
}

const operator = { authorization: `Bearer ${ADMIN}` };
const to = (address: string) => (mail: ParsedMail) => mail.to !== undefined && !Array.isArray(mail.to) && mail.to.value[0]?.address === address;
const about = (address: string, words: string) => (mail: ParsedMail) => to(address)(mail) && (mail.subject ?? '').includes(words);

/** The link's token, after checking the link points at the public origin. */
function tokenOf(mail: ParsedMail, path: string, prefix: string): string {
  const link = linkIn(mail, path);
  assert.equal(link.origin, ORIGIN, 'mailed links point at owner.publicOrigin');
  const token = link.hash.slice(1);
  assert.ok(token.startsWith(prefix), `a ${prefix} token in the fragment: ${link.href}`);
  assert.equal(link.search, '', 'the token is in the fragment only');
  return token;
}

async function signIn(gw: GatewayProcess, email: string, password: string, device?: string) {
  const res = await api(gw, '/session', { method: 'POST', json: { email, password }, headers: device === undefined ? {} : { cookie: device } });
  assert.equal(res.status, 200, show(res));
  const cookies = res.headers.getSetCookie();
  const session = cookies.map((c) => /^(gw_session=[^;]+)/.exec(c)?.[1]).find((c) => c !== undefined)!;
  const deviceCookie = cookies.map((c) => /^(gw_device=[^;]+)/.exec(c)?.[1]).find((c) => c !== undefined)!;
  return { read: { cookie: session }, write: { cookie: session, 'x-csrf-token': res.body.message.csrfToken as string }, device: deviceCookie };
}

test('mail to owners, each flow finished from its mail', async (t) => {
  const w = await start(t);
  const { gw, smtp, secrets } = w;
  const alicePassword = 'alice-initial-password-1';
  const bobPassword = 'bob-chosen-password-0001';
  secrets.push(alicePassword, bobPassword);

  await t.test('an owner an operator adds is sent a verification mail; its link verifies the email, once', async () => {
    assert.equal((await api(gw, '/accounts', { method: 'POST', json: { id: ACCOUNT, name: ACCOUNT_NAME }, headers: operator })).status, 201);
    const added = await api(gw, `/accounts/${ACCOUNT}/owners`, { method: 'POST', json: { email: 'alice@example.com', initialPassword: alicePassword }, headers: operator });
    assert.equal(added.status, 201, show(added));
    const mail = await smtp.nextMail(about('alice@example.com', 'confirm your email'));
    assert.equal(mail.subject, 'Acme API: confirm your email address');
    assert.equal(mail.from?.value[0]?.address, 'noreply@gateway.test');
    assert.match(mail.html || '', /Acme API/);
    const token = tokenOf(mail, '/owner/verify-email', 'gwver_');
    secrets.push(token);
    // The link's page, followed as a browser would: to the dashboard's page, the fragment kept by the browser.
    const page = await fetch(`${gw.url}/owner/verify-email`, { redirect: 'manual' });
    assert.equal(page.status, 303);
    assert.equal(page.headers.get('location'), '/dashboard/verify-email');
    const verified = await api(gw, '/email-verification', { method: 'POST', json: { token } });
    assert.equal(verified.status, 200, show(verified));
    assert.match(verified.body.message.emailVerifiedAt, /^\d{4}-/);
    const again = await api(gw, '/email-verification', { method: 'POST', json: { token } });
    assert.equal(again.status, 404, 'a verification link works once');
    const audit = await api(gw, `/accounts/${ACCOUNT}/audit`, { headers: operator });
    assert.ok(audit.body.message.items.some((e: { action: string }) => e.action === 'owner.email_verify'), show(audit));
  });

  await t.test('an invite is mailed to the invitee; its link accepts it, and the new owner verifies by mail too', async () => {
    const made = await api(gw, `/accounts/${ACCOUNT}/invites`, { method: 'POST', json: { email: 'bob@example.com' }, headers: operator });
    assert.equal(made.status, 201, show(made));
    secrets.push(made.body.message.token);
    const mail = await smtp.nextMail(about('bob@example.com', 'invited'));
    const token = tokenOf(mail, '/owner/invite', 'gwinv_');
    assert.equal(token, made.body.message.token, 'the inviter is answered the token the mail carries');
    // The account's name is interpolated: escaped in the HTML part, as written in the text.
    assert.ok((mail.html || '').includes('Mail &amp; &lt;Co&gt;'), mail.html || '');
    assert.ok(!(mail.html || '').includes('<Co>'));
    assert.ok((mail.text ?? '').includes(`"${ACCOUNT_NAME}"`));
    const accepted = await api(gw, '/invites/accept', { method: 'POST', json: { token, password: bobPassword } });
    assert.equal(accepted.status, 200, show(accepted));
    const verify = await smtp.nextMail(about('bob@example.com', 'confirm your email'));
    const verifyToken = tokenOf(verify, '/owner/verify-email', 'gwver_');
    secrets.push(verifyToken);
    assert.equal((await api(gw, '/email-verification', { method: 'POST', json: { token: verifyToken } })).status, 200);
  });

  let bob: Awaited<ReturnType<typeof signIn>>;
  await t.test('a sign-in from a new device and a key made are noticed by mail: the owner, then every owner of the account', async () => {
    bob = await signIn(gw, 'bob@example.com', bobPassword);
    const session = await api(gw, '/session', { headers: bob.read });
    assert.match(session.body.message.owner.emailVerifiedAt, /^\d{4}-/, 'the session tells the email is verified');
    const device = await smtp.nextMail(about('bob@example.com', 'security notice'));
    assert.match(device.text ?? '', /not seen before/);
    // The same browser again (its device cookie): no notice. The key's notice comes next.
    bob = await signIn(gw, 'bob@example.com', bobPassword, bob.device);
    const key = await api(gw, `/accounts/${ACCOUNT}/keys`, { method: 'POST', json: { name: 'ci' }, headers: bob.write });
    assert.equal(key.status, 201, show(key));
    for (const owner of ['alice@example.com', 'bob@example.com']) {
      const notice = await smtp.nextMail(about(owner, 'security notice'));
      assert.match(notice.text ?? '', /An API key was created \(account "Mail & <Co>"\)/);
    }
    assert.equal(smtp.mails.filter(about('bob@example.com', 'security notice')).length, 2, 'one device notice, one key notice');
  });

  await t.test('a webhook endpoint added is noticed by mail to every owner of the account', async () => {
    // Disabled: nothing is sent to it, the notice is about where events would go.
    const made = await api(gw, `/accounts/${ACCOUNT}/webhooks`, { method: 'POST', json: { url: 'https://hooks.example.com/in', enabled: false }, headers: bob.write });
    assert.equal(made.status, 201, show(made));
    secrets.push(made.body.message.secret);
    for (const owner of ['alice@example.com', 'bob@example.com']) {
      const notice = await smtp.nextMail(about(owner, 'security notice'));
      assert.match(notice.text ?? '', /A webhook endpoint was added: the account's owner events are sent to it \(account "Mail & <Co>"\)/);
    }
  });

  await t.test('a reset for an unknown email is answered exactly as one for a known email; the known one\'s link resets', async () => {
    const unknown = await api(gw, '/password-reset', { method: 'POST', json: { email: 'nobody@example.com' } });
    const known = await api(gw, '/password-reset', { method: 'POST', json: { email: 'BOB@example.com' } });
    assert.equal(known.status, 202, show(known));
    assert.deepEqual([unknown.status, unknown.body], [known.status, known.body]);
    const headers = (res: typeof known) => [...res.headers].filter(([name]) => !['date', 'x-request-id', 'ratelimit', 'ratelimit-policy'].includes(name));
    assert.deepEqual(headers(unknown), headers(known));
    const mail = await smtp.nextMail(about('bob@example.com', 'reset your password'));
    const token = tokenOf(mail, '/owner/reset-password', 'gwrst_');
    const newPassword = 'bob-new-password-after-reset';
    secrets.push(token, newPassword);
    const done = await api(gw, '/password-reset/complete', { method: 'POST', json: { token, password: newPassword } });
    assert.equal(done.status, 200, show(done));
    assert.equal((await api(gw, '/session', { headers: bob.read })).status, 401, 'every session of the owner ended');
    assert.equal((await api(gw, '/password-reset/complete', { method: 'POST', json: { token, password: 'another-password-again-1' } })).status, 404, 'a reset link works once');
    const notice = await smtp.nextMail(about('bob@example.com', 'security notice'));
    assert.match(notice.text ?? '', /Your password was reset by mail/);
    await signIn(gw, 'bob@example.com', newPassword, bob.device);
    const audit = await api(gw, `/accounts/${ACCOUNT}/audit`, { headers: operator });
    assert.ok(audit.body.message.items.some((e: { action: string }) => e.action === 'owner.password_reset'), show(audit));
    assert.equal(smtp.mails.filter(to('nobody@example.com')).length, 0);
  });

  await t.test('no token or password of these flows reaches the log', () => {
    const log = gw.child.stdout() + gw.child.stderr();
    assert.match(log, /mail sent/, 'the log tells of the mails');
    for (const secret of secrets) assert.ok(!log.includes(secret), `a secret in the log: ${secret.slice(0, 8)}…`);
  });
});
