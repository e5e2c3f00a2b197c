/**
 * The owner API's change limits (limits.owner, src/http/owner/register.ts): an owner's changes
 * are counted per owner and per account they change, refused over either with 429, Retry-After
 * and the RateLimit fields; reads, signing out and an operator's calls are never counted, and a
 * change sent to an account the owner cannot reach is a 404 that spends nothing of that
 * account's allowance. Against a gateway in this process with a manual clock.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { show, type JsonResponse } from '../helpers/gateway.js';
import { accountWithOwner, operator, sessionFrom, signIn, startOwnerGateway } from '../helpers/owner.js';

const MINUTE = 60_000;

/** The RateLimit items by name: `"name";r=0;t=60` → {r:'0', t:'60'}. */
function items(header: string | null): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>();
  for (const item of (header ?? '').split(', ').filter((s) => s !== '')) {
    const [name, ...params] = item.split(';');
    out.set(name!.slice(1, -1), Object.fromEntries(params.map((p) => p.split('=') as [string, string])));
  }
  return out;
}

function assertRefusedBy(res: JsonResponse, limit: string): void {
  assert.equal(res.status, 429, show(res));
  assert.equal(res.body.success, false);
  assert.equal(res.body.message.code, 'rate_limited');
  assert.match(res.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
  assert.ok(items(res.headers.get('ratelimit-policy')).has(limit), `RateLimit-Policy names ${limit}: ${res.headers.get('ratelimit-policy')}`);
  assert.equal(items(res.headers.get('ratelimit')).get(limit)?.r, '0', `RateLimit: ${res.headers.get('ratelimit')}`);
}

test('owner API changes are limited per owner and per account (429 with RateLimit fields); reads, sign-out and operators are not', async (t) => {
  const gw = await startOwnerGateway(t, {
    overrides: { limits: { mode: 'enforce', owner: { perOwner: [{ limit: 5, seconds: 60 }], perAccount: [{ limit: 6, seconds: 60 }] } } },
  });
  // Each owner's password change is one change of theirs (on no account).
  const ann = await accountWithOwner(gw, { accountId: 'acct_one', email: 'ann@example.com', password: 'ann-password-1234' });
  const cal = await accountWithOwner(gw, { accountId: 'acct_two', email: 'cal@example.com', password: 'cal-password-1234' });
  const added = await operator(gw).send('POST', '/accounts/acct_one/owners', { email: 'ben@example.com', initialPassword: 'initial-ben-1234' });
  assert.equal(added.status, 201, show(added));
  const benFirst = await signIn(gw, 'ben@example.com', 'initial-ben-1234');
  const benChanged = await benFirst.send('POST', '/session/password', { currentPassword: 'initial-ben-1234', newPassword: 'ben-password-1234' });
  assert.equal(benChanged.status, 200, show(benChanged));
  const ben = sessionFrom(gw, benChanged);

  // Changes sent to an account Ann cannot reach: 404, and acct_two's allowance is untouched.
  for (let i = 0; i < 8; i++) assert.equal((await ann.send('PATCH', '/accounts/acct_two', { name: `not mine ${i}` })).status, 404);

  // Per owner: Ann has 4 changes left (5, less her password change).
  for (let i = 0; i < 4; i++) {
    const res = await ann.send('PATCH', '/accounts/acct_one', { name: `one ${i}` });
    assert.equal(res.status, 200, show(res));
    assert.ok(items(res.headers.get('ratelimit')).has('owner-writes-owner-60s'), `an admitted change carries RateLimit: ${res.headers.get('ratelimit')}`);
  }
  assertRefusedBy(await ann.send('PATCH', '/accounts/acct_one', { name: 'one too many' }), 'owner-writes-owner-60s');
  // Reads are not limited.
  for (let i = 0; i < 20; i++) assert.equal((await ann.get('/accounts/acct_one')).status, 200);

  // Per account: acct_one has 2 changes left (6, less Ann's 4), though Ben has 4 of his own.
  for (let i = 0; i < 2; i++) assert.equal((await ben.send('PATCH', '/accounts/acct_one', { name: `ben ${i}` })).status, 200);
  assertRefusedBy(await ben.send('PATCH', '/accounts/acct_one', { name: 'ben too many' }), 'owner-writes-account-60s');

  // Another account is counted on its own (and Ann's 404s above spent none of it).
  for (let i = 0; i < 4; i++) assert.equal((await cal.send('PATCH', '/accounts/acct_two', { name: `two ${i}` })).status, 200);

  // The operator is not counted.
  assert.equal((await operator(gw).send('PATCH', '/accounts/acct_one', { name: 'by the operator' })).status, 200);
  assert.equal((await ann.get('/accounts/acct_one')).body.message.name, 'by the operator');
  // An owner over the limit can still sign out.
  assert.equal((await ann.send('DELETE', '/session')).status, 200, 'sign-out is never refused');

  // The window passes: changes are admitted again.
  assertRefusedBy(await ben.send('PATCH', '/accounts/acct_one', { name: 'still too many' }), 'owner-writes-account-60s');
  gw.clock.advance(MINUTE);
  assert.equal((await ben.send('PATCH', '/accounts/acct_one', { name: 'a minute later' })).status, 200);
});

test('the example of docs/rate-limits.md ("Owner API changes") is a valid configuration, spelling out the defaults', () => {
  const page = readFileSync(new URL('../../docs/rate-limits.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('## Owner API changes'));
  const example = JSON.parse(/```json\n([\s\S]*?)\n```/.exec(section)![1]!) as Record<string, unknown>;
  const configured = loadConfig({ env: {}, overrides: example }).limits.owner;
  const defaults = loadConfig({ env: {} }).limits.owner;
  assert.deepEqual(configured, defaults);
  assert.deepEqual(defaults.perOwner, [{ limit: 10, seconds: 1 }, { limit: 120, seconds: 60 }]);
});
