/**
 * The mail templates: what they interpolate is escaped in the HTML part and as written in the
 * text part, a subject stays one line whatever the product's name holds, and each link points at
 * the public origin with its token in the fragment only.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapeHtml, inviteMail, passwordResetMail, securityNoticeMail, verifyEmailMail } from '../../src/owner/mail-templates.js';

const context = { productName: 'Acme API', origin: 'https://gw.example.com' };

test('interpolated text is escaped in the HTML part, as written in the text part', () => {
  assert.equal(escapeHtml(`<a href="x" onclick='y'>&</a>`), '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  const mail = inviteMail(context, { accountName: '<img src=x onerror=alert(1)> & "Co"', token: 'gwinv_abc', hours: 72 });
  assert.ok(!mail.html.includes('<img'), mail.html);
  assert.ok(mail.html.includes('&lt;img src=x onerror=alert(1)&gt; &amp; &quot;Co&quot;'));
  assert.ok(mail.text.includes('"<img src=x onerror=alert(1)> & "Co""'));
  const notice = securityNoticeMail(context, { what: 'An API key was created', at: '2026-01-01T00:00:00.000Z', ip: '203.0.113.9', accountName: '</p><script>' });
  assert.ok(!notice.html.includes('<script>'));
});

test('a subject is one line, whatever the product\'s name holds', () => {
  const mail = verifyEmailMail({ ...context, productName: 'Acme\r\nBcc: everyone@example.com' }, { token: 'gwver_x', hours: 72 });
  assert.ok(!/[\r\n]/.test(mail.subject), mail.subject);
});

test('links point at the public origin, the token in the fragment; each message has both parts', () => {
  for (const [mail, path, token] of [
    [inviteMail(context, { accountName: 'A', token: 'gwinv_t1', hours: 72 }), '/owner/invite', 'gwinv_t1'],
    [verifyEmailMail(context, { token: 'gwver_t2.own_1', hours: 72 }), '/owner/verify-email', 'gwver_t2.own_1'],
    [passwordResetMail(context, { token: 'gwrst_t3.own_1', minutes: 30 }), '/owner/reset-password', 'gwrst_t3.own_1'],
  ] as const) {
    const link = `https://gw.example.com${path}#${token}`;
    assert.ok(mail.text.includes(link), mail.text);
    assert.ok(mail.html.includes(`href="${link}"`), mail.html);
    assert.match(mail.subject, /^Acme API: /);
    assert.ok(mail.text.endsWith('-- \nAcme API · https://gw.example.com\n'));
  }
});
