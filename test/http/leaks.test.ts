/**
 * POST /api/leaks/github end to end, as GitHub's secret scanning would call it: a key server the
 * test starts publishes the public keys in GitHub's format (LEAK_REPORT_KEYS_URL), and the test
 * signs each report with the private key (ECDSA P-256, SHA-256, DER, base64), as GitHub does.
 *
 * - file state, one gateway process with a real SMTP server: a report naming a live API secret,
 *   a settings token and a refresh token ends each (the key compromised and refusing sign-in
 *   until an owner rolls it, its access tokens refused; the token revoked; the family ended),
 *   answers true_positive for them and false_positive for unknown tokens, audits the URL and
 *   mails the owners; badly signed, unknown-key, malformed and oversized reports are refused
 *   and end nothing;
 * - Redis, two gateway processes: what a report to A ends is refused by B within a second.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ParsedMail } from 'mailparser';
import { formatDataFile } from '../../src/state/data-file/writer.js';
import { call, show, startGateway } from '../helpers/gateway.js';
import { api, assertAlive, makeSecrets, newAccount, refresh, report, reportOf, roles, signInWith, startKeyServer, URL_FOUND } from '../helpers/leak-reporter.js';
import { makeAdminToken } from '../helpers/owner-api.js';
import { exitWithin, startGatewayProcess, tempDir } from '../helpers/process.js';
import { startSmtp } from '../helpers/smtp.js';

test('secret-scanning reports (file state, mail)', async (t) => {
  const keys = await startKeyServer(t);
  const smtp = await startSmtp(t);
  const admin = makeAdminToken();
  const dir = tempDir(t, 'gw-leaks-');
  const file = join(dir, 'data.json');
  writeFileSync(file, formatDataFile({ accounts: [], owners: [] }));
  const gw = await startGatewayProcess(t, {
    GATEWAY_DATA_FILE: file,
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([admin.digest]),
    OWNER_PUBLIC_ORIGIN: 'http://gateway.test',
    SMTP_URL: smtp.url,
    MAIL_FROM: 'noreply@gateway.test',
    MAIL_OUTBOX_FILE: join(dir, 'outbox.json'),
    LEAK_REPORT_KEYS_URL: keys.url,
  });
  const accountId = 'acct_leaks';
  await newAccount(gw, admin.token, accountId);
  const owner = await api(gw, admin.token, `/accounts/${accountId}/owners`, { method: 'POST', json: { email: 'owner@example.com', initialPassword: 'an-initial-password-1' } });
  assert.equal(owner.status, 201, show(owner));
  const s = await makeSecrets(gw, admin.token, accountId);
  const secrets = [s.apiSecret, s.refreshToken, s.settingsToken, s.accessToken];

  await t.test('refused reports end nothing', async () => {
    const body = reportOf([{ token: s.apiSecret, type: 'gateway_api_secret' }, { token: s.settingsToken, type: 'gateway_settings_token' }]);
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const badSignature = await report(gw, body, { key: other });
    assert.equal(badSignature.status, 401, show(badSignature));
    assert.equal(badSignature.body.message.code, 'invalid_signature');
    const unknownKey = await report(gw, body, { key: keys.privateKey, keyId: 'not-a-key-of-github' });
    assert.equal(unknownKey.status, 401, show(unknownKey));
    assert.equal(unknownKey.body.message.code, 'invalid_signature');
    const fetchesAfterUnknown = keys.fetches();
    await report(gw, body, { key: keys.privateKey, keyId: 'another-made-up-key' });
    assert.equal(keys.fetches(), fetchesAfterUnknown, 'a second unknown key id within the refetch interval fetches nothing');
    const garbled = await report(gw, body, { key: keys.privateKey, signature: 'bm90IGEgc2lnbmF0dXJl' });
    assert.equal(garbled.status, 401, show(garbled));
    const unsigned = await call(`${gw.url}/api/leaks/github`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(unsigned.status, 401, show(unsigned));
    for (const malformed of ['{"token":', JSON.stringify({ token: s.apiSecret, type: 'x' }), '[]', JSON.stringify([{ token: 'x'.repeat(5000), type: 't' }]), JSON.stringify([{ type: 't' }])]) {
      const res = await report(gw, malformed, { key: keys.privateKey });
      assert.equal(res.status, 400, `${malformed.slice(0, 40)}: ${show(res)}`);
      assert.equal(res.body.message.code, 'invalid_request');
    }
    const huge = JSON.stringify([{ token: s.apiSecret, type: 'gateway_api_secret', url: URL_FOUND, source: 'x'.repeat(300_000) }]);
    const oversized = await report(gw, huge, { key: keys.privateKey });
    assert.equal(oversized.status, 413, show(oversized));
    await assertAlive(gw, s, 'after the refused reports');
  });

  await t.test('a signed report ends each live secret it names and answers GitHub\'s labels', async () => {
    const body = reportOf([
      { token: s.apiSecret, type: 'gateway_api_secret' },
      { token: s.settingsToken, type: 'gateway_settings_token' },
      { token: s.refreshToken, type: 'gateway_refresh_token' },
      { token: 'gwsk_NotASecretOfThisGatewayAtAll000000000000000', type: 'gateway_api_secret' },
      { token: 'gwst_0000000000000000000000000000000000000000000000000', type: 'gateway_settings_token' },
      { token: 'something else', type: 'gateway_refresh_token' },
    ]);
    const res = await report(gw, body, { key: keys.privateKey });
    assert.equal(res.status, 200, show(res));
    assert.deepEqual(res.body.map((v: { label: string }) => v.label), ['true_positive', 'true_positive', 'true_positive', 'false_positive', 'false_positive', 'false_positive']);
    assert.deepEqual(res.body[0], { token_raw: s.apiSecret, token_type: 'gateway_api_secret', label: 'true_positive' });

    const signIn = await signInWith(gw, s.apiKey, s.apiSecret);
    assert.equal(signIn.status, 401, `the leaked secret signs in no more: ${show(signIn)}`);
    assert.equal((await roles(gw, s.accessToken)).status, 401, 'the key\'s access tokens are reset');
    assert.equal((await roles(gw, s.settingsToken)).status, 401, 'the settings token is revoked');
    assert.equal((await refresh(gw, s.refreshToken)).status, 401, 'the refresh token\'s family is over');
    const key = await api(gw, admin.token, `/accounts/${accountId}/keys/${s.keyId}`);
    assert.match(key.body.message.compromisedAt, /^\d{4}-/, show(key));
    const token = await api(gw, admin.token, `/accounts/${accountId}/settings-tokens/${s.settingsTokenId}`);
    assert.equal(token.body.message.status, 'revoked');

    const audit = await api(gw, admin.token, `/accounts/${accountId}/audit`);
    const events = audit.body.message.items as { action: string; target: { id: string }; actor: { type: string }; changes?: Record<string, [unknown, unknown]> }[];
    const keyLeaks = events.filter((e) => e.action === 'key.leak_reported');
    assert.equal(keyLeaks.length, 2, 'the API secret and the refresh token, each on the key');
    for (const e of keyLeaks) {
      assert.equal(e.target.id, s.keyId);
      assert.equal(e.actor.type, 'system');
      assert.deepEqual(e.changes?.leakUrl, [null, URL_FOUND]);
    }
    const tokenLeak = events.find((e) => e.action === 'settings_token.leak_reported');
    assert.equal(tokenLeak?.target.id, s.settingsTokenId);
    assert.equal(tokenLeak?.changes?.leakUrl?.[1], URL_FOUND);

    const about = (words: string) => (mail: ParsedMail) => mail.to !== undefined && !Array.isArray(mail.to) && mail.to.value[0]?.address === 'owner@example.com' && (mail.text ?? '').includes(words);
    await smtp.nextMail(about('API keys (an API secret or a refresh token) found in public'));
    await smtp.nextMail(about('API settings tokens found in public'));

    const again = await report(gw, reportOf([{ token: s.apiSecret, type: 'gateway_api_secret' }]), { key: keys.privateKey });
    assert.deepEqual(again.body.map((v: { label: string }) => v.label), ['false_positive'], 'reported again: no longer a live secret, nothing more happens');
  });

  await t.test('an owner\'s roll gives the compromised key a secret again and clears the mark', async () => {
    const rolled = await api(gw, admin.token, `/accounts/${accountId}/keys/${s.keyId}/roll`, { method: 'POST', json: { overlapSeconds: 3600 } });
    assert.equal(rolled.status, 200, show(rolled));
    assert.equal(rolled.body.message.key.compromisedAt, undefined);
    assert.equal(rolled.body.message.key.previousValidUntil, undefined, 'no overlap with a compromised secret');
    secrets.push(rolled.body.message.apiSecret);
    assert.equal((await signInWith(gw, s.apiKey, rolled.body.message.apiSecret)).status, 200);
    assert.equal((await signInWith(gw, s.apiKey, s.apiSecret)).status, 401, 'the leaked one still not');
  });

  await t.test('the metrics count each token by label, and no secret reaches the log', async () => {
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(text, /gateway_leak_reports_total\{result="true_positive"\} 3/);
    assert.match(text, /gateway_leak_reports_total\{result="bad_signature"\} [1-9]/);
    const log = JSON.stringify(gw.logs());
    for (const secret of secrets) assert.ok(!log.includes(secret), 'a secret in the log');
  });
});

test('TOKEN_PREFIX: new secrets carry the deployment\'s family, old ones keep working, and reports of either are ours', async (t) => {
  const keys = await startKeyServer(t);
  const admin = makeAdminToken();
  const dir = tempDir(t, 'gw-prefix-');
  const file = join(dir, 'data.json');
  writeFileSync(file, formatDataFile({ accounts: [], owners: [] }));
  const env = { GATEWAY_DATA_FILE: file, OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([admin.digest]), LEAK_REPORT_KEYS_URL: keys.url };
  const before = await startGatewayProcess(t, env);
  await newAccount(before, admin.token, 'acct_prefix');
  const old = await makeSecrets(before, admin.token, 'acct_prefix');
  assert.match(old.apiSecret, /^gwsk_[0-9A-Za-z]{43}$/);
  assert.match(old.settingsToken, /^gwst_[0-9A-Za-z]{49}$/);
  assert.ok(before.child.process.kill('SIGTERM'));
  await exitWithin(before.child);

  const gw = await startGatewayProcess(t, { ...env, TOKEN_PREFIX: 'acme' });
  const made = await makeSecrets(gw, admin.token, 'acct_prefix');
  assert.match(made.apiKey, /^acmek_/);
  assert.match(made.apiSecret, /^acmesk_[0-9A-Za-z]{43}$/);
  assert.match(made.settingsToken, /^acmest_[0-9A-Za-z]{49}$/);
  const listed = await api(gw, admin.token, `/accounts/acct_prefix/settings-tokens/${made.settingsTokenId}`);
  assert.equal(listed.body.message.start, made.settingsToken.slice(0, 'acmest_'.length + 4));
  await assertAlive(gw, made, 'the acme family');
  // (Its access token is not: without Redis, a restart refuses the tokens of the run before.)
  assert.equal((await signInWith(gw, old.apiKey, old.apiSecret)).status, 200, 'the gw family\'s secret after the change');
  assert.equal((await roles(gw, old.settingsToken)).status, 200, 'the gw family\'s settings token after the change');
  // A report of each family is judged; another deployment's family is not ours.
  const res = await report(gw, reportOf([
    { token: made.apiSecret, type: 'gateway_api_secret' },
    { token: old.settingsToken, type: 'gateway_settings_token' },
    { token: `othersk_${'A'.repeat(43)}`, type: 'gateway_api_secret' },
  ]), { key: keys.privateKey });
  assert.deepEqual(res.body.map((v: { label: string }) => v.label), ['true_positive', 'true_positive', 'false_positive'], show(res));
  assert.equal((await signInWith(gw, made.apiKey, made.apiSecret)).status, 401);
  assert.equal((await roles(gw, old.settingsToken)).status, 401);
  assert.equal((await signInWith(gw, old.apiKey, old.apiSecret)).status, 200, 'the other key is untouched');
});

test('a key rotated at the reporter is fetched on its first report, at most once per keysMinRefetchSeconds', async (t) => {
  const keys = await startKeyServer(t);
  const gw = await startGateway(t, { overrides: { leaks: { keysUrl: keys.url, keysMinRefetchSeconds: 60 } } });
  const body = reportOf([{ token: 'nothing of ours', type: 'gateway_api_secret' }]);
  assert.equal((await report(gw, body, { key: keys.privateKey })).status, 200);
  assert.equal(keys.fetches(), 1);
  const rotated = keys.rotate('leak-test-key-2');
  const early = await report(gw, body, { key: rotated, keyId: 'leak-test-key-2' });
  assert.equal(early.status, 401, `a fetch was made just now: the new id is unknown until the interval passes: ${show(early)}`);
  assert.equal(keys.fetches(), 1);
  gw.clock.advance(60_000);
  const later = await report(gw, body, { key: rotated, keyId: 'leak-test-key-2' });
  assert.equal(later.status, 200, show(later));
  assert.equal(keys.fetches(), 2, 'one fetch for the new id');
  assert.equal((await report(gw, body, { key: keys.privateKey })).status, 401, 'the key no longer published signs nothing');
  assert.equal(keys.fetches(), 2, 'and makes no fetch within the interval');
});
