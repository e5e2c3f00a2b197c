/**
 * gatewayctl talking to a real gateway process over the owner API, with the admin token in the
 * environment: as an operator runs it (a process of its own) in the first two tests, which hold
 * its exit codes; in this process (runGatewayctl: what it writes and exits with) in the others,
 * where the dozens of commands a test runs would cost a process each. What it prints is what an operator hands on (the key and its secret, the
 * invite link, the settings token), so the tests use those printed values against the gateway.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { call, postJson } from '../helpers/gateway.js';
import { startBackend } from '../helpers/backend.js';
import { runGatewayctl } from '../../src/cli/gatewayctl.js';
import type { CommandRun } from '../../src/cli/redis.js';
import { gatewayEnv, ROOT, runCommand, startGatewayProcess, tempDir, type CommandResult, type GatewayProcess } from '../helpers/process.js';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** gatewayctl as a process of its own. */
function ctlProcess(t: TestContext, args: string[], env: Record<string, string> = {}): Promise<CommandResult> {
  return runCommand(t, ['src/cli/gatewayctl.ts', ...args], { env: gatewayEnv(env) });
}

/** gatewayctl in this process, with the environment its process would get. */
function ctl(_t: TestContext, args: string[], env: Record<string, string> = {}): Promise<CommandRun> {
  return runGatewayctl(args, gatewayEnv(env));
}

/** The command's --json answer, failing the test unless it exited 0. */
async function ctlJson(t: TestContext, gw: GatewayProcess, token: string, args: string[]): Promise<any> {
  const result = await ctl(t, ['--url', gw.url, '--json', ...args], { GATEWAY_ADMIN_TOKEN: token });
  assert.equal(result.code, 0, `gatewayctl ${args.join(' ')}: ${result.stderr}${result.stdout}`);
  return JSON.parse(result.stdout);
}

async function adminToken(t: TestContext): Promise<{ token: string; digest: string }> {
  const result = await ctl(t, ['admin-token', '--json']);
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout) as { token: string; digest: string };
}

async function adminTokenProcess(t: TestContext): Promise<{ token: string; digest: string }> {
  const result = await ctlProcess(t, ['admin-token', '--json']);
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout) as { token: string; digest: string };
}

/** A gateway on its own copy of the demo data file, accepting `digest`, with one proxied route. */
async function startGatewayFor(t: TestContext, digest: string, extra: Record<string, string> = {}): Promise<GatewayProcess> {
  const dir = tempDir(t);
  const file = join(dir, 'data.json');
  copyFileSync(join(ROOT, 'config/demo-data.json'), file);
  // The gateway outlives the dozens of gatewayctl commands a test runs: the default limit of a
  // child's life (30 s) is a hang guard that a busy machine could reach.
  return startGatewayProcess(t, { GATEWAY_DATA_FILE: file, OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([digest]), ...extra }, { limitMs: 240_000 });
}

test('admin-token (offline) prints a gwadm_ token of 43 base62 characters and the sha256: digest of the whole token', async (t) => {
  // Separate processes that share nothing: run at once.
  const [{ token, digest }, text] = await Promise.all([adminTokenProcess(t), ctlProcess(t, ['admin-token'])]);
  assert.match(token, /^gwadm_[0-9A-Za-z]{43}$/);
  assert.equal(digest, `sha256:${sha256(token)}`);
  assert.equal(text.code, 0);
  const printed = /Admin token: (gwadm_\w+)/.exec(text.stdout)?.[1];
  assert.ok(printed !== undefined && printed !== token, 'each run makes a new token');
  assert.ok(text.stdout.includes(`sha256:${sha256(printed)}`), 'the text names the digest to configure');
});

test('usage errors exit 2 without calling anything; a refusal or an unreachable gateway exits 1 and says why', async (t) => {
  // Each command is a process of its own that calls nothing (or nothing there): run at once,
  // with the gateway of the last check starting meanwhile.
  const usage = [['bogus'], ['accounts', 'create'], ['keys', 'list', 'bad id!'], ['settings-tokens', 'create', 'acct_a', '--name', 'x', '--expires-in', 'soon'], ['accounts', 'list', '--nope']];
  const [results, missing, unreachable, gw] = await Promise.all([
    Promise.all(usage.map((args) => ctlProcess(t, args, { GATEWAY_ADMIN_TOKEN: 'gwadm_x' }))),
    ctlProcess(t, ['accounts', 'list']),
    ctlProcess(t, ['--url', 'http://127.0.0.1:9', 'accounts', 'list'], { GATEWAY_ADMIN_TOKEN: 'gwadm_x' }),
    adminTokenProcess(t).then(({ digest }) => startGatewayFor(t, digest)),
  ]);
  usage.forEach((args, i) => {
    assert.equal(results[i]!.code, 2, `${args.join(' ')}: ${results[i]!.stderr}`);
    assert.match(results[i]!.stderr, /\S/);
  });
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /GATEWAY_ADMIN_TOKEN/);
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /cannot reach the gateway at http:\/\/127\.0\.0\.1:9/);

  const wrong = await ctlProcess(t, ['--url', gw.url, 'keys', 'list', 'acct_alice'], { GATEWAY_ADMIN_TOKEN: `gwadm_${'x'.repeat(43)}` });
  assert.equal(wrong.code, 1, wrong.stdout);
  assert.match(wrong.stderr, /answered 401 invalid_credentials/);
});

test('an operator sets up an account over the API: account, first owner, invite, key (used at /api/signin), settings token (used on a proxied route), resets, disable', async (t) => {
  const { token, digest } = await adminToken(t);
  const backend = await startBackend(t);
  const gw = await startGatewayFor(t, digest, { ROUTES: JSON.stringify([{ name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'required' }]) });

  const account = await ctlJson(t, gw, token, ['accounts', 'create', '--name', 'Acme Ltd']);
  assert.equal(account.name, 'Acme Ltd');
  assert.equal(account.enabled, true);
  const listed = await ctlJson(t, gw, token, ['accounts', 'list']);
  assert.ok(listed.some((a: { id: string }) => a.id === account.id), 'the new account is listed');
  const text = await ctl(t, ['--url', gw.url, 'accounts', 'list'], { GATEWAY_ADMIN_TOKEN: token });
  assert.match(text.stdout, new RegExp(`^${account.id}\\tAcme Ltd\\ttrue\\t`, 'm'), 'the text listing is one row per account');

  const owner = await ctlJson(t, gw, token, ['owners', 'add', account.id, '--email', 'Founder@Example.com']);
  assert.equal(owner.email, 'founder@example.com');
  assert.ok(owner.initialPassword.length >= 15, 'a generated initial password of the documented length');
  const signIn = await postJson(`${gw.url}/owner/v1/session`, { email: 'founder@example.com', password: owner.initialPassword });
  assert.equal(signIn.status, 200, JSON.stringify(signIn.body));
  assert.equal(signIn.body.message.owner.mustChangePassword, true);

  const invite = await ctlJson(t, gw, token, ['invites', 'create', account.id, '--email', 'second@example.com']);
  assert.match(invite.token, /^gwinv_[0-9A-Za-z]{43}$/);
  assert.ok(invite.url.endsWith(`/owner/invite#${invite.token}`), invite.url);

  const key = await ctlJson(t, gw, token, ['keys', 'create', account.id, '--name', 'ci', '--scope', 'read']);
  assert.match(key.key.apiKey, /^gwk_[0-9A-Za-z]{24}$/);
  assert.match(key.apiSecret, /^gwsk_[0-9A-Za-z]{43}$/);
  const pair = await postJson(`${gw.url}/api/signin`, { apiKey: key.key.apiKey, apiSecret: sha256(key.apiSecret) });
  assert.equal(pair.status, 200, `the printed key signs in: ${JSON.stringify(pair.body)}`);
  const keys = await ctlJson(t, gw, token, ['keys', 'list', account.id]);
  assert.deepEqual(keys.map((k: { id: string }) => k.id), [key.key.id]);
  assert.ok(!JSON.stringify(keys).includes(key.apiSecret), 'the listing never shows the secret');

  const settings = await ctlJson(t, gw, token, ['settings-tokens', 'create', account.id, '--name', 'dashboard', '--expires-in', '3600']);
  assert.match(settings.token, /^gwst_[0-9A-Za-z]{49}$/);
  const proxied = await call(`${gw.url}/echo/hello`, { token: settings.token });
  assert.equal(proxied.status, 200, `the settings token is accepted on a proxied route: ${JSON.stringify(proxied.body)}`);

  const keyReset = await ctlJson(t, gw, token, ['reset', account.id, '--key', key.key.id]);
  assert.deepEqual([keyReset.scope, keyReset.keyId], ['key', key.key.id]);
  assert.equal((await call(`${gw.url}/api/roles`, { token: pair.body.message.accessToken })).status, 401, 'the key reset refuses its access token');
  const accountReset = await ctlJson(t, gw, token, ['reset', account.id]);
  assert.equal(accountReset.scope, 'account');
  assert.equal((await call(`${gw.url}/echo/hello`, { token: settings.token })).status, 401, 'the account reset revokes its settings tokens');

  const disabled = await ctlJson(t, gw, token, ['accounts', 'disable', account.id]);
  assert.equal(disabled.enabled, false);
  const refused = await postJson(`${gw.url}/api/signin`, { apiKey: key.key.apiKey, apiSecret: sha256(key.apiSecret) });
  assert.equal(refused.status, 401, 'a disabled account\'s keys no longer sign in');
});

test('the rest of the owner API from the command line: keys roll, reset, bind, unbind, disable, enable, revoke; settings tokens list and revoke; roles; sign records; audit; usage', async (t) => {
  const { token, digest } = await adminToken(t);
  const backend = await startBackend(t);
  const gw = await startGatewayFor(t, digest, { ROUTES: JSON.stringify([{ name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'required' }]), USAGE_FLUSH_INTERVAL_MS: '100' });
  const run = (args: string[]) => ctlJson(t, gw, token, args);
  const signIn = (apiKey: string, secret: string) => postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: sha256(secret) });

  // Keys: roll with an overlap (both secrets sign in), reset, disable and enable, revoke.
  const key = await run(['keys', 'create', 'acct_bob', '--name', 'rolled']);
  const rolled = await run(['keys', 'roll', 'acct_bob', key.key.id, '--overlap', '600']);
  assert.notEqual(rolled.apiSecret, key.apiSecret);
  assert.ok(rolled.key.previousValidUntil !== undefined, 'the old secret has an end');
  assert.equal((await signIn(key.key.apiKey, rolled.apiSecret)).status, 200, 'the new secret signs in');
  const old = await signIn(key.key.apiKey, key.apiSecret);
  assert.equal(old.status, 200, 'the old one too, during the overlap');
  const reset = await run(['keys', 'reset', 'acct_bob', key.key.id]);
  assert.deepEqual([reset.scope, reset.keyId], ['key', key.key.id]);
  assert.equal((await call(`${gw.url}/api/roles`, { token: old.body.message.accessToken })).status, 401, 'the reset refuses the key\'s tokens');
  assert.equal((await run(['keys', 'disable', 'acct_bob', key.key.id])).enabled, false);
  assert.equal((await signIn(key.key.apiKey, rolled.apiSecret)).status, 401, 'a disabled key does not sign in');
  assert.equal((await run(['keys', 'enable', 'acct_bob', key.key.id])).enabled, true);
  assert.equal((await signIn(key.key.apiKey, rolled.apiSecret)).status, 200, 'enabled again, it does');
  // Bound to a client certificate (docs/tls.md): this gateway speaks plain HTTP, so no connection presents one.
  const fingerprint = `${'AB:'.repeat(31)}CD`;
  assert.equal((await run(['keys', 'bind', 'acct_bob', key.key.id, '--certificate-sha256', fingerprint])).certificateSha256, `${'ab'.repeat(31)}cd`);
  const bound = await signIn(key.key.apiKey, rolled.apiSecret);
  assert.deepEqual([bound.status, bound.body.message.code], [401, 'client_certificate_required']);
  assert.equal((await run(['keys', 'unbind', 'acct_bob', key.key.id])).certificateSha256, undefined);
  assert.equal((await signIn(key.key.apiKey, rolled.apiSecret)).status, 200, 'unbound, it signs in again');
  const createdBound = await run(['keys', 'create', 'acct_bob', '--name', 'bound', '--certificate-sha256', 'ef'.repeat(32)]);
  assert.equal(createdBound.key.certificateSha256, 'ef'.repeat(32));
  assert.deepEqual(await run(['keys', 'revoke', 'acct_bob', key.key.id]), { id: key.key.id, deleted: true });
  assert.equal((await signIn(key.key.apiKey, rolled.apiSecret)).status, 401, 'a revoked key does not sign in');

  // Settings tokens: listed (never the token), revoked.
  const settings = await run(['settings-tokens', 'create', 'acct_bob', '--name', 'ci']);
  const listed = await run(['settings-tokens', 'list', 'acct_bob']);
  assert.deepEqual(listed.map((s: { id: string; status: string }) => [s.id, s.status]), [[settings.settingsToken.id, 'active']]);
  assert.ok(!JSON.stringify(listed).includes(settings.token), 'the listing never shows the token');
  assert.equal((await call(`${gw.url}/echo/x`, { token: settings.token })).status, 200);
  assert.equal((await run(['settings-tokens', 'revoke', 'acct_bob', settings.settingsToken.id])).status, 'revoked');
  assert.equal((await call(`${gw.url}/echo/x`, { token: settings.token })).status, 401, 'a revoked settings token is refused');

  // Roles: created, listed, deleted; /api/roles follows.
  const bob = await signIn('ak_demo_bob', 'sk_demo_bob_secret');
  const before = await run(['roles', 'list', 'acct_bob']);
  const role = await run(['roles', 'create', 'acct_bob', '--id', '77', '--slug', 'auditor', '--name', 'Auditor', '--public']);
  assert.deepEqual(role, { id: 77, slug: 'auditor', name: 'Auditor', description: '', public: true });
  assert.deepEqual((await run(['roles', 'list', 'acct_bob'])).map((r: { id: number }) => r.id), [77, ...before.map((r: { id: number }) => r.id)].sort((a, b) => a - b), 'listed in id order');
  assert.match(JSON.stringify((await call(`${gw.url}/api/roles`, { token: bob.body.message.accessToken })).body), /"auditor"/);
  assert.deepEqual(await run(['roles', 'delete', 'acct_bob', '77']), { id: 77, deleted: true });
  assert.equal((await run(['roles', 'list', 'acct_bob'])).length, before.length);

  // Sign records: created, read, replaced, deleted; /api/sign follows.
  const address = '0x00000000000000000000000000000000000000aa';
  const times = ['--signed-at', '2026-05-01T00:00:00Z', '--expires-at', '2026-06-01T00:00:00Z'];
  assert.equal((await run(['sign-records', 'create', 'acct_bob', address, '--nonce', '5', ...times])).signedNonce, 5);
  assert.equal((await run(['sign-records', 'replace', 'acct_bob', address, '--nonce', '6', ...times])).signedNonce, 6);
  assert.equal((await run(['sign-records', 'get', 'acct_bob', address])).signedNonce, 6);
  const served = await call(`${gw.url}/api/sign?address=${address}`, { token: bob.body.message.accessToken });
  assert.equal(served.body.message.signedNonce, 6, '/api/sign serves the replaced record');
  assert.deepEqual(await run(['sign-records', 'delete', 'acct_bob', address]), { address, deleted: true });
  assert.equal((await call(`${gw.url}/api/sign?address=${address}`, { token: bob.body.message.accessToken })).status, 404);

  // Audit: newest first, what was done above, by the operator.
  const audit = await run(['audit', 'acct_bob', '--limit', '3']);
  assert.deepEqual(audit.map((e: { action: string }) => e.action), ['sign_record.delete', 'sign_record.update', 'sign_record.create']);
  assert.ok(audit.every((e: { actor: { type: string } }) => e.actor.type === 'operator'));
  const auditText = await ctl(t, ['--url', gw.url, 'audit', 'acct_bob', '--limit', '1'], { GATEWAY_ADMIN_TOKEN: token });
  assert.match(auditText.stdout, /^at\taction\tactor\ttarget\tip\n\S+\tsign_record\.delete\toperator\tsign_record:0x0+aa\t/);

  // Usage: bob's key's calls, counted and flushed.
  await call(`${gw.url}/api/roles`, { token: bob.body.message.accessToken });
  let usage: { items: Array<{ keyId: string; requests: number }> };
  do usage = await run(['usage', 'acct_bob', '--hours', '1']);
  while (!usage.items.some((i) => i.keyId === 'key_bob_1' && i.requests >= 1));
  const usageText = await ctl(t, ['--url', gw.url, 'usage', 'acct_bob'], { GATEWAY_ADMIN_TOKEN: token });
  assert.match(usageText.stdout, /^keyId\trequests\trateLimited\t1xx\t2xx\t3xx\t4xx\t5xx$/m);
  const [, requests, ...classes] = /^key_bob_1\t(\d+)\t0\t(\d+)\t(\d+)\t(\d+)\t(\d+)\t(\d+)$/m.exec(usageText.stdout) ?? [];
  assert.ok(requests !== undefined, usageText.stdout);
  assert.equal(classes.reduce((n, c) => n + Number(c), 0), Number(requests), 'its calls by class of status, as many as its calls');
  const month = await run(['usage', 'acct_bob', '--days', '30', '--key', 'key_bob_1']);
  assert.equal(month.series.length, 31, 'a step per UTC day, today last');
  assert.deepEqual(month.items.map((i: { keyId: string }) => i.keyId), ['key_bob_1']);

  // Usage errors change nothing: their processes run at once.
  const usageErrors = [['keys', 'roll', 'acct_bob', 'key_bob_1'], ['keys', 'roll', 'acct_bob', 'key_bob_1', '--overlap', '-1'], ['roles', 'create', 'acct_bob', '--id', 'x', '--slug', 's', '--name', 'n'], ['sign-records', 'get', 'acct_bob', '0x12'], ['usage', 'acct_bob', '--hours', '25'], ['usage', 'acct_bob', '--days', '31'], ['usage', 'acct_bob', '--days', '7', '--hours', '3'], ['audit', 'acct_bob', '--limit', '0']];
  const [results, badSlug, badTime] = await Promise.all([
    Promise.all(usageErrors.map((args) => ctl(t, ['--url', gw.url, ...args], { GATEWAY_ADMIN_TOKEN: token }))),
    // Checked against the operation's own schema before anything is sent, naming the field.
    ctl(t, ['--url', gw.url, 'roles', 'create', 'acct_bob', '--id', '5', '--slug', 'Not A Slug', '--name', 'n'], { GATEWAY_ADMIN_TOKEN: token }),
    ctl(t, ['--url', gw.url, 'sign-records', 'create', 'acct_bob', '0x00000000000000000000000000000000000000bb', '--nonce', '1', '--signed-at', 'yesterday', '--expires-at', '2026-06-01T00:00:00Z'], { GATEWAY_ADMIN_TOKEN: token }),
  ]);
  usageErrors.forEach((args, i) => assert.equal(results[i]!.code, 2, `${args.join(' ')} is a usage error: ${results[i]!.stderr}`));
  assert.equal(badSlug.code, 2, badSlug.stderr);
  assert.match(badSlug.stderr, /^option slug: expected 1 to 256 of a-z/m);
  assert.equal(badTime.code, 2, badTime.stderr);
  assert.match(badTime.stderr, /^option signedAt: /m);
});
