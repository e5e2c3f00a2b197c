/**
 * The owner API attacked on a real gateway: by an outsider (no credential, or guessed ones) and
 * by a malicious owner (a session of their own, aiming at another account or at the gateway).
 * Each test here is a hole that was found open, or an attack that must keep failing.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { test } from 'node:test';
import { createSettingsTokenAuth } from '../../src/auth/settings-tokens.js';
import { mintSettingsToken } from '../../src/domain/settings-token.js';
import type { OwnerStore } from '../../src/state/owners/store.js';
import { call, show } from '../helpers/gateway.js';
import { silentLog } from '../helpers/redis.js';
import { gatewayEnv, runCommand } from '../helpers/process.js';
import { ADMIN_TOKEN, accountWithOwner, anonymous, operator, sessionCookie, startOwnerGateway } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';
const TRUSTED = { proxy: { trustedProxies: ['127.0.0.1'] } };

test('over TLS only the __Host- cookie carries a session: a plain gw_session (which a sibling subdomain can set) is not read', async (t) => {
  const origin = 'https://gw.example.test';
  const gw = await startOwnerGateway(t, { overrides: { owner: { publicOrigin: origin } } });
  await accountWithOwner(gw, { accountId: 'acct_attacker', email: 'attacker@example.com', password: PASSWORD });
  const res = await anonymous(gw).send('POST', '/session', { email: 'attacker@example.com', password: PASSWORD }, { origin });
  assert.equal(res.status, 200, show(res));
  const id = /^__Host-gw_session=([^;]+)/.exec(sessionCookie(res)!)![1]!;
  assert.equal((await call(`${gw.url}/owner/v1/session`, { headers: { cookie: `__Host-gw_session=${id}` } })).status, 200, 'the __Host- cookie works');
  // evil.example.test sets `gw_session=<the attacker's session>; Domain=example.test`: the
  // victim's browser, not signed in, would then act in the attacker's account (login CSRF).
  const planted = await call(`${gw.url}/owner/v1/session`, { headers: { cookie: `gw_session=${id}` } });
  assert.equal(planted.status, 401, show(planted));
  assert.equal(planted.body.message.code, 'session_required');
});

test('guessed admin tokens from many addresses do not lock the real admin token out', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { ...TRUSTED, limits: { mode: 'enforce' } } });
  const wrong = `gwadm_${'x'.repeat(43)}`;
  // One guess from each of many addresses: past failuresPerKey (50 an hour) if every admin
  // token counted as the same key.
  for (let i = 1; i <= 60; i++) {
    const res = await operator(gw, `${wrong}${i}`).get('/accounts', { 'x-forwarded-for': `198.51.100.${i}` });
    assert.equal(res.status, 401, `guess #${i}: ${show(res)}`);
  }
  const real = await operator(gw).get('/accounts', { 'x-forwarded-for': '203.0.113.7' });
  assert.equal(real.status, 200, `the operator still gets in: ${show(real)}`);
  // The guessing address itself is still stopped.
  let last = await operator(gw, wrong).get('/accounts', { 'x-forwarded-for': '198.51.100.1' });
  for (let i = 0; i < 30 && last.status === 401; i++) last = await operator(gw, wrong).get('/accounts', { 'x-forwarded-for': '198.51.100.1' });
  assert.equal(last.status, 429, `an address guessing on is locked out: ${show(last)}`);
  assert.ok(!gw.logs.some((line) => line.includes(ADMIN_TOKEN)), 'the admin token is never logged');
});

test('an operator at work is not a guesser: 100 calls with the right admin token from one address in a minute all answer, while a wrong one is still locked out', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { limits: { mode: 'enforce' } } });
  // The dashboard makes several calls a page; counted as sign-in attempts, the default 30 a
  // minute per address locked the operator out after a few pages.
  for (let i = 1; i <= 100; i++) {
    const res = await operator(gw).get('/accounts');
    assert.equal(res.status, 200, `call #${i}: ${show(res)}`);
  }
  let last = await operator(gw, `gwadm_${'y'.repeat(43)}`).get('/accounts');
  for (let i = 0; i < 40 && last.status === 401; i++) last = await operator(gw, `gwadm_${'y'.repeat(43)}`).get('/accounts');
  assert.equal(last.status, 429, `wrong tokens from the same address are still locked out: ${show(last)}`);
});

/** Gives an account `count` more keys and API settings tokens by hand, in its data file (the next change reads the file first). */
function hoardByHand(file: string, accountId: string, { keys = 0, tokens = 0, roles = 0 }: { keys?: number; tokens?: number; roles?: number }): void {
  const data = JSON.parse(readFileSync(file, 'utf8'));
  const account = data.accounts.find((a: { id: string }) => a.id === accountId);
  const hex = (prefix: string, i: number) => `sha256:${createHash('sha256').update(`${prefix}${i}`).digest('hex')}`;
  for (let i = 0; i < keys; i++) account.apiKeys.push({ id: `key_hoard_${i}`, apiKey: `ak_hoard_${i}`, secretDigest: hex('key', i) });
  const createdAt = new Date().toISOString();
  for (let i = 0; i < tokens; i++) account.settingsTokens.push({ id: `stk_hoard_${i}`, name: `t${i}`, digest: hex('token', i), start: 'gwst_hoar', createdAt });
  account.roles ??= [];
  for (let i = 0; i < roles; i++) account.roles.push({ id: 1000 + i, slug: `r${i}`, name: `Role ${i}`, description: '', public: false });
  writeFileSync(file, JSON.stringify(data));
}

test('an owner cannot grow an account without bound: keys, API settings tokens and roles are capped (the data file is rewritten whole at each change)', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_hoard', email: 'hoard@example.com', password: PASSWORD });
  hoardByHand(gw.services.config.data.file, 'acct_hoard', { keys: 999, tokens: 99 });
  const last = await owner.send('POST', '/accounts/acct_hoard/keys', { name: 'the thousandth' });
  assert.equal(last.status, 201, show(last));
  const key = await owner.send('POST', '/accounts/acct_hoard/keys', { name: 'one too many' });
  assert.equal(key.status, 409, show(key));
  assert.equal(key.body.message.code, 'conflict');

  const lastToken = await owner.send('POST', '/accounts/acct_hoard/settings-tokens', { name: 'the hundredth' });
  assert.equal(lastToken.status, 201, show(lastToken));
  const token = await owner.send('POST', '/accounts/acct_hoard/settings-tokens', { name: 'one too many' });
  assert.equal(token.status, 409, show(token));
  assert.equal(token.body.message.code, 'conflict');

  hoardByHand(gw.services.config.data.file, 'acct_hoard', { roles: 999 });
  const lastRole = await owner.send('POST', '/accounts/acct_hoard/roles', { id: 1, slug: 'the-thousandth', name: 'The thousandth', public: true });
  assert.equal(lastRole.status, 201, show(lastRole));
  const role = await owner.send('POST', '/accounts/acct_hoard/roles', { id: 2, slug: 'one-too-many', name: 'One too many', public: true });
  assert.equal(role.status, 409, show(role));
  assert.equal(role.body.message.code, 'conflict');
  const moved = await owner.send('PUT', '/accounts/acct_hoard/roles/1', { id: 3, slug: 'moved', name: 'Moved', public: true });
  assert.equal(moved.status, 200, `a replacement adds nothing: ${show(moved)}`);
});

test('names are one line of text: control characters, bidi overrides and lone surrogates are refused (400 naming the field)', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_names', email: 'names@example.com', password: PASSWORD });
  // An ESC sequence rewrites an operator's terminal (gatewayctl prints names), a newline or a
  // tab forges a row of its table, U+202E shows a name backwards, NUL cuts it in C tools, and a
  // lone surrogate does not survive UTF-8 (Redis would keep U+FFFD instead).
  for (const bad of ['\u001b]52;c;cm0gLXJmIH4=\u0007x', 'a\nkey_forged\tgwk_x', 'a\u0000b', 'invoice\u202Efdp.exe', '\ud800', 'x\u0085y']) {
    for (const [path, body, method] of [
      ['/accounts/acct_names/keys', { name: bad }, 'POST'],
      ['/accounts/acct_names/settings-tokens', { name: bad }, 'POST'],
      ['/accounts/acct_names', { name: bad }, 'PATCH'],
      ['/accounts/acct_names/roles', { id: 1, slug: 'r', name: bad, public: true }, 'POST'],
    ] as const) {
      const res = await owner.send(method, path, body);
      assert.equal(res.status, 400, `${method} ${path} ${JSON.stringify(bad)}: ${show(res)}`);
      assert.equal(res.body.message.field, 'name');
    }
  }
  const fine = await owner.send('POST', '/accounts/acct_names/keys', { name: 'Zürich 東京 👩‍💻 ci', description: 'two\nlines\tand a tab' });
  assert.equal(fine.status, 201, `letters of any script, emoji sequences; a description keeps its line breaks: ${show(fine)}`);
});

test('gatewayctl prints control characters of names it is given escaped, never raw to the operator\'s terminal', async (t) => {
  const gw = await startOwnerGateway(t);
  // Written before names were checked, or by hand: the file may hold any text.
  const file = gw.services.config.data.file;
  const data = JSON.parse(readFileSync(file, 'utf8'));
  const alice = data.accounts.find((a: { id: string }) => a.id === 'acct_alice');
  alice.name = 'Alice\u001b[2J\u001b]0;pwned\u0007';
  alice.apiKeys[0].name = 'ci\nkey_forged\tak_forged';
  writeFileSync(file, JSON.stringify(data));
  // A change reads the file first (the hand edit is then served).
  assert.equal((await operator(gw).send('POST', '/accounts', { id: 'acct_other', name: 'other' })).status, 201);
  const env = gatewayEnv({ GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN });
  for (const args of [['accounts', 'list'], ['keys', 'list', 'acct_alice']]) {
    const result = await runCommand(t, ['src/cli/gatewayctl.ts', '--url', gw.url, ...args], { env });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, args[0] === 'accounts' ? /Alice/ : /ci/);
    assert.doesNotMatch(result.stdout, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/, `no raw control character: ${JSON.stringify(result.stdout)}`);
    assert.ok(!result.stdout.split('\n').some((line) => line.startsWith('key_forged')), 'no forged row');
  }
});

test('a sign-in with the old password racing a password change gets no session that outlives the change', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_race', email: 'race@example.com', password: PASSWORD });
  // The sign-in reads the owner (old hash), then is held until the change is done: as if its
  // argon2 check had run while the change was written.
  const store = gw.services.ownerStore;
  const find = store.findOwnerByEmail.bind(store);
  let release!: () => void;
  const changed = new Promise<void>((resolve) => { release = resolve; });
  let held = false;
  store.findOwnerByEmail = async (email) => {
    const found = await find(email);
    if (!held) {
      held = true;
      await changed;
    }
    return found;
  };
  const racing = anonymous(gw).send('POST', '/session', { email: 'race@example.com', password: PASSWORD });
  while (!held) await new Promise((resolve) => setTimeout(resolve, 5));
  const change = await owner.send('POST', '/session/password', { currentPassword: PASSWORD, newPassword: 'the new passphrase, long enough' });
  assert.equal(change.status, 200, show(change));
  release();
  const res = await racing;
  assert.equal(res.status, 401, `whoever knew the old password is out: ${show(res)}`);
  assert.equal(sessionCookie(res), undefined, 'no session cookie');
});

test('a flood of well-formed but unknown API settings tokens does not push known ones out of the cache (each would cost a store read again)', async (t) => {
  const gw = await startOwnerGateway(t);
  const owner = await accountWithOwner(gw, { accountId: 'acct_cache', email: 'cache@example.com', password: PASSWORD });
  const made = await owner.send('POST', '/accounts/acct_cache/settings-tokens', { name: 'dashboard' });
  assert.equal(made.status, 201, show(made));
  const store = gw.services.ownerStore;
  let reads = 0;
  const counting = { ...pick(store), findSettingsToken: (digest: string) => { reads++; return store.findSettingsToken(digest); } };
  const authenticate = createSettingsTokenAuth({
    store: counting, revocations: gw.services.revocations, clock: gw.clock, log: silentLog,
    cacheTtlMs: 60_000, accessTokenTtlSeconds: 900, max: 50,
  });
  const token = made.body.message.token as string;
  await authenticate(token);
  assert.equal(reads, 1);
  // Anyone can make tokens with a valid checksum (CRC32 is no secret).
  for (let i = 0; i < 200; i++) await assert.rejects(authenticate(mintSettingsToken()), /unknown/);
  assert.equal(reads, 201);
  await authenticate(token);
  assert.equal(reads, 201, 'the known token is still cached');
});

function pick(store: OwnerStore): Pick<OwnerStore, 'findSettingsToken' | 'readAccount' | 'updateAccount' | 'readOnly'> {
  return {
    findSettingsToken: (digest) => store.findSettingsToken(digest),
    readAccount: (id) => store.readAccount(id),
    updateAccount: (id, change) => store.updateAccount(id, change),
    readOnly: store.readOnly,
  };
}

test('an unreadable client address from a trusted proxy (kept as "invalid:" and up to 64 characters of it) does not break the audit event of a change', async (t) => {
  // A client inside the trusted range (an internal dashboard user), or a proxy passing the header on as it came.
  const gw = await startOwnerGateway(t, { overrides: TRUSTED });
  const owner = await accountWithOwner(gw, { accountId: 'acct_xff', email: 'xff@example.com', password: PASSWORD });
  const res = await owner.send('POST', '/accounts/acct_xff/keys', { name: 'ci' }, { 'x-forwarded-for': 'y'.repeat(70) });
  assert.equal(res.status, 201, show(res));
  const audit = await owner.get('/accounts/acct_xff/audit?limit=1');
  assert.equal(audit.status, 200, show(audit));
  const [event] = audit.body.message.items;
  assert.equal(event.action, 'key.create');
  assert.ok(event.ip.startsWith('invalid:y') && event.ip.length <= 64, event.ip);
});

test('every listing reads `limit` as plain decimal digits: 1e2, 0x10, 5.0, +5 and " 5" are 400 naming limit', async (t) => {
  const gw = await startOwnerGateway(t);
  const op = operator(gw);
  for (const path of ['/accounts', '/accounts/acct_alice/keys', '/accounts/acct_alice/settings-tokens', '/accounts/acct_alice/members', '/accounts/acct_alice/invites', '/accounts/acct_alice/audit', '/accounts/acct_alice/roles']) {
    for (const limit of ['1e2', '0x10', '5.0', '+5', '%205', '0', '101']) {
      const res = await op.get(`${path}?limit=${limit}`);
      assert.equal(res.status, 400, `${path}?limit=${limit}: ${show(res)}`);
      assert.equal(res.body.message.field, 'limit', `${path}?limit=${limit}`);
    }
    assert.equal((await op.get(`${path}?limit=2`)).status, 200, path);
  }
});
