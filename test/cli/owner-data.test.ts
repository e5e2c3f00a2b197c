/**
 * `gatewayctl migrate`, `export` and `import` as an operator runs them: real processes against
 * a real redis-server, and a gateway started on that Redis (keys, roles, sign records and
 * owners from Redis, its own data file empty) to show that what was copied is what it serves.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { mintSettingsToken, settingsTokenDigest } from '../../src/domain/settings-token.js';
import { startBackend } from '../helpers/backend.js';
import { call, postJson } from '../helpers/gateway.js';
import { gatewayEnv, ROOT, runCommand, startGatewayProcess, tempDir, type CommandResult } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

interface Setup {
  dir: string;
  file: string;
  env: Record<string, string>;
  settingsToken: string;
}

/**
 * The demo data with one of every kind of record the owner API writes: a settings token, an
 * invite, audit events, and an owner who belongs to no account.
 */
function writeDataFile(t: TestContext): Omit<Setup, 'env'> {
  const dir = tempDir(t);
  const file = join(dir, 'data.json');
  const data = JSON.parse(readFileSync(join(ROOT, 'config/demo-data.json'), 'utf8'));
  const alice = data.accounts.find((a: { id: string }) => a.id === 'acct_alice');
  const settingsToken = mintSettingsToken();
  alice.settingsTokens = [{ id: 'stk_migrated', name: 'migrated', digest: settingsTokenDigest(settingsToken), start: settingsToken.slice(0, 9), scopes: [], createdAt: '2026-01-02T03:04:05.000Z' }];
  alice.invites = [{ id: 'inv_migrated', email: 'dave@demo.example', digest: `sha256:${sha256('invite')}`, createdAt: '2026-01-02T03:04:05.000Z', expiresAt: '2026-01-09T03:04:05.000Z' }];
  alice.audit = [
    { id: 'evt_1767323045000_a', at: '2026-01-02T03:04:05.000Z', action: 'key.create', actor: { type: 'operator' }, target: { type: 'key', id: 'key_alice_1' } },
    { id: 'evt_1767323046000_b', at: '2026-01-02T03:04:06.000Z', action: 'role.update', actor: { type: 'owner', id: 'own_alice' }, target: { type: 'role', id: '1' }, changes: { name: ['Admin', 'Administrator'] } },
  ];
  // Sign record times with an offset: stored in UTC, compared as the same instant.
  alice.signRecords[0].signedAt = '2026-03-01T14:00:00+02:00';
  data.owners.push({ ...data.owners[0], id: 'own_carol', email: 'carol@demo.example' });
  writeFileSync(file, JSON.stringify(data, null, 2));
  return { dir, file, settingsToken };
}

async function setUp(t: TestContext): Promise<Setup> {
  const redis = await startRedis(t);
  const written = writeDataFile(t);
  return { ...written, env: { REDIS_URL: redis.url, REDIS_KEY_PREFIX: `mig${process.pid}`, GATEWAY_DATA_FILE: written.file } };
}

function ctl(t: TestContext, args: string[], env: Record<string, string>): Promise<CommandResult> {
  return runCommand(t, ['src/cli/gatewayctl.ts', ...args], { env: gatewayEnv(env) });
}

/** The record lines of an export: everything but its header, which names the source and time. */
function records(exported: string): string[] {
  const lines = exported.trim().split('\n');
  assert.equal(JSON.parse(lines[0]!).type, 'header');
  return lines.slice(1);
}

async function exportFrom(t: TestContext, from: 'file' | 'redis', env: Record<string, string>): Promise<string> {
  const result = await ctl(t, ['export', '--from', from], env);
  assert.equal(result.code, 0, `export --from ${from}: ${result.stderr}`);
  return result.stdout;
}

test('migrate copies every record of the data file into Redis, verified; a gateway on Redis serves them all; a second run writes nothing', redisSuite(), async (t) => {
  const { dir, env, settingsToken } = await setUp(t);
  const first = await ctl(t, ['migrate'], env);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /^Copied 3 owners and 2 accounts from the data file .* to Redis/m);
  assert.match(first.stdout, /Verified: 3 owners, 2 accounts, 3 keys, 1 settings tokens, 2 members, 1 invites, 14 roles, 3 sign records, 2 audit events; digest sha256:[0-9a-f]{64}\./);

  const second = await ctl(t, ['migrate'], env);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, /^Nothing to do: Redis already holds every owner and account/m);
  const seeded = await ctl(t, ['migrate', '--if-empty'], env);
  assert.equal(seeded.code, 0, seeded.stderr);
  assert.match(seeded.stdout, /Redis already holds accounts: nothing copied/);

  assert.deepEqual(records(await exportFrom(t, 'redis', env)), records(await exportFrom(t, 'file', env)), 'Redis exports exactly what the data file does');

  // Everything Redis serves, with the gateway's own data file empty.
  const empty = join(dir, 'empty.json');
  writeFileSync(empty, '{"accounts": []}');
  const admin = `gwadm_${'a'.repeat(43)}`;
  const backend = await startBackend(t);
  const gw = await startGatewayProcess(t, {
    ...env, GATEWAY_DATA_FILE: empty, KEY_SOURCE: 'redis', DIRECTORY_STORE: 'redis',
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([`sha256:${sha256(admin)}`]),
    ROUTES: JSON.stringify([{ name: 'echo', prefix: '/echo', targets: [backend.url], auth: 'required' }]),
  });
  const pair = await postJson(`${gw.url}/api/signin`, { apiKey: 'ak_demo_alice', apiSecret: sha256('sk_demo_alice_secret') });
  assert.equal(pair.status, 200, `a migrated key signs in: ${JSON.stringify(pair.body)}`);
  const disabled = await postJson(`${gw.url}/api/signin`, { apiKey: 'ak_demo_alice_disabled', apiSecret: sha256('sk_demo_alice_disabled_secret') });
  assert.equal(disabled.status, 401, 'a disabled key stays disabled');
  const roles = await call(`${gw.url}/api/roles`, { token: pair.body.message.accessToken });
  assert.equal(roles.status, 200, JSON.stringify(roles.body));
  assert.match(JSON.stringify(roles.body), /"slug":"admin"/, 'the migrated roles are listed');
  const sign = await call(`${gw.url}/api/sign?address=0x52908400098527886E0F7030069857D2E4169EE7`, { token: pair.body.message.accessToken });
  assert.equal(sign.status, 200, `the migrated sign record is served: ${JSON.stringify(sign.body)}`);
  assert.equal(sign.body.message.signedNonce, 42);
  assert.equal((await call(`${gw.url}/echo/x`, { token: settingsToken })).status, 200, 'the migrated settings token is accepted');
  for (const [email, password] of [['alice@demo.example', 'alice demo passphrase'], ['carol@demo.example', 'alice demo passphrase']]) {
    const session = await postJson(`${gw.url}/owner/v1/session`, { email, password });
    assert.equal(session.status, 200, `${email} signs in to the owner API: ${JSON.stringify(session.body)}`);
  }
  const ctlEnv = { ...env, GATEWAY_ADMIN_TOKEN: admin };
  const audit = await ctl(t, ['--url', gw.url, '--json', 'audit', 'acct_alice'], ctlEnv);
  assert.equal(audit.code, 0, audit.stderr);
  assert.deepEqual(JSON.parse(audit.stdout).map((e: { id: string }) => e.id), ['evt_1767323046000_b', 'evt_1767323045000_a'], 'the audit events, newest first');

});

test('migrate refuses, writing nothing, when Redis holds an account otherwise (changed since); --force makes it the file\'s', redisSuite(), async (t) => {
  const { dir, env } = await setUp(t);
  assert.equal((await ctl(t, ['migrate'], env)).code, 0);
  const admin = `gwadm_${'b'.repeat(43)}`;
  const empty = join(dir, 'empty.json');
  writeFileSync(empty, '{"accounts": []}');
  const gw = await startGatewayProcess(t, { ...env, GATEWAY_DATA_FILE: empty, KEY_SOURCE: 'redis', DIRECTORY_STORE: 'redis', OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([`sha256:${sha256(admin)}`]) });
  const created = await ctl(t, ['--url', gw.url, '--json', 'keys', 'create', 'acct_alice', '--name', 'made in redis'], { GATEWAY_ADMIN_TOKEN: admin });
  assert.equal(created.code, 0, created.stderr);
  const key = JSON.parse(created.stdout);
  const signIn = () => postJson(`${gw.url}/api/signin`, { apiKey: key.key.apiKey, apiSecret: sha256(key.apiSecret) });
  assert.equal((await signIn()).status, 200);

  const refused = await ctl(t, ['migrate'], env);
  assert.equal(refused.code, 1, refused.stdout);
  assert.match(refused.stderr, /refused, nothing written/);
  assert.match(refused.stderr, /account acct_alice differs in Redis, with newer changes there/);
  assert.match(refused.stderr, /--force/);
  assert.doesNotMatch(refused.stderr, /acct_bob/, 'only the account that differs is named');
  assert.equal((await signIn()).status, 200, 'nothing was written: the key made in Redis still signs in');

  const forced = await ctl(t, ['migrate', '--force'], env);
  assert.equal(forced.code, 0, forced.stderr);
  assert.match(forced.stdout, /^Copied 0 owners and 1 accounts/m);
  assert.equal((await signIn()).status, 401, 'the file\'s version replaced Redis\'s: the key it lacks is gone');
  const again = await ctl(t, ['migrate'], env);
  assert.equal(again.code, 1, 'the audit stream keeps Redis\'s own events, so the account still differs from the file');
});

test('export and import: JSON lines from either store, round trip equal, idempotent, refusing cut or edited exports and newer data', redisSuite(), async (t) => {
  const { dir, env } = await setUp(t);
  const fromFile = await exportFrom(t, 'file', env);
  const lines = fromFile.trim().split('\n');
  assert.ok(lines.every((line) => typeof JSON.parse(line).type === 'string'), 'one JSON record a line, each with a type');
  assert.deepEqual(new Set(lines.map((line) => JSON.parse(line).type)), new Set(['header', 'owner', 'account', 'member', 'invite', 'key', 'settingsToken', 'role', 'signRecord', 'audit', 'end']));
  const backup = join(dir, 'backup.jsonl');
  writeFileSync(backup, fromFile);

  const imported = await ctl(t, ['import', '--to', 'redis', backup], env);
  assert.equal(imported.code, 0, imported.stderr);
  assert.match(imported.stdout, /^Copied 3 owners and 2 accounts/m);
  assert.deepEqual(records(await exportFrom(t, 'redis', env)), records(fromFile), 'file → export → Redis → export: equal');
  const twice = await ctl(t, ['import', '--to', 'redis', backup], env);
  assert.equal(twice.code, 0, twice.stderr);
  assert.match(twice.stdout, /^Nothing to do/m);

  // Into a new data file, from Redis's export.
  const restoredFile = join(dir, 'restored.json');
  const redisBackup = join(dir, 'redis.jsonl');
  writeFileSync(redisBackup, await exportFrom(t, 'redis', env));
  const toFile = await ctl(t, ['import', '--to', 'file', '--file', restoredFile, redisBackup], env);
  assert.equal(toFile.code, 0, toFile.stderr);
  assert.deepEqual(records(await exportFrom(t, 'file', { ...env, GATEWAY_DATA_FILE: restoredFile })), records(fromFile), 'Redis → export → data file: equal');

  // An export cut short, or with a record changed, is refused before anything is written.
  const cut = join(dir, 'cut.jsonl');
  writeFileSync(cut, lines.slice(0, -3).join('\n'));
  const cutResult = await ctl(t, ['import', '--to', 'file', '--file', join(dir, 'never.json'), cut], env);
  assert.equal(cutResult.code, 1);
  assert.match(cutResult.stderr, /cut short/);
  const edited = join(dir, 'edited.jsonl');
  writeFileSync(edited, fromFile.replace('"Administrator"', '"Owner"'));
  const editedResult = await ctl(t, ['import', '--to', 'redis', edited], env);
  assert.equal(editedResult.code, 1);
  assert.match(editedResult.stderr, /do not match its end line/);

  // The data file changed since the backup: importing the backup into it is refused.
  const data = JSON.parse(readFileSync(restoredFile, 'utf8'));
  data.accounts[0].name = 'Renamed since';
  writeFileSync(restoredFile, JSON.stringify(data));
  const newer = await ctl(t, ['import', '--to', 'file', '--file', restoredFile, backup], env);
  assert.equal(newer.code, 1, newer.stdout);
  assert.match(newer.stderr, /refused, nothing written: the data file .* holds different data/);
  assert.equal(JSON.parse(readFileSync(restoredFile, 'utf8')).accounts[0].name, 'Renamed since', 'the file is unchanged');
  const usage = await ctl(t, ['import', '--to', 'somewhere', backup], env);
  assert.equal(usage.code, 2, 'a target other than file or redis is a usage error');
});
