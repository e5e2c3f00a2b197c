/**
 * Mail's settings as the gateway loads them: the configuration docs/mail.md shows loads, from a
 * file and from the environment, and mail without its sender or its public origin stops the
 * start naming what is missing.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/load.js';

const page = readFileSync(new URL('../../docs/mail.md', import.meta.url), 'utf8');

function problemsOf(overrides: Record<string, unknown>, env: Record<string, string> = {}): readonly string[] {
  try {
    loadConfig({ env, overrides });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

test('the configuration docs/mail.md shows loads, as a file and from the environment', () => {
  const [block] = [...page.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!) as Record<string, unknown>);
  const config = loadConfig({ env: {}, overrides: block! });
  assert.equal(config.mail.smtpUrl, 'smtp://gateway:app-password@smtp.example.com:587');
  assert.equal(config.mail.productName, 'Acme API');
  assert.equal(config.owner.publicOrigin, 'https://gw.example.com');
  const sh = /export OWNER_PUBLIC_ORIGIN=(\S+)\nexport SMTP_URL='(.*)'\nexport MAIL_FROM='(.*)'/.exec(page);
  assert.ok(sh !== null, 'the environment example');
  const fromEnv = loadConfig({ env: { OWNER_PUBLIC_ORIGIN: sh[1]!, SMTP_URL: sh[2]!, MAIL_FROM: sh[3]! } });
  assert.equal(fromEnv.mail.smtpUrl, 'smtps://gateway:app-password@smtp.example.com:465');
  assert.equal(fromEnv.mail.from, 'Acme API <noreply@example.com>');
});

test('mail needs a sender and the public origin its links point at; an SMTP URL is smtp or smtps', () => {
  const problems = problemsOf({ mail: { smtpUrl: 'smtp://smtp.example.com' } });
  assert.ok(problems.some((p) => p.startsWith('owner.publicOrigin: mail (mail.smtpUrl) needs the origin')), problems.join('\n'));
  assert.ok(problems.some((p) => p.startsWith('mail.from: mail (mail.smtpUrl) needs a sender')), problems.join('\n'));
  assert.ok(problemsOf({ mail: { smtpUrl: 'http://smtp.example.com', from: 'a@b.c' }, owner: { publicOrigin: 'https://gw.example.com' } }).some((p) => p.startsWith('mail.smtpUrl')));
  assert.deepEqual(problemsOf({}), [], 'mail off: nothing needed');
});
