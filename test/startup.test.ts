/**
 * The real process: `node --import tsx src/main.ts` (and the key CLI) started as an operator
 * would, read through its stdout JSON lines, stderr and exit code. Every child has a time
 * limit and is killed in t.after, so a hung process fails its test instead of the run.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { decodeJwt } from 'jose';
import { SECRET_DIGEST_PATTERN } from '../src/domain/secrets.js';
import { postJson, sha256Hex, startGateway, storedDigest } from './helpers/gateway.js';
import { LISTENING, ROOT, exitWithin, gatewayEnv, logLines, startGatewayProcess, startNode, tempDir, waitForLog, type Child } from './helpers/process.js';

const STACK_FRAME = /^\s+at /m;

test('the gateway process starts, serves and stops on SIGTERM', async (t) => {
  const gateway = startNode(t, ['src/main.ts'], { env: gatewayEnv({ PORT: '0', HOST: '127.0.0.1' }) });
  const listening = await waitForLog(gateway, LISTENING);

  const url = listening.url as string;
  const match = /^http:\/\/127\.0\.0\.1:(\d+)$/.exec(url);
  assert.ok(match, url);
  assert.ok(Number(match[1]) > 0, 'PORT=0 picked a real port');

  const warnings = logLines(gateway).filter((line) => line.level === 40);
  assert.equal(warnings.length, 1, JSON.stringify(warnings));
  assert.match(String(warnings[0]!.msg), /\bsigning\.keys\b/, 'the warning names the setting that would make the key last');

  const health = await fetch(`${url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { success: true, message: { status: 'ok' } });

  // The dashboard is on by default, and the listening line says where.
  assert.equal(listening.dashboard, `${url}/dashboard/`);
  const dashboard = await fetch(listening.dashboard as string);
  assert.equal(dashboard.status, 200);
  assert.match(dashboard.headers.get('content-type') ?? '', /^text\/html/);

  const jwks = await fetch(`${url}/.well-known/jwks.json`);
  assert.equal(jwks.status, 200);
  const { keys } = await jwks.json() as { keys: { kid: string; alg: string }[] };
  assert.equal(keys.length, 1);
  assert.equal(keys[0]!.alg, 'EdDSA');
  assert.match(keys[0]!.kid, /^ephemeral-/);

  assert.ok(gateway.process.kill('SIGTERM'));
  assert.deepEqual(await exitWithin(gateway), { code: 0, signal: null });
  assert.doesNotMatch(gateway.stderr(), STACK_FRAME);
});

/** Runs main.ts with `env`, expecting a non-zero exit before it listens, whose stderr names each of `fields`. */
async function expectRefusal(t: TestContext, env: Record<string, string>, fields: string[]): Promise<void> {
  const gateway = startNode(t, ['src/main.ts'], { env: gatewayEnv({ PORT: '0', HOST: '127.0.0.1', ...env }) });
  const exit = await exitWithin(gateway);
  assert.equal(exit.signal, null);
  assert.ok(exit.code !== null && exit.code !== 0, `exit code ${exit.code}`);
  const stderr = gateway.stderr();
  for (const field of fields) assert.ok(stderr.includes(field), `stderr names ${field}:\n${stderr}`);
  assert.doesNotMatch(stderr, STACK_FRAME, 'no stack trace');
  assert.deepEqual(logLines(gateway).filter(LISTENING), [], 'it never listened');
}

test('a bad configuration stops the process before it listens', async (t) => {
  await t.test('PORT=abc', async (t) => {
    await expectRefusal(t, { PORT: 'abc' }, ['server.port', 'PORT']);
  });

  await t.test('an unknown key in the GATEWAY_CONFIG file', async (t) => {
    const file = join(tempDir(t), 'gateway.json');
    writeFileSync(file, JSON.stringify({ server: { prot: 1 } }));
    await expectRefusal(t, { GATEWAY_CONFIG: file }, ['server', 'prot']);
  });

  await t.test('a data file with a malformed secretDigest', async (t) => {
    const file = join(tempDir(t), 'data.json');
    writeFileSync(file, JSON.stringify({
      accounts: [{ id: 'acct_x', apiKeys: [{ id: 'key_x', apiKey: 'ak_test_key_x', secretDigest: 'sha256:not-hex' }] }],
    }));
    await expectRefusal(t, { GATEWAY_DATA_FILE: file }, ['accounts.0.apiKeys.0.secretDigest']);
  });
});

test('the key CLI', async (t) => {
  await t.test('prints a data-file entry whose secret signs in', async (t) => {
    const cli = startNode(t, ['src/cli/create-key.ts', '--account', 'acct_x']);
    assert.deepEqual(await exitWithin(cli), { code: 0, signal: null }, cli.stderr());
    const out = cli.stdout();
    const entryLine = out.split('\n').filter((line) => line.startsWith('{'));
    assert.equal(entryLine.length, 1, out);
    const entry = JSON.parse(entryLine[0]!) as { id: string; apiKey: string; secretDigest: string };
    assert.deepEqual(Object.keys(entry).sort(), ['apiKey', 'id', 'secretDigest']);
    assert.match(entry.secretDigest, SECRET_DIGEST_PATTERN);
    assert.equal(/^API key: +(\S+)$/m.exec(out)?.[1], entry.apiKey);
    const secret = /^API secret: +(\S+)$/m.exec(out)?.[1];
    assert.ok(secret !== undefined, out);
    assert.ok(out.includes(sha256Hex(secret)), 'the SHA-256 a client sends is printed');

    const dir = tempDir(t);
    const file = join(dir, 'data.json');
    writeFileSync(file, JSON.stringify({ accounts: [{ id: 'acct_x', apiKeys: [entry] }] }));
    const gw = await startGateway(t, { overrides: { data: { file } } });

    const res = await postJson(`${gw.url}/api/signin`, { apiKey: entry.apiKey, apiSecret: sha256Hex(secret) });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const claims = decodeJwt(res.body.message.accessToken);
    assert.equal(claims.sub, 'acct_x');
    assert.equal(claims.client_id, entry.id);

    const wrong = await postJson(`${gw.url}/api/signin`, { apiKey: entry.apiKey, apiSecret: sha256Hex(`${secret}x`) });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.message.code, 'invalid_credentials');
  });

  await t.test('--key-id names the key', async (t) => {
    const cli = startNode(t, ['src/cli/create-key.ts', '--account', 'acct_x', '--key-id', 'key_custom']);
    assert.deepEqual(await exitWithin(cli), { code: 0, signal: null }, cli.stderr());
    const entryLine = cli.stdout().split('\n').find((line) => line.startsWith('{'));
    assert.equal((JSON.parse(entryLine ?? '{}') as { id?: string }).id, 'key_custom');
  });

  await t.test('without --account it prints usage to stderr and exits 2', async (t) => {
    const cli = startNode(t, ['src/cli/create-key.ts']);
    assert.deepEqual(await exitWithin(cli), { code: 2, signal: null });
    assert.equal(cli.stdout(), '');
    assert.match(cli.stderr(), /--account/);
  });

  await t.test('an unknown option exits 2', async (t) => {
    const cli = startNode(t, ['src/cli/create-key.ts', '--acount', 'acct_x']);
    assert.deepEqual(await exitWithin(cli), { code: 2, signal: null });
    assert.equal(cli.stdout(), '');
  });

  await t.test('works from a checkout whose path contains a space', async (t) => {
    // The entry-point check compares import.meta.url with "file://" + argv[1]; a URL
    // percent-encodes the space, so the two differ unless argv[1] is converted properly.
    const checkout = join(tempDir(t), 'my gateway');
    mkdirSync(checkout);
    cpSync(join(ROOT, 'src'), join(checkout, 'src'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(checkout, 'package.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(checkout, 'node_modules'), 'dir');
    const cli = startNode(t, ['src/cli/create-key.ts', '--account', 'acct_x'], { cwd: checkout });
    assert.deepEqual(await exitWithin(cli), { code: 0, signal: null }, cli.stderr());
    assert.match(cli.stdout(), /^\{"id":"key_[^"]+","apiKey":"ak_[^"]+","secretDigest":"sha256:[0-9a-f]{64}"\}$/m);
  });
});

test('under NODE_ENV=production the demo data is refused unless allowed explicitly', async (t) => {
  // The Docker image sets NODE_ENV=production and HOST=0.0.0.0: a plain `docker run` must not
  // serve API keys whose secrets the README prints.
  const demoWarnings = (child: Child) => logLines(child).filter((line) => line.level === 40 && /demo/i.test(String(line.msg)));
  // What to do instead: the setting that names a data file, how to make and import keys, the opt-in.
  const expectDemoRefusal = (t: TestContext, env: Record<string, string>) =>
    expectRefusal(t, { NODE_ENV: 'production', ...env }, ['GATEWAY_DATA_FILE', 'keys:create', 'ctl -- migrate', 'gatewayctl.js migrate', 'ALLOW_DEMO_DATA']);

  await t.test('no data file given: the shipped demo file is refused before listening', async (t) => {
    await expectDemoRefusal(t, {});
  });

  await t.test('a copy of the demo file elsewhere, or a real file with one demo key in it, is refused too', async (t) => {
    const dir = tempDir(t);
    const copy = join(dir, 'accounts.json');
    cpSync(join(ROOT, 'config/demo-data.json'), copy);
    await expectDemoRefusal(t, { GATEWAY_DATA_FILE: copy });
    const demo = JSON.parse(readFileSync(join(ROOT, 'config/demo-data.json'), 'utf8')) as { accounts: { apiKeys: unknown[] }[] };
    const mixed = join(dir, 'mixed.json');
    writeFileSync(mixed, JSON.stringify({ accounts: [realAccount(), { id: 'acct_other', apiKeys: [{ ...demo.accounts[0]!.apiKeys[0] as object, id: 'key_other', apiKey: 'ak_other' }] }] }));
    await expectDemoRefusal(t, { GATEWAY_DATA_FILE: mixed });
  });

  await t.test('a real file with only a demo owner (the dashboard\'s published password) is refused, naming the owner', async (t) => {
    const demo = JSON.parse(readFileSync(join(ROOT, 'config/demo-data.json'), 'utf8')) as { owners: { id: string }[] };
    const file = join(tempDir(t), 'owners.json');
    writeFileSync(file, JSON.stringify({ accounts: [realAccount()], owners: [{ ...demo.owners[0], id: 'own_copied', email: 'ops@example.com' }] }));
    await expectRefusal(t, { NODE_ENV: 'production', GATEWAY_DATA_FILE: file }, ['owner own_copied', 'ALLOW_DEMO_DATA']);
  });

  await t.test('ALLOW_DEMO_DATA=true: it starts on the demo data, with a warning', async (t) => {
    const gateway = await startGatewayProcess(t, { NODE_ENV: 'production', ALLOW_DEMO_DATA: 'true' });
    assert.equal(demoWarnings(gateway.child).length, 1, gateway.child.stdout());
    assert.match(String(demoWarnings(gateway.child)[0]!.msg), /GATEWAY_DATA_FILE/);
    // The warning names the demo owners too: their passwords are in the README for the dashboard.
    assert.match(String(demoWarnings(gateway.child)[0]!.msg), /owner own_demo_alice.*owner own_demo_bob/);
    const res = await postJson(`${gateway.url}/api/signin`, { apiKey: 'ak_demo_alice', apiSecret: sha256Hex('sk_demo_alice_secret') });
    assert.equal(res.status, 200, 'the demo key works, as asked');
  });

  await t.test('a data file of real keys: it starts without a word about demo data', async (t) => {
    const file = join(tempDir(t), 'data.json');
    writeFileSync(file, JSON.stringify({ accounts: [realAccount()] }));
    const gateway = await startGatewayProcess(t, { NODE_ENV: 'production', GATEWAY_DATA_FILE: file });
    assert.deepEqual(demoWarnings(gateway.child), []);
    const res = await postJson(`${gateway.url}/api/signin`, { apiKey: 'ak_demo_alice', apiSecret: sha256Hex('sk_demo_alice_secret') });
    assert.equal(res.status, 401);
  });

  await t.test('outside production the demo data serves as before, without a warning', async (t) => {
    const gateway = await startGatewayProcess(t, {});
    assert.deepEqual(demoWarnings(gateway.child), []);
  });
});

test('under NODE_ENV=production a data file reloaded with demo keys does not serve them', async (t) => {
  // The start-up check is worth little if the watched file can bring the published secrets in
  // afterwards (a ConfigMap swapped for the example, a demo key pasted in while running).
  const file = join(tempDir(t), 'data.json');
  writeFileSync(file, JSON.stringify({ accounts: [realAccount()] }));
  const gateway = await startGatewayProcess(t, { NODE_ENV: 'production', GATEWAY_DATA_FILE: file, DATA_WATCH_INTERVAL_MS: '50' });
  cpSync(join(ROOT, 'config/demo-data.json'), file);
  // The reload is seen, whatever it decides (a reload or a refusal), within a few polls.
  await waitForLog(gateway.child, (line) => /^data file/.test(String(line.msg)), 5000);
  const res = await postJson(`${gateway.url}/api/signin`, { apiKey: 'ak_demo_alice', apiSecret: sha256Hex('sk_demo_alice_secret') });
  assert.notEqual(res.status, 200, 'a published demo secret signed in on a production gateway');
});

/** An account with one key whose secret was made here and printed nowhere. */
function realAccount(): object {
  return { id: 'acct_real', apiKeys: [{ id: 'key_real', apiKey: 'ak_real_1', secretDigest: storedDigest(randomBytes(32).toString('base64url')) }] };
}
