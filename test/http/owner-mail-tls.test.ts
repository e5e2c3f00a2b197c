/**
 * The SMTP URL's two ways to TLS, against gateway processes (the test's CA trusted through
 * NODE_EXTRA_CA_CERTS, as an operator with a private CA would): `smtp://` upgraded by STARTTLS
 * (`?requireTLS=true`: a server that did not offer it would be refused) and `smtps://`, TLS from
 * the first byte. Each sends an invite; the SMTP server saw it over TLS, after the login the
 * URL carries.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { formatDataFile } from '../../src/state/data-file/writer.js';
import { call, show } from '../helpers/gateway.js';
import { startGatewayProcess, tempDir } from '../helpers/process.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';
import { makeTestCa } from '../helpers/tls.js';

const ADMIN = `gwadm_${'T1sM4iL0x'.repeat(4)}abcdefg`;
const ca = makeTestCa();
const leaf = ca.leaf('smtp', ['127.0.0.1']);
const tls = { key: readFileSync(leaf.keyFile), cert: readFileSync(leaf.certFile) };

async function inviteThrough(t: TestContext, smtp: TestSmtp, smtpUrl: string): Promise<void> {
  const dir = tempDir(t, 'gw-mail-tls-');
  const file = join(dir, 'data.json');
  writeFileSync(file, formatDataFile({ accounts: [], owners: [] }));
  const gw = await startGatewayProcess(t, {
    GATEWAY_DATA_FILE: file,
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([`sha256:${createHash('sha256').update(ADMIN).digest('hex')}`]),
    OWNER_PUBLIC_ORIGIN: 'https://gw.example.com',
    SMTP_URL: smtpUrl,
    MAIL_FROM: 'noreply@gw.example.com',
    MAIL_OUTBOX_FILE: join(dir, 'outbox.json'),
    NODE_EXTRA_CA_CERTS: ca.caFile,
  });
  const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
  assert.equal((await call(`${gw.url}/owner/v1/accounts`, { method: 'POST', headers, body: JSON.stringify({ id: 'acct_tls', name: 'TLS' }) })).status, 201);
  const made = await call(`${gw.url}/owner/v1/accounts/acct_tls/invites`, { method: 'POST', headers, body: JSON.stringify({ email: 'tls@example.com' }) });
  assert.equal(made.status, 201, show(made));
  const mail = await smtp.nextMail((m) => (m.subject ?? '').includes('invited'));
  assert.ok((mail.text ?? '').includes(made.body.message.token));
  assert.deepEqual(smtp.secured, [true], 'taken over TLS');
}

test('smtp:// upgraded by STARTTLS, with the login of the URL', async (t) => {
  const smtp = await startSmtp(t, { tls: { mode: 'starttls', ...tls } });
  await inviteThrough(t, smtp, `${smtp.url}?requireTLS=true`);
});

test('smtps://: TLS from the first byte', async (t) => {
  const smtp = await startSmtp(t, { tls: { mode: 'implicit', ...tls } });
  assert.match(smtp.url, /^smtps:/);
  await inviteThrough(t, smtp, smtp.url);
});
