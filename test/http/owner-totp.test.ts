/**
 * TOTP as an owner's second factor on a real gateway (issue 30), codes computed here with
 * otpauth at the gateway's manual clock: enrollment (the secret shown once, a QR code, ten
 * recovery codes), `mfa_required` at sign-in without a code, a code accepted once (a replay in
 * its window refused), a recovery code once, wrong codes throttled by the owner sign-in limits
 * without locking out the owner's own browser, turning TOTP off and new recovery codes only
 * with a current factor, the audit events, and the account's and the deployment's requirement.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Secret, TOTP } from 'otpauth';
import { createSecretBox } from '../../src/owner/secret-box.js';
import { show, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { accountWithOwner, anonymous, operator, sessionFrom, signIn, startOwnerGateway, type OwnerSession } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';
const TRUSTED = { proxy: { trustedProxies: ['127.0.0.1'] } };

function codeAt(gw: TestGateway, secret: string, offsetMs = 0): string {
  return TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: gw.clock.now() + offsetMs });
}

function deviceCookie(res: JsonResponse): string | undefined {
  return res.headers.getSetCookie().find((c) => /^(__Host-)?gw_device=/.test(c))?.split(';')[0];
}

function signInFrom(gw: TestGateway, address: string, body: Record<string, unknown>, cookie?: string): Promise<JsonResponse> {
  return anonymous(gw).send('POST', '/session', body, { 'x-forwarded-for': address, ...(cookie !== undefined ? { cookie } : {}) });
}

/** Enrolls TOTP for a signed-in owner; answers the secret and the recovery codes. */
async function enroll(gw: TestGateway, owner: OwnerSession): Promise<{ secret: string; recoveryCodes: string[] }> {
  const started = await owner.send('POST', '/session/totp');
  assert.equal(started.status, 200, show(started));
  const { secret } = started.body.message as { secret: string };
  const confirmed = await owner.send('POST', '/session/totp/confirmation', { code: codeAt(gw, secret) });
  assert.equal(confirmed.status, 200, show(confirmed));
  return { secret, recoveryCodes: confirmed.body.message.recoveryCodes as string[] };
}

test('TOTP: enrollment, mfa_required, a code once, a recovery code once, off and new codes only with a factor', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce' } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_totp', email: 'totp@example.com', password: PASSWORD });
  const state = { secret: '', codes: [] as string[] };

  await t.test('enrollment answers the secret once, with its URI and a QR code; a wrong code confirms nothing', async () => {
    const started = await owner.send('POST', '/session/totp');
    assert.equal(started.status, 200, show(started));
    const { secret, uri, qrCode } = started.body.message as { secret: string; uri: string; qrCode: string };
    assert.match(secret, /^[A-Z2-7]{32}$/);
    assert.equal(new URL(uri).protocol, 'otpauth:');
    assert.equal(new URL(uri).searchParams.get('secret'), secret);
    assert.match(qrCode, /^data:image\/svg\+xml;base64,/);
    assert.match(Buffer.from(qrCode.split(',')[1]!, 'base64').toString('utf8'), /<svg/);

    const wrong = await owner.send('POST', '/session/totp/confirmation', { code: codeAt(gw, secret, 120_000) });
    assert.equal(wrong.status, 400, show(wrong));
    assert.equal(wrong.body.message.field, 'code');
    assert.equal((await owner.get('/session/second-factors')).body.message.totp.enabled, false);

    const confirmed = await owner.send('POST', '/session/totp/confirmation', { code: codeAt(gw, secret) });
    assert.equal(confirmed.status, 200, show(confirmed));
    const codes = confirmed.body.message.recoveryCodes as string[];
    assert.equal(codes.length, 10);
    assert.equal(new Set(codes).size, 10);

    const described = await owner.get('/session/second-factors');
    assert.equal(described.status, 200, show(described));
    assert.equal(described.body.message.totp.enabled, true);
    assert.equal(described.body.message.recoveryCodesLeft, 10);
    assert.equal(described.body.message.required, false);
    assert.ok(!JSON.stringify(described.body).includes(secret), 'the secret is never answered again');
    assert.equal((await owner.send('POST', '/session/totp')).status, 409, 'no second enrollment while TOTP is on');
    for (const line of gw.logs) {
      assert.ok(!line.includes(secret) && !codes.some((c) => line.includes(c)), `no secret or recovery code in the log: ${line}`);
    }
    const audit = await owner.get('/accounts/acct_totp/audit');
    assert.ok(audit.body.message.items.some((e: { action: string }) => e.action === 'owner.totp_enable'), show(audit));
    assert.ok(!JSON.stringify(audit.body).includes(secret));
    state.secret = secret;
    state.codes = codes;
  });

  await t.test('sign-in: mfa_required without a code or with a wrong one; a code once; a replay in its window is refused', async () => {
    gw.clock.advance(30_000);
    const bare = await signInFrom(gw, '203.0.113.1', { email: 'totp@example.com', password: PASSWORD });
    assert.equal(bare.status, 401, show(bare));
    assert.equal(bare.body.message.code, 'mfa_required');
    assert.equal(bare.headers.getSetCookie().length, 0, 'no session and no device cookie before the second factor');
    const wrongPassword = await signInFrom(gw, '203.0.113.1', { email: 'totp@example.com', password: 'not the password at all', otp: codeAt(gw, state.secret) });
    assert.equal(wrongPassword.body.message.code, 'invalid_credentials', 'a right code is no way round a wrong password');

    const code = codeAt(gw, state.secret);
    const first = await signInFrom(gw, '203.0.113.1', { email: 'totp@example.com', password: PASSWORD, otp: code });
    assert.equal(first.status, 200, show(first));
    const replay = await signInFrom(gw, '203.0.113.1', { email: 'totp@example.com', password: PASSWORD, otp: code });
    assert.equal(replay.status, 401, show(replay));
    assert.equal(replay.body.message.code, 'mfa_required');
    gw.clock.advance(30_000);
    const next = await signInFrom(gw, '203.0.113.1', { email: 'totp@example.com', password: PASSWORD, otp: codeAt(gw, state.secret) });
    assert.equal(next.status, 200, `the next step's code: ${show(next)}`);
  });

  await t.test('a recovery code signs in once (any case, with or without its dash)', async () => {
    const [code] = state.codes;
    const used = await signInFrom(gw, '203.0.113.2', { email: 'totp@example.com', password: PASSWORD, otp: code!.toUpperCase().replace('-', '') });
    assert.equal(used.status, 200, show(used));
    const again = await signInFrom(gw, '203.0.113.2', { email: 'totp@example.com', password: PASSWORD, otp: code });
    assert.equal(again.status, 401, show(again));
    assert.equal((await owner.get('/session/second-factors')).body.message.recoveryCodesLeft, 9);
  });

  await t.test('new recovery codes and turning TOTP off need a current factor', async () => {
    assert.equal((await owner.send('POST', '/session/recovery-codes', { code: '000000' })).status, 400);
    gw.clock.advance(30_000);
    const renewed = await owner.send('POST', '/session/recovery-codes', { code: codeAt(gw, state.secret) });
    assert.equal(renewed.status, 200, show(renewed));
    const fresh = renewed.body.message.recoveryCodes as string[];
    assert.equal(fresh.length, 10);
    const old = await signInFrom(gw, '203.0.113.3', { email: 'totp@example.com', password: PASSWORD, otp: state.codes[1] });
    assert.equal(old.status, 401, 'the old recovery codes are gone');

    assert.equal((await owner.send('POST', '/session/totp/disable', { code: state.codes[2] })).status, 400);
    const off = await owner.send('POST', '/session/totp/disable', { code: fresh[0] });
    assert.equal(off.status, 200, show(off));
    assert.equal(off.body.message.totp.enabled, false);
    assert.equal(off.body.message.recoveryCodesLeft, 0);
    const plain = await signInFrom(gw, '203.0.113.3', { email: 'totp@example.com', password: PASSWORD });
    assert.equal(plain.status, 200, `the password alone again: ${show(plain)}`);
    const actions = (await owner.get('/accounts/acct_totp/audit')).body.message.items.map((e: { action: string }) => e.action);
    assert.ok(actions.includes('owner.recovery_codes_regenerate') && actions.includes('owner.totp_disable'), actions.join(', '));
  });
});

test('wrong codes are throttled by the owner sign-in limits; strangers\' never lock out the owner\'s own browser', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce', ownerSignIn: { failuresPerEmail: [{ limit: 5, seconds: 900 }], failuresPerDevice: [{ limit: 3, seconds: 900 }] } } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_guess', email: 'guess@example.com', password: PASSWORD });
  const { secret } = await enroll(gw, owner);
  gw.clock.advance(30_000);
  const mine = await signInFrom(gw, '203.0.113.7', { email: 'guess@example.com', password: PASSWORD, otp: codeAt(gw, secret) });
  assert.equal(mine.status, 200, show(mine));
  const device = deviceCookie(mine)!;
  assert.ok(device !== undefined);

  // Someone with the password, from many addresses, guessing codes.
  const answers: number[] = [];
  for (let i = 1; i <= 8; i++) answers.push((await signInFrom(gw, `198.51.100.${i}`, { email: 'guess@example.com', password: PASSWORD, otp: String(100000 + i) })).status);
  assert.deepEqual(answers.slice(0, 5), [401, 401, 401, 401, 401], answers.join(' '));
  assert.ok(answers.slice(5).every((s) => s === 429), `past the email's failure limit, strangers are refused: ${answers.join(' ')}`);
  gw.clock.advance(30_000);
  const stranger = await signInFrom(gw, '198.51.100.99', { email: 'guess@example.com', password: PASSWORD, otp: codeAt(gw, secret) });
  assert.equal(stranger.status, 429, 'even with a right code: guessing is bounded');

  const own = await signInFrom(gw, '192.0.2.50', { email: 'guess@example.com', password: PASSWORD, otp: codeAt(gw, secret) }, device);
  assert.equal(own.status, 200, `the owner's own browser signs in: ${show(own)}`);

  // The device's own wrong codes lock that device out, its right password no way to clear them.
  const renewed = deviceCookie(own)!;
  for (let i = 0; i < 3; i++) {
    const wrong = await signInFrom(gw, '192.0.2.50', { email: 'guess@example.com', password: PASSWORD, otp: '000000' }, renewed);
    assert.equal(wrong.status, 401, show(wrong));
  }
  gw.clock.advance(30_000);
  const locked = await signInFrom(gw, '192.0.2.50', { email: 'guess@example.com', password: PASSWORD, otp: codeAt(gw, secret) }, renewed);
  assert.equal(locked.status, 429, show(locked));
});

test('requirement: an account\'s owners without a second factor enroll before anything else; the deployment\'s setting too', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { limits: { mode: 'enforce' } } });
  const first = await accountWithOwner(gw, { accountId: 'acct_req', email: 'first@example.com', password: PASSWORD });
  assert.equal((await first.get('/accounts/acct_req/second-factor-requirement')).body.message.required, false);
  const set = await first.send('PUT', '/accounts/acct_req/second-factor-requirement', { required: true });
  assert.equal(set.status, 200, show(set));
  assert.equal(set.body.message.required, true);

  const refused = await first.get('/accounts/acct_req');
  assert.equal(refused.status, 403, show(refused));
  assert.equal(refused.body.message.code, 'mfa_enrollment_required');
  assert.equal((await first.get('/session')).status, 200, 'the session itself still answers');
  const described = await first.get('/session/second-factors');
  assert.equal(described.body.message.required, true);
  await enroll(gw, first);
  assert.equal((await first.get('/accounts/acct_req')).status, 200, 'enrolled: everything again');
  assert.equal((await operator(gw).get('/accounts/acct_req')).status, 200, 'operators are never made to enroll');
  const audit = await first.get('/accounts/acct_req/audit');
  assert.ok(audit.body.message.items.some((e: { action: string; changes?: Record<string, unknown> }) => e.action === 'account.update' && e.changes?.requireSecondFactor !== undefined), show(audit));

  const strict = await startOwnerGateway(t, { overrides: { owner: { requireSecondFactor: true } } });
  const created = await operator(strict).send('POST', '/accounts', { id: 'acct_any', name: 'Any' });
  assert.equal(created.status, 201, show(created));
  assert.equal((await operator(strict).send('POST', '/accounts/acct_any/owners', { email: 'any@example.com', initialPassword: `initial-${PASSWORD}` })).status, 201);
  const any = await signIn(strict, 'any@example.com', `initial-${PASSWORD}`);
  const changed = sessionFrom(strict, await any.send('POST', '/session/password', { currentPassword: `initial-${PASSWORD}`, newPassword: PASSWORD }));
  const blocked = await changed.get('/accounts');
  assert.equal(blocked.status, 403, show(blocked));
  assert.equal(blocked.body.message.code, 'mfa_enrollment_required');
  await enroll(strict, changed);
  assert.equal((await changed.get('/accounts')).status, 200);
});

test('TOTP survives a restart: the data file keeps it, and a code accepted before is still a replay after', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_restart', email: 'restart@example.com', password: PASSWORD });
  const { secret } = await enroll(gw, owner);
  gw.clock.advance(30_000);
  const code = codeAt(gw, secret);
  assert.equal((await anonymous(gw).send('POST', '/session', { email: 'restart@example.com', password: PASSWORD, otp: code })).status, 200);
  const config = gw.services.config as { data: { file: string }; owner: { adminTokenDigests: string[] } };
  await gw.close();

  const again = await startGateway(t, { overrides: { owner: { adminTokenDigests: config.owner.adminTokenDigests }, data: { file: config.data.file } }, clock: gw.clock });
  const bare = await anonymous(again).send('POST', '/session', { email: 'restart@example.com', password: PASSWORD });
  assert.equal(bare.body.message.code, 'mfa_required', show(bare));
  const replay = await anonymous(again).send('POST', '/session', { email: 'restart@example.com', password: PASSWORD, otp: code });
  assert.equal(replay.body.message.code, 'mfa_required', 'the last accepted step outlives the restart');
  again.clock.advance(30_000);
  assert.equal((await anonymous(again).send('POST', '/session', { email: 'restart@example.com', password: PASSWORD, otp: codeAt(again, secret) })).status, 200);
});

test('with owner.secondFactorKey, the TOTP secret is stored sealed: not in the data file, bound to its owner and its key', async (t) => {
  const key = 'k'.repeat(40);
  const gw = await startOwnerGateway(t, { overrides: { owner: { secondFactorKey: key } } });
  const owner = await accountWithOwner(gw, { accountId: 'acct_sealed', email: 'sealed@example.com', password: PASSWORD });
  const { secret } = await enroll(gw, owner);
  const config = gw.services.config as { data: { file: string } };
  const file = readFileSync(config.data.file, 'utf8');
  assert.ok(!file.includes(secret), 'the data file holds no secret that makes codes');
  const stored = (await gw.services.ownerStore.findOwnerByEmail('sealed@example.com'))!.totp!.secret;
  assert.match(stored, /^v1\./);
  assert.equal(createSecretBox(key).open(stored, (await gw.services.ownerStore.findOwnerByEmail('sealed@example.com'))!.id), secret);
  assert.equal(createSecretBox(key).open(stored, 'own_someone_else'), undefined, 'bound to its owner');
  assert.equal(createSecretBox('x'.repeat(40)).open(stored, 'own_x'), undefined, 'and to its key');
  gw.clock.advance(30_000);
  const signedIn = await anonymous(gw).send('POST', '/session', { email: 'sealed@example.com', password: PASSWORD, otp: codeAt(gw, secret) });
  assert.equal(signedIn.status, 200, show(signedIn));
});

test('an operator removes every second factor of a member who lost them all; an owner may not', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_lost', email: 'lost@example.com', password: PASSWORD });
  await enroll(gw, owner);
  const ownerId = owner.signIn.body.message.owner.id as string;
  const path = `/accounts/acct_lost/members/${ownerId}/second-factors`;
  const refused = await owner.send('DELETE', path);
  assert.equal(refused.status, 403, show(refused));
  const reset = await operator(gw).send('DELETE', path);
  assert.equal(reset.status, 200, show(reset));
  assert.deepEqual(reset.body.message, { ownerId, reset: true });
  const plain = await anonymous(gw).send('POST', '/session', { email: 'lost@example.com', password: PASSWORD });
  assert.equal(plain.status, 200, `the password alone again: ${show(plain)}`);
  const events = (await operator(gw).get('/accounts/acct_lost/audit')).body.message.items as { action: string; actor: { type: string } }[];
  assert.equal(events.find((e) => e.action === 'owner.totp_disable')?.actor.type, 'operator');
  assert.equal((await operator(gw).send('DELETE', '/accounts/acct_lost/members/own_nobody/second-factors')).status, 404);
});
