/**
 * `config check` (src/cli/config-check.ts) on files in temp directories: as an operator runs
 * it (a process) in the first test, and in this process (runConfigCheck, what the command
 * writes and exits with) in the others, where a process would cost more than the check. Exit code 0 for a clean configuration, 1 for errors (the gateway would not
 * start), 2 for warnings only; each risky setting gets its own warning; secrets are never
 * printed, and nothing is started (a Redis it names is never connected to).
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { runConfigCheck } from '../../src/cli/config-check.js';
import type { CommandRun } from '../../src/cli/redis.js';
import { gatewayEnv, runCommand, tempDir } from '../helpers/process.js';

const COMMAND = 'src/cli/config-check.ts';
/** Every configuration below has a signing key unless it says otherwise: without one, config check warns. */
const SIGNING = { keys: [{ kid: 'k1', alg: 'EdDSA', pem: generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }] };

interface Report {
  ok: boolean;
  errors: string[];
  warnings: { code: string; message: string }[];
  settings?: Record<string, unknown>;
}

interface Files {
  dir: string;
  /** Writes the config file (with a data file of no demo keys unless `data` says otherwise) and returns its path. */
  config(config: Record<string, unknown>): string;
  dataFile: string;
}

function files(t: TestContext): Files {
  const dir = tempDir(t, 'gw-config-check-');
  const dataFile = join(dir, 'data.json');
  writeFileSync(dataFile, JSON.stringify({ accounts: [], owners: [] }));
  let written = 0;
  return {
    dir,
    dataFile,
    config(config) {
      // A file of its own each time: the cases of one test may run at once.
      const path = join(dir, `gateway-${++written}.json`);
      writeFileSync(path, JSON.stringify({ data: { file: dataFile }, metrics: { enabled: false }, signing: SIGNING, ...config }));
      return path;
    },
  };
}

/** The command in this process, with the environment a gateway process of the tests gets. */
function configCheck(args: string[], env: Record<string, string | undefined> = {}): CommandRun {
  return runConfigCheck(args, gatewayEnv(env));
}

function check(args: string[], env: Record<string, string | undefined> = {}): CommandRun & { report: Report } {
  const result = configCheck(['--json', ...args], env);
  let report: Report;
  try {
    report = JSON.parse(result.stdout) as Report;
  } catch {
    assert.fail(`stdout is not one JSON report:\n${result.stdout}\nstderr:\n${result.stderr}`);
  }
  return { ...result, report };
}

const codes = (report: Report) => report.warnings.map((w) => w.code).sort();

test('a clean configuration: exit 0, the effective configuration printed as JSON, no warning', async (t) => {
  const f = files(t);
  const path = f.config({ server: { port: 9999 } });
  const text = await runCommand(t, [COMMAND, '--config', path], { env: gatewayEnv() });
  assert.equal(text.code, 0, text.stderr);
  const settings = JSON.parse(text.stdout) as Record<string, unknown>;
  assert.equal(settings['server.port'], 9999, 'the file is read');
  assert.equal(settings['data.file'], f.dataFile);
  assert.equal(settings['limits.mode'], 'off', 'the environment is read too, over the file');
  assert.match(text.stderr, /config check: no problems/);

  const json = check(['--config', path]);
  assert.equal(json.code, 0);
  assert.deepEqual({ ok: json.report.ok, errors: json.report.errors, warnings: json.report.warnings }, { ok: true, errors: [], warnings: [] });
});

test('GATEWAY_CONFIG is read as the gateway reads it, and --data names the data file over any other', async (t) => {
  const f = files(t);
  const path = f.config({});
  const other = join(f.dir, 'other-data.json');
  writeFileSync(other, JSON.stringify({ accounts: [], owners: [] }));
  const { code, report } = check(['--data', other], { GATEWAY_CONFIG: path });
  assert.equal(code, 0, JSON.stringify(report));
  assert.equal(report.settings!['data.file'], other);
  assert.equal(report.settings!['metrics.enabled'], false, 'from the GATEWAY_CONFIG file');
});

test('errors: exit 1, every problem named, and the configuration not printed as valid', async (t) => {
  const f = files(t);
  await t.test('schema errors', async () => {
    const path = f.config({ routes: [{ prefix: 'no-slash', targets: ['http://127.0.0.1:1'] }], workers: 2 });
    // The file's workers, not the WORKERS=1 the tests' environment sets.
    const { code, report, stderr } = check(['--config', path], { WORKERS: undefined });
    assert.equal(code, 1);
    assert.equal(report.ok, false);
    assert.ok(report.errors.some((e) => e.startsWith('routes.0.prefix')), report.errors.join('\n'));
    // Several workers without Redis: the schema refuses it, so it is an error here (not a warning).
    assert.ok(report.errors.some((e) => e.startsWith('workers')), report.errors.join('\n'));
    assert.equal(report.settings, undefined);
    assert.equal(stderr, '');

    const text = configCheck(['--config', path], { WORKERS: undefined });
    assert.equal(text.code, 1);
    assert.equal(text.stdout, '', 'no configuration printed');
    assert.match(text.stderr, /^error: routes\.0\.prefix/m);
    assert.match(text.stderr, /the gateway would not start/);
  });

  await t.test('a signing key that does not load', async () => {
    const path = f.config({ signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pemFile: join(f.dir, 'missing.pem') }] } });
    const { code, report } = check(['--config', path]);
    assert.equal(code, 1);
    assert.ok(report.errors.some((e) => /k1.*cannot read pemFile/.test(e)), report.errors.join('\n'));
  });

  await t.test('a data file that does not validate', async () => {
    const bad = join(f.dir, 'bad-data.json');
    writeFileSync(bad, JSON.stringify({ accounts: [{ id: 'x', apiKeys: 'none' }], owners: [], unknown: true }));
    const { code, report } = check(['--config', f.config({}), '--data', bad]);
    assert.equal(code, 1);
    assert.ok(report.errors.some((e) => e.includes(`invalid data file ${bad}`)), report.errors.join('\n'));
  });

  await t.test('a data file in a folder that does not exist', async () => {
    const { code, report } = check(['--config', f.config({}), '--data', join(f.dir, 'nowhere', 'data.json')]);
    assert.equal(code, 1);
    assert.ok(report.errors.some((e) => e.startsWith('data.file')), report.errors.join('\n'));
  });

  await t.test('demo data under NODE_ENV=production (the gateway refuses it)', async () => {
    const { code, report } = check(['--config', f.config({ data: { file: join(process.cwd(), 'config/demo-data.json') } })], { NODE_ENV: 'production' });
    assert.equal(code, 1);
    assert.ok(report.errors.some((e) => e.includes('demo API keys')), report.errors.join('\n'));
  });

  await t.test('an unknown option', async () => {
    const result = configCheck(['--nonsense']);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /usage: npm run config:check/);
  });
});

// Each case is a process on a config file of its own: four at a time.
test('warnings: exit 2, one for each risky setting', { concurrency: 4 }, async (t) => {
  const f = files(t);
  const target = ['http://127.0.0.1:9'];
  const cases: [string, Record<string, unknown>, string[], RegExp][] = [
    ['a public prefix over a protected route', { routes: [{ prefix: '/api', targets: target, auth: 'public' }, { prefix: '/api/orders', targets: target }] }, ['public-route-over-protected'], /"\/api" lies over the protected route "\/api\/orders"/],
    ['a public catch-all', { routes: [{ name: 'site', prefix: '/', targets: target, auth: 'public' }, { prefix: '/admin', targets: target }] }, ['public-route-over-protected'], /"site" \(\/\) lies over/],
    ['a public prefix of a protected prefix, off the segment boundary', { routes: [{ prefix: '/api/order', targets: target, auth: 'public' }, { prefix: '/api/orders', targets: target }] }, ['public-route-over-protected'], /is a prefix of the protected route/],
    ['forwardAuthorization', { routes: [{ prefix: '/legacy', targets: target, forwardAuthorization: true }] }, ['forward-authorization'], /"\/legacy" has forwardAuthorization on/],
    ['trusting every IPv4 address', { proxy: { trustedProxies: ['10.0.0.0/8', '0.0.0.0/0'] } }, ['trusts-every-proxy'], /"0\.0\.0\.0\/0"/],
    ['trusting every IPv6 address', { proxy: { trustedProxies: ['::/0'] } }, ['trusts-every-proxy'], /"::\/0"/],
    ['metrics on the public port', { metrics: { enabled: true } }, ['metrics-on-public-port'], /\/metrics on the main port/],
    ['demo data', { data: { file: join(process.cwd(), 'config/demo-data.json') } }, ['demo-data'], /acct_alice\/key_alice_1/],
    ['a data file that does not exist yet', { data: { file: join(f.dir, 'later.json') } }, ['data-file-missing'], /will create it with no accounts/],
    ['no signing key (one made at each start)', { signing: { keys: [] } }, ['ephemeral-signing-key'], /every restart ends every session/],
    ['a trusted issuer over plain HTTP', { trustedIssuers: [{ issuer: 'http://idp.example/realms/shop', audience: 'orders' }, { issuer: 'http://127.0.0.1:8081', audience: 'orders' }] }, ['trusted-issuer-over-http'], /"http:\/\/idp\.example\/realms\/shop" is reached over plain HTTP/],
  ];
  const subtests: Promise<void>[] = [];
  for (const [what, config, expected, message] of cases) {
    subtests.push(t.test(what, async () => {
      const { code, report } = check(['--config', f.config(config)]);
      assert.equal(code, 2, JSON.stringify(report));
      assert.deepEqual(report.errors, []);
      assert.deepEqual(codes(report), expected);
      assert.match(report.warnings[0]!.message, message);
    }));
  }
  subtests.push(t.test('nothing risky about a protected route over a public one', async () => {
    const { code, report } = check(['--config', f.config({ routes: [{ prefix: '/api', targets: target }, { prefix: '/api/status', targets: target, auth: 'public' }] })]);
    assert.equal(code, 0, JSON.stringify(report));
  }));
  subtests.push(t.test('several at once, in the plain output', async () => {
    const path = f.config({ metrics: { enabled: true }, proxy: { trustedProxies: ['::/0'] } });
    const text = configCheck(['--config', path]);
    assert.equal(text.code, 2);
    assert.match(text.stderr, /^warning \(trusts-every-proxy\): /m);
    assert.match(text.stderr, /^warning \(metrics-on-public-port\): /m);
    assert.match(text.stderr, /config check: 2 warnings$/m);
  }));
  await Promise.all(subtests);
});

test('secrets are never printed, and nothing is started: the Redis named is not connected to', async (t) => {
  const f = files(t);
  // A TCP server standing in for Redis: any connection to it would show here.
  let connections = 0;
  const redis = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => redis.listen(0, '127.0.0.1', resolve));
  t.after(() => redis.close());
  const port = (redis.address() as { port: number }).port;

  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const pemBody = pem.split('\n')[1]!;
  const secrets = { redisPassword: 'redis-url-pw-7f3a9c', envPassword: 'env-pw-19bd44', directoryToken: 'dir-token-c0ffee55' };
  const path = f.config({
    signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pem }] },
    redis: { url: `redis://gw:${secrets.redisPassword}@127.0.0.1:${port}` },
    directory: { store: 'http', http: { signUrl: 'http://127.0.0.1:9/sign/{accountId}/{address}', rolesUrl: 'http://127.0.0.1:9/roles/{accountId}', token: secrets.directoryToken } },
  });
  for (const args of [['--config', path], ['--config', path, '--json']]) {
    const result = configCheck([...args], { REDIS_PASSWORD: secrets.envPassword });
    assert.equal(result.code, 0, result.stderr);
    const output = result.stdout + result.stderr;
    for (const secret of [...Object.values(secrets), pemBody]) assert.ok(!output.includes(secret), `${args.join(' ')}: a secret was printed`);
    const settings = args.includes('--json') ? (JSON.parse(result.stdout) as Report).settings! : JSON.parse(result.stdout) as Record<string, unknown>;
    for (const name of ['signing.keys', 'redis.url', 'redis.password', 'directory.http.token']) assert.equal(settings[name], '[redacted]', name);
    assert.equal(settings['directory.http.rolesUrl'], 'http://127.0.0.1:9/roles/{accountId}', 'what is no secret is shown');
  }

  // A config file that is not JSON: the error names the position, never the text around it.
  writeFileSync(path, `{"signing": {"keys": [{"kid": "k1", "alg": "EdDSA", "pem": ${pemBody}`);
  const broken = configCheck(['--config', path]);
  assert.equal(broken.code, 1);
  assert.match(broken.stderr, /is not valid JSON/);
  assert.ok(!broken.stderr.includes(pemBody.slice(0, 12)), 'no piece of the file is quoted');
  assert.equal(connections, 0, 'the command never connected to Redis');
});
