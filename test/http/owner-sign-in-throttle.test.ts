/**
 * The owner sign-in throttle on a real gateway (issue 26): strangers' guesses at an owner's
 * email never lock out a browser the owner signed in from before (OWASP's device cookies), an
 * address guessing is slowed by growing delays, wrong operator tokens are counted apart from
 * owner sign-ins, and a throttled attempt is refused before any argon2 work.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hashesStarted, hashLoad, inHashSlot, limitHashing } from '../../src/owner/passwords.js';
import { show, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { accountWithOwner, anonymous, operator, sessionCookie, startOwnerGateway } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';
const WRONG = 'wrong wrong wrong wrong';
/** Client addresses come from X-Forwarded-For, as behind a load balancer: one test process plays many clients. */
const TRUSTED = { proxy: { trustedProxies: ['127.0.0.1'] } };

/** The `name=value` of the device cookie a sign-in set. */
function deviceCookie(res: JsonResponse): string | undefined {
  return res.headers.getSetCookie().find((c) => /^(__Host-)?gw_device=/.test(c))?.split(';')[0];
}

function signInFrom(gw: TestGateway, address: string, email: string, password: string, cookie?: string): Promise<JsonResponse> {
  return anonymous(gw).send('POST', '/session', { email, password }, { 'x-forwarded-for': address, ...(cookie !== undefined ? { cookie } : {}) });
}

test('55 wrong passwords from 55 addresses lock out clients without the device cookie, never the browser the owner signed in from', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce' } } });
  await accountWithOwner(gw, { accountId: 'acct_target', email: 'target@example.com', password: PASSWORD });
  const first = await signInFrom(gw, '203.0.113.7', 'target@example.com', PASSWORD);
  assert.equal(first.status, 200, show(first));
  const device = deviceCookie(first);
  assert.ok(device !== undefined, `a sign-in sets a device cookie: ${first.headers.getSetCookie().join(' | ')}`);
  const attributes = first.headers.getSetCookie().find((c) => c.startsWith('gw_device='))!.toLowerCase();
  assert.ok(attributes.includes('httponly') && attributes.includes('samesite=strict') && attributes.includes('path=/'), attributes);

  // Emails are no secret: anyone can try one, from as many addresses as they have.
  for (let i = 1; i <= 55; i++) {
    const res = await signInFrom(gw, `198.51.100.${i}`, 'target@example.com', WRONG);
    assert.ok(res.status === 401 || res.status === 429, `stranger #${i}: ${show(res)}`);
  }

  const known = await signInFrom(gw, '192.0.2.44', 'target@example.com', PASSWORD, device);
  assert.equal(known.status, 200, `the owner's own browser signs in, from wherever it is: ${show(known)}`);
  assert.ok(sessionCookie(known) !== undefined);
  const renewed = deviceCookie(known);
  assert.ok(renewed !== undefined && renewed !== device, 'each sign-in sets a fresh device cookie');
  assert.equal((await signInFrom(gw, '192.0.2.45', 'target@example.com', PASSWORD, renewed)).status, 200, 'the renewed cookie is known too');

  const unknown = await signInFrom(gw, '192.0.2.46', 'target@example.com', PASSWORD);
  assert.equal(unknown.status, 429, `a client without it is locked out for this email, right password or not: ${show(unknown)}`);
  assert.equal(unknown.body.message.code, 'rate_limited');
  // A device cookie counts only for the email it was set for: the stranger's own account's cookie is no way round.
  await accountWithOwner(gw, { accountId: 'acct_stranger', email: 'stranger@example.com', password: PASSWORD });
  const own = deviceCookie(await signInFrom(gw, '198.51.100.1', 'stranger@example.com', PASSWORD));
  assert.ok(own !== undefined);
  assert.equal((await signInFrom(gw, '198.51.100.2', 'target@example.com', PASSWORD, own)).status, 429, 'another email\'s device cookie is an untrusted client\'s');
  assert.equal((await signInFrom(gw, '198.51.100.3', 'target@example.com', PASSWORD, `${device!.slice(0, -3)}xyz`)).status, 429, 'a tampered one too');
});

test('a device\'s own failures lock that device out, and a success clears them', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce', ownerSignIn: { failuresPerDevice: [{ limit: 3, seconds: 600 }] } } } });
  await accountWithOwner(gw, { accountId: 'acct_dev', email: 'dev@example.com', password: PASSWORD });
  const device = deviceCookie(await signInFrom(gw, '203.0.113.8', 'dev@example.com', PASSWORD))!;
  for (let i = 0; i < 2; i++) assert.equal((await signInFrom(gw, '203.0.113.8', 'dev@example.com', WRONG, device)).status, 401);
  assert.equal((await signInFrom(gw, '203.0.113.8', 'dev@example.com', PASSWORD, device)).status, 200, 'a success clears the device\'s run');
  for (let i = 0; i < 3; i++) assert.equal((await signInFrom(gw, '203.0.113.8', 'dev@example.com', WRONG, device)).status, 401, `failure ${i + 1}`);
  const locked = await signInFrom(gw, '203.0.113.8', 'dev@example.com', PASSWORD, device);
  assert.equal(locked.status, 429, `the fourth failure in a row locks the device out: ${show(locked)}`);
});

test('an address guessing at owners\' passwords waits longer and longer; a known device behind it still signs in', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce' } } });
  await accountWithOwner(gw, { accountId: 'acct_nat', email: 'nat@example.com', password: PASSWORD });
  const device = deviceCookie(await signInFrom(gw, '203.0.113.9', 'nat@example.com', PASSWORD))!;
  const guesser = '192.0.2.9';
  let email = 0;
  /** Fails `n` guesses at different emails (so no email's own limit takes part), then answers the refused one. */
  const guessUntilRefused = async (n: number): Promise<JsonResponse> => {
    for (let i = 0; i < n; i++) {
      const res = await signInFrom(gw, guesser, `guess${email++}@example.com`, WRONG);
      assert.equal(res.status, 401, `guess ${email}: ${show(res)}`);
    }
    const refused = await signInFrom(gw, guesser, `guess${email++}@example.com`, WRONG);
    assert.equal(refused.status, 429, show(refused));
    return refused;
  };

  // The default windows: 5 failures a minute, 10 in 10 minutes, 20 an hour, 40 a day. Each run of
  // 5 failures is refused for as long as the longest window it filled still runs.
  const delays: number[] = [];
  for (let run = 0; run < 4; run++) {
    const refused = await guessUntilRefused(5);
    delays.push(Number(refused.headers.get('retry-after')));
    if (run === 0) {
      // A device the owner signed in from is not the guesser, whatever address they share (a NAT).
      assert.equal((await signInFrom(gw, guesser, 'nat@example.com', PASSWORD, device)).status, 200, 'the owner behind the same address');
    }
    gw.clock.advance(delays[run]! * 1000);
  }
  assert.ok(delays[0]! > 0 && delays[0]! <= 60, `first delay: ${delays.join(', ')} s`);
  assert.ok(delays[1]! > 60, `10 failures: the 10-minute window: ${delays.join(', ')} s`);
  assert.ok(delays[3]! > delays[1]!, `20 failures: the hour's window, longer still: ${delays.join(', ')} s`);
});

test('wrong operator tokens from an address do not count against owner sign-ins from it', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce' } } });
  await accountWithOwner(gw, { accountId: 'acct_office', email: 'office@example.com', password: PASSWORD });
  const office = '192.0.2.20';
  // The office's scripts with stale tokens (a different one each), behind its one address, until
  // the operator-token limit stops them.
  const stale = (i: number) => `gwadm_${String(i).padStart(43, 's')}`;
  let last = await operator(gw, stale(0)).get('/accounts', { 'x-forwarded-for': office });
  for (let i = 1; i < 200 && last.status === 401; i++) last = await operator(gw, stale(i)).get('/accounts', { 'x-forwarded-for': office });
  assert.equal(last.status, 429, `the scripts are stopped: ${show(last)}`);
  const owner = await signInFrom(gw, office, 'office@example.com', PASSWORD);
  assert.equal(owner.status, 200, `an owner in the same office signs in (no device cookie yet): ${show(owner)}`);
  assert.equal((await operator(gw).get('/accounts', { 'x-forwarded-for': '203.0.113.20' })).status, 200, 'the right token from elsewhere works');
});

test('a throttled sign-in is refused before any password hashing', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce', ownerSignIn: { failuresPerEmail: [{ limit: 2, seconds: 600 }] } } } });
  await accountWithOwner(gw, { accountId: 'acct_hash', email: 'hash@example.com', password: PASSWORD });
  for (let i = 0; i < 2; i++) assert.equal((await signInFrom(gw, `198.51.100.${i + 1}`, 'hash@example.com', WRONG)).status, 401);
  const before = hashesStarted();
  for (let i = 0; i < 5; i++) {
    const res = await signInFrom(gw, `198.51.100.${i + 10}`, 'hash@example.com', i % 2 === 0 ? WRONG : PASSWORD);
    assert.equal(res.status, 429, show(res));
  }
  assert.equal(hashesStarted(), before, 'no argon2 computation started for a refused attempt');
  assert.equal((await signInFrom(gw, '198.51.100.30', 'nobody@example.com', WRONG)).status, 401);
  assert.equal(hashesStarted(), before + 1, 'an admitted attempt hashes once, unknown email included');
});

test('past the hashing queue a sign-in is answered 503 overloaded at once, in the envelope, and counts as no failure', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce', ownerSignIn: { failuresPerEmail: [{ limit: 1, seconds: 600 }] } }, owner: { passwordHashConcurrency: 1, passwordHashQueue: 0 } } });
  t.after(() => limitHashing({ concurrency: 0, queue: 64 }));
  await accountWithOwner(gw, { accountId: 'acct_busy', email: 'busy@example.com', password: PASSWORD });
  // Hold the only slot (as a hash in progress would) until the answer is in.
  let release!: () => void;
  const held = inHashSlot(() => new Promise<void>((resolve) => { release = resolve; }));
  assert.equal(hashLoad().running, 1);
  const busy = await signInFrom(gw, '198.51.100.77', 'busy@example.com', WRONG);
  release();
  await held;
  assert.equal(busy.status, 503, show(busy));
  assert.equal(busy.body.success, false);
  assert.equal(busy.body.message.code, 'overloaded');
  assert.equal(busy.headers.get('retry-after'), '1');
  // The refused check was no failure: the email's one allowed failure is still there.
  assert.equal((await signInFrom(gw, '198.51.100.78', 'busy@example.com', WRONG)).status, 401);
  assert.equal((await signInFrom(gw, '198.51.100.79', 'busy@example.com', WRONG)).status, 429);
});

test('past the hashing budget a flood of sign-ins from new addresses is answered 503 without hashing, while the owner\'s known browser signs in', async (t) => {
  // A thousandth of a core: one verification spends the budget, and the gateway's clock (which
  // refills it) moves only when the test says.
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce' }, owner: { passwordHashBudget: 0.001 } } });
  t.after(() => limitHashing({ concurrency: 0, queue: 64 }));
  // The owner as an operator makes them (the initial password's hash is no sign-in: not budgeted).
  assert.equal((await operator(gw).send('POST', '/accounts', { id: 'acct_flood', name: 'Flood' })).status, 201);
  assert.equal((await operator(gw).send('POST', '/accounts/acct_flood/owners', { email: 'flood@example.com', initialPassword: PASSWORD })).status, 201);
  gw.clock.advance(60_000);
  let first = await signInFrom(gw, '203.0.113.50', 'flood@example.com', PASSWORD);
  // The initial password's hash spent the budget for as long as it took here (on a busy machine
  // more than a minute of a thousandth of a core): Retry-After says how long that is.
  if (first.status === 503) {
    gw.clock.advance(Number(first.headers.get('retry-after')) * 1000);
    first = await signInFrom(gw, '203.0.113.50', 'flood@example.com', PASSWORD);
  }
  assert.equal(first.status, 200, show(first));
  const device = deviceCookie(first)!;

  const before = hashesStarted();
  for (let i = 1; i <= 20; i++) {
    const res = await signInFrom(gw, `198.18.0.${i}`, `flood${i}@example.com`, WRONG);
    assert.equal(res.status, 503, `flood #${i}: ${show(res)}`);
    assert.equal(res.body.message.code, 'overloaded');
    assert.ok(Number(res.headers.get('retry-after')) >= 1, show(res));
  }
  assert.equal(hashesStarted(), before, 'the flood past the budget started no hash');

  const known = await signInFrom(gw, '192.0.2.51', 'flood@example.com', PASSWORD, device);
  assert.equal(known.status, 200, `the browser the owner signed in from is not refused by the budget: ${show(known)}`);
  assert.equal(hashesStarted(), before + 1);
  const waiting = await signInFrom(gw, '192.0.2.52', 'flood@example.com', PASSWORD);
  assert.equal(waiting.status, 503, 'a browser without the device cookie waits for the budget, right password or not');

  // The hashes spent the budget for as long as they took on this machine (a busy one: hundreds
  // of ms, each a hundred seconds of a thousandth of a core): Retry-After says how long that is.
  const wait = Number(waiting.headers.get('retry-after'));
  assert.ok(wait >= 1, show(waiting));
  gw.clock.advance(wait * 1000);
  assert.equal((await signInFrom(gw, '198.18.1.1', 'flood-later@example.com', WRONG)).status, 401, 'the refilled budget admits a check again');
  assert.equal(hashesStarted(), before + 2);
});
