import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { test } from 'node:test';
import { ConfigError, describeConfig, loadConfig, type LoadOptions } from '../../src/config/load.js';
import { describeSettings } from '../../src/config/schema.js';
import { tempDir } from '../helpers/process.js';

/** Writes `value` (JSON unless already a string) to dir/name, making folders; returns the path. */
function writeFile(dir: string, name: string, value: unknown): string {
  const path = join(dir, name);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value));
  return path;
}

/** The problems of the ConfigError loadConfig throws; fails the test when it does not throw one. */
function problemsOf(options: LoadOptions): readonly string[] {
  try {
    loadConfig(options);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    assert.ok(err.problems.length > 0);
    return err.problems;
  }
  assert.fail('loadConfig accepted the configuration');
}

/** The one problem about `path` (a problem starts with the path of the field at fault). */
function problemAt(problems: readonly string[], path: string): string {
  const found = problems.filter((p) => p === path || p.startsWith(`${path}:`) || p.startsWith(`${path} `));
  assert.equal(found.length, 1, `one problem at ${path} in ${JSON.stringify(problems)}`);
  return found[0]!;
}

function valueAt(root: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], root);
}

/** Settings that exist today; the schema may grow, so the list is checked as a subset. */
const KNOWN_SETTING_PATHS = [
  'server.host', 'server.port', 'server.bodyLimitBytes', 'server.shutdownTimeoutMs',
  'tokens.issuer', 'tokens.audience', 'tokens.accessTokenTtlSeconds', 'tokens.refreshTokenTtlSeconds',
  'tokens.refreshFamilyMaxSeconds', 'tokens.refreshGraceSeconds', 'tokens.memoryStoreMaxTokens', 'tokens.clockSkewSeconds',
  'signing.keys', 'signing.activeKid',
  'data.file', 'data.timeZone',
  'roles.defaultLimit', 'roles.maxLimit',
  'log.level',
];

test('defaults, with no file and no environment', (t) => {
  const cwd = tempDir(t);
  const config = loadConfig({ env: {}, cwd });
  assert.equal(config.server.port, 8080);
  assert.equal(config.server.host, '127.0.0.1');
  assert.equal(config.server.bodyLimitBytes, 4096);
  assert.equal(config.server.shutdownTimeoutMs, 10_000);
  assert.equal(config.tokens.issuer, 'auth-gateway');
  assert.equal(config.tokens.audience, 'auth-gateway');
  assert.equal(config.tokens.accessTokenTtlSeconds, 900);
  assert.equal(config.tokens.refreshTokenTtlSeconds, 1_209_600);
  assert.equal(config.tokens.refreshFamilyMaxSeconds, 2_592_000);
  assert.equal(config.tokens.refreshGraceSeconds, 10);
  assert.equal(config.tokens.memoryStoreMaxTokens, 1_000_000);
  assert.equal(config.tokens.clockSkewSeconds, 5);
  assert.deepEqual(config.signing.keys, []);
  assert.equal(config.signing.activeKid, undefined);
  assert.equal(config.data.file, join(cwd, 'config/demo-data.json'));
  assert.equal(config.data.timeZone, 'UTC');
  assert.equal(config.roles.defaultLimit, 10);
  assert.equal(config.roles.maxLimit, 100);
  assert.equal(config.log.level, 'info');
});

test('an empty environment variable counts as unset', (t) => {
  const config = loadConfig({ env: { PORT: '', HOST: '', LOG_LEVEL: '', GATEWAY_CONFIG: '' }, cwd: tempDir(t) });
  assert.equal(config.server.port, 8080);
  assert.equal(config.server.host, '127.0.0.1');
  assert.equal(config.log.level, 'info');
});

test('every environment name sets its setting, typed', (t) => {
  const cwd = tempDir(t);
  const keys = [{ kid: 'k1', alg: 'EdDSA', pem: '-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----' }];
  const table: Record<string, [path: string, text: string, expected: unknown]> = {
    HOST: ['server.host', '0.0.0.0', '0.0.0.0'],
    PORT: ['server.port', '9000', 9000],
    BODY_LIMIT_BYTES: ['server.bodyLimitBytes', '8192', 8192],
    TOKEN_ISSUER: ['tokens.issuer', 'issuer-x', 'issuer-x'],
    TOKEN_AUDIENCE: ['tokens.audience', 'audience-x', 'audience-x'],
    ACCESS_TOKEN_TTL_SECONDS: ['tokens.accessTokenTtlSeconds', '600', 600],
    REFRESH_TOKEN_TTL_SECONDS: ['tokens.refreshTokenTtlSeconds', '86400', 86_400],
    REFRESH_FAMILY_MAX_SECONDS: ['tokens.refreshFamilyMaxSeconds', '172800', 172_800],
    REFRESH_GRACE_SECONDS: ['tokens.refreshGraceSeconds', '0', 0],
    CLOCK_SKEW_SECONDS: ['tokens.clockSkewSeconds', '30', 30],
    SIGNING_KEYS: ['signing.keys', JSON.stringify(keys), keys],
    SIGNING_ACTIVE_KID: ['signing.activeKid', 'k1', 'k1'],
    GATEWAY_DATA_FILE: ['data.file', 'data/accounts.json', join(cwd, 'data/accounts.json')],
    TIME_ZONE: ['data.timeZone', 'Asia/Tokyo', 'Asia/Tokyo'],
    DATA_WATCH_INTERVAL_MS: ['data.watchIntervalMs', '250', 250],
    DIRECTORY_CACHE_TTL_MS: ['directory.cache.ttlMs', '60000', 60_000],
    DIRECTORY_CACHE_NEGATIVE_TTL_MS: ['directory.cache.negativeTtlMs', '500', 500],
    DIRECTORY_MAX_STALE_MS: ['directory.cache.maxStaleMs', '0', 0],
    DIRECTORY_TIMEOUT_MS: ['directory.http.timeoutMs', '750', 750],
    DIRECTORY_TOKEN: ['directory.http.token', 'svc-token', 'svc-token'],
    LOG_LEVEL: ['log.level', 'debug', 'debug'],
  };
  const pathByEnv = new Map(describeSettings().map((s) => [s.env, s.path]));
  for (const [name, [path]] of Object.entries(table)) assert.equal(pathByEnv.get(name), path, name);

  const env = Object.fromEntries(Object.entries(table).map(([name, [, text]]) => [name, text]));
  const config = loadConfig({ env, cwd });
  for (const [name, [path, , expected]] of Object.entries(table)) assert.deepEqual(valueAt(config, path), expected, name);
});

test('every numeric env setting refuses a non-number and names its path and variable', () => {
  const numeric = describeSettings().filter((s) => s.env !== undefined && s.type === 'number');
  assert.ok(numeric.length >= 8);
  for (const row of numeric) {
    const problem = problemAt(problemsOf({ env: { [row.env!]: 'abc' } }), row.path);
    assert.ok(problem.includes(row.env!), problem);
  }
});

test('GATEWAY_CONFIG file', async (t) => {
  await t.test('is merged over the defaults and under the environment', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'gateway.json', { server: { port: 8000, host: '0.0.0.0' }, tokens: { issuer: 'from-file' } });
    const fromFile = loadConfig({ env: { GATEWAY_CONFIG: file }, cwd: dir });
    assert.equal(fromFile.server.port, 8000);
    assert.equal(fromFile.server.host, '0.0.0.0');
    assert.equal(fromFile.tokens.issuer, 'from-file');
    assert.equal(fromFile.tokens.audience, 'auth-gateway', 'siblings keep their defaults');

    const envWins = loadConfig({ env: { GATEWAY_CONFIG: file, PORT: '9000' }, cwd: dir });
    assert.equal(envWins.server.port, 9000);
    assert.equal(envWins.server.host, '0.0.0.0');
  });

  await t.test('overrides sit between the file and the environment', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'gateway.json', { server: { port: 8000, bodyLimitBytes: 1000 } });
    const overrides = { server: { port: 8100 } };
    const config = loadConfig({ env: { GATEWAY_CONFIG: file }, cwd: dir, overrides });
    assert.equal(config.server.port, 8100);
    assert.equal(config.server.bodyLimitBytes, 1000);
    assert.equal(loadConfig({ env: { GATEWAY_CONFIG: file, PORT: '9000' }, cwd: dir, overrides }).server.port, 9000);
    assert.deepEqual(overrides, { server: { port: 8100 } });
    assert.equal(Object.isFrozen(overrides.server), false, 'the caller\'s object is not frozen');
  });

  await t.test('a relative GATEWAY_CONFIG is taken from cwd', (t) => {
    const dir = tempDir(t);
    writeFile(dir, 'conf/gateway.json', { server: { port: 8001 } });
    assert.equal(loadConfig({ env: { GATEWAY_CONFIG: 'conf/gateway.json' }, cwd: dir }).server.port, 8001);
  });

  await t.test('relative paths in the file are taken from the file\'s folder', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'conf/gateway.json', {
      data: { file: 'data/accounts.json' },
      signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pemFile: 'keys/k1.pem' }] },
    });
    const config = loadConfig({ env: { GATEWAY_CONFIG: file }, cwd: join(dir, 'elsewhere') });
    assert.equal(config.data.file, join(dir, 'conf/data/accounts.json'));
    assert.equal(config.signing.keys[0]?.pemFile, join(dir, 'conf/keys/k1.pem'));
  });

  await t.test('relative paths from the environment are taken from cwd, absolute ones kept', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'conf/gateway.json', { data: { file: 'data/accounts.json' } });
    const cwd = join(dir, 'work');
    assert.equal(loadConfig({ env: { GATEWAY_CONFIG: file, GATEWAY_DATA_FILE: 'mine.json' }, cwd }).data.file, join(cwd, 'mine.json'));
    const absolute = resolve(dir, 'abs/data.json');
    assert.equal(loadConfig({ env: { GATEWAY_DATA_FILE: absolute }, cwd }).data.file, absolute);
  });

  await t.test('not valid JSON', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'gateway.json', '{"server": {"port": 80');
    const problems = problemsOf({ env: { GATEWAY_CONFIG: file }, cwd: dir });
    assert.equal(problems.length, 1);
    assert.ok(problems[0]!.startsWith('GATEWAY_CONFIG:'), problems[0]);
    assert.ok(problems[0]!.includes(file));
  });

  await t.test('JSON that is not an object', (t) => {
    const dir = tempDir(t);
    for (const text of ['[]', 'null', '8080', '"x"']) {
      const file = writeFile(dir, 'gateway.json', text);
      const problems = problemsOf({ env: { GATEWAY_CONFIG: file }, cwd: dir });
      assert.ok(problems[0]!.startsWith('GATEWAY_CONFIG:'), text);
    }
  });

  await t.test('a missing file', (t) => {
    const dir = tempDir(t);
    const problems = problemsOf({ env: { GATEWAY_CONFIG: 'nope.json' }, cwd: dir });
    assert.equal(problems.length, 1);
    assert.ok(problems[0]!.startsWith('GATEWAY_CONFIG:'), problems[0]);
    assert.ok(problems[0]!.includes(join(dir, 'nope.json')));
    assert.ok(problems[0]!.includes('ENOENT'));
  });
});

test('unknown keys are errors that name where they are', async (t) => {
  await t.test('at the top level and in a section', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'gateway.json', { server: { prot: 1 }, extra: true });
    const problems = problemsOf({ env: { GATEWAY_CONFIG: file }, cwd: dir });
    assert.equal(problems.length, 2, JSON.stringify(problems));
    assert.match(problemAt(problems, 'server'), /\bprot\b/);
    assert.match(problemAt(problems, '(top level)'), /\bextra\b/);
  });

  await t.test('inside a signing key', () => {
    const problems = problemsOf({ env: {}, overrides: { signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pem: 'x', pme: 'y' }] } } });
    assert.match(problemAt(problems, 'signing.keys.0'), /\bpme\b/);
  });

  await t.test('a misspelt section', () => {
    const problems = problemsOf({ env: {}, overrides: { token: { issuer: 'x' } } });
    assert.match(problemAt(problems, '(top level)'), /\btoken\b/);
  });
});

test('wrong types and values name the path, and the env variable when it came from there', async (t) => {
  await t.test('PORT=abc', () => {
    const problem = problemAt(problemsOf({ env: { PORT: 'abc' } }), 'server.port');
    assert.match(problem, /\bPORT\b/);
  });

  await t.test('out-of-range and wrongly typed env values', () => {
    const cases: [env: Record<string, string>, path: string][] = [
      [{ PORT: '70000' }, 'server.port'],
      [{ PORT: '-1' }, 'server.port'],
      [{ PORT: '80.5' }, 'server.port'],
      [{ PORT: '0x50' }, 'server.port'],
      [{ BODY_LIMIT_BYTES: '10' }, 'server.bodyLimitBytes'],
      [{ ACCESS_TOKEN_TTL_SECONDS: '0' }, 'tokens.accessTokenTtlSeconds'],
      [{ REFRESH_GRACE_SECONDS: '301' }, 'tokens.refreshGraceSeconds'],
      [{ LOG_LEVEL: 'loud' }, 'log.level'],
      [{ SIGNING_KEYS: 'not json' }, 'signing.keys'],
      [{ SIGNING_KEYS: '{"kid":"k1"}' }, 'signing.keys'],
      // The OAuth metadata's URLs start with it: an origin only, as browsers spell it.
      [{ OAUTH_PUBLIC_ORIGIN: 'https://api.example.com/oauth' }, 'oauth.publicOrigin'],
      [{ OAUTH_PUBLIC_ORIGIN: 'https://API.example.com' }, 'oauth.publicOrigin'],
      [{ OAUTH_PUBLIC_ORIGIN: 'https://api.example.com:443' }, 'oauth.publicOrigin'],
      [{ OAUTH_PUBLIC_ORIGIN: 'api.example.com' }, 'oauth.publicOrigin'],
    ];
    for (const [env, path] of cases) {
      const problem = problemAt(problemsOf({ env }), path);
      assert.ok(problem.includes(Object.keys(env)[0]!), `${JSON.stringify(env)}: ${problem}`);
    }
  });

  await t.test('a problem inside SIGNING_KEYS still names SIGNING_KEYS', () => {
    const env = { SIGNING_KEYS: JSON.stringify([{ kid: 'k1', alg: 'HS256', pem: 'x' }]) };
    const problem = problemAt(problemsOf({ env }), 'signing.keys.0.alg');
    assert.match(problem, /\bSIGNING_KEYS\b/);
  });

  await t.test('a value from the file does not name the env variable', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'gateway.json', { server: { port: '8000' } });
    const problem = problemAt(problemsOf({ env: { GATEWAY_CONFIG: file } }), 'server.port');
    assert.doesNotMatch(problem, /\bPORT\b/);
  });

  await t.test('a value from the file does not name an env variable that is set but empty', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'gateway.json', { server: { port: '8000' } });
    const problem = problemAt(problemsOf({ env: { GATEWAY_CONFIG: file, PORT: '' } }), 'server.port');
    assert.doesNotMatch(problem, /\bPORT\b/);
  });

  await t.test('every problem from every source is listed at once', (t) => {
    const dir = tempDir(t);
    const file = writeFile(dir, 'gateway.json', { server: { prot: 1 }, roles: { maxLimit: 'many' } });
    const problems = problemsOf({ env: { GATEWAY_CONFIG: file, PORT: 'abc', LOG_LEVEL: 'loud' } });
    problemAt(problems, 'server');
    problemAt(problems, 'server.port');
    problemAt(problems, 'roles.maxLimit');
    problemAt(problems, 'log.level');
    assert.equal(problems.length, 4, JSON.stringify(problems));
  });
});

test('rules across fields', async (t) => {
  await t.test('the access-token lifetime must be shorter than the refresh-token lifetime', () => {
    assert.equal(loadConfig({ env: { ACCESS_TOKEN_TTL_SECONDS: '1209599' } }).tokens.accessTokenTtlSeconds, 1_209_599);
    const problem = problemAt(problemsOf({ env: { ACCESS_TOKEN_TTL_SECONDS: '1209600' } }), 'tokens.accessTokenTtlSeconds');
    assert.match(problem, /\bACCESS_TOKEN_TTL_SECONDS\b/);
    problemAt(problemsOf({ env: {}, overrides: { tokens: { accessTokenTtlSeconds: 600, refreshTokenTtlSeconds: 300 } } }), 'tokens.accessTokenTtlSeconds');
  });

  await t.test('the refresh-token lifetime may not exceed the family lifetime', () => {
    problemAt(problemsOf({ env: { REFRESH_TOKEN_TTL_SECONDS: '2592001' } }), 'tokens.refreshTokenTtlSeconds');
  });

  await t.test('the default roles limit may not exceed the largest', () => {
    problemAt(problemsOf({ env: {}, overrides: { roles: { defaultLimit: 101 } } }), 'roles.defaultLimit');
  });

  await t.test('activeKid must be one of the keys', () => {
    const keys = [{ kid: 'k1', alg: 'EdDSA', pem: 'x' }];
    assert.equal(loadConfig({ env: {}, overrides: { signing: { keys, activeKid: 'k1' } } }).signing.activeKid, 'k1');
    problemAt(problemsOf({ env: {}, overrides: { signing: { keys, activeKid: 'k2' } } }), 'signing.activeKid');
    problemAt(problemsOf({ env: { SIGNING_ACTIVE_KID: 'k1' } }), 'signing.activeKid');
  });

  await t.test('kids are unique', () => {
    const keys = [{ kid: 'k1', alg: 'EdDSA', pem: 'x' }, { kid: 'k1', alg: 'ES256', pem: 'y' }];
    problemAt(problemsOf({ env: {}, overrides: { signing: { keys } } }), 'signing.keys.1.kid');
  });

  await t.test('each key has exactly one of pem and pemFile', () => {
    problemAt(problemsOf({ env: {}, overrides: { signing: { keys: [{ kid: 'k1', alg: 'EdDSA' }] } } }), 'signing.keys.0');
    problemAt(problemsOf({ env: {}, overrides: { signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pem: 'x', pemFile: 'y' }] } } }), 'signing.keys.0');
  });

  await t.test('the directory\'s Redis store needs Redis', () => {
    problemAt(problemsOf({ env: { DIRECTORY_STORE: 'redis' } }), 'directory.store');
    assert.equal(loadConfig({ env: { DIRECTORY_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6379' } }).directory.store, 'redis');
  });

  await t.test('the directory\'s HTTP store needs both URLs, each an http(s) URL with its placeholders', () => {
    const signUrl = 'http://records.internal/accounts/{accountId}/sign/{address}';
    const rolesUrl = 'https://records.internal/accounts/{accountId}/roles';
    const http = loadConfig({ env: { DIRECTORY_STORE: 'http', DIRECTORY_SIGN_URL: signUrl, DIRECTORY_ROLES_URL: rolesUrl } }).directory.http;
    assert.deepEqual([http.signUrl, http.rolesUrl], [signUrl, rolesUrl]);
    problemAt(problemsOf({ env: { DIRECTORY_STORE: 'http', DIRECTORY_SIGN_URL: signUrl } }), 'directory.http.rolesUrl');
    problemAt(problemsOf({ env: { DIRECTORY_STORE: 'http', DIRECTORY_ROLES_URL: rolesUrl } }), 'directory.http.signUrl');
    for (const bad of ['http://records.internal/sign/{address}', 'ftp://h/{accountId}/{address}', 'http://u:p@h/{accountId}/{address}', 'http://h/{accountId}/{address}#x', 'not a url {accountId} {address}']) {
      problemAt(problemsOf({ env: { DIRECTORY_STORE: 'http', DIRECTORY_SIGN_URL: bad, DIRECTORY_ROLES_URL: rolesUrl } }), 'directory.http.signUrl');
    }
  });

  await t.test('the time zone must be a known IANA zone', () => {
    assert.equal(loadConfig({ env: { TIME_ZONE: 'Europe/Berlin' } }).data.timeZone, 'Europe/Berlin');
    const problem = problemAt(problemsOf({ env: { TIME_ZONE: 'Mars/Olympus_Mons' } }), 'data.timeZone');
    assert.match(problem, /\bTIME_ZONE\b/);
  });
});

test('the result is deeply frozen', (t) => {
  const config = loadConfig({ env: {}, cwd: tempDir(t), overrides: { signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pem: 'x' }] } } });
  const unfrozen: string[] = [];
  (function visit(node: unknown, path: string) {
    if (typeof node !== 'object' || node === null) return;
    if (!Object.isFrozen(node)) unfrozen.push(path || '(root)');
    for (const [key, child] of Object.entries(node)) visit(child, path ? `${path}.${key}` : key);
  })(config, '');
  assert.deepEqual(unfrozen, []);

  assert.throws(() => { (config.server as { port: number }).port = 1; }, TypeError);
  assert.throws(() => { (config.signing.keys as unknown[]).push({}); }, TypeError);
  assert.throws(() => { (config.signing.keys[0] as { kid: string }).kid = 'k2'; }, TypeError);
  assert.equal(config.server.port, 8080);
});

test('describeSettings', async (t) => {
  const rows = describeSettings();

  await t.test('lists each leaf setting once', () => {
    const paths = rows.map((r) => r.path);
    assert.equal(new Set(paths).size, paths.length, JSON.stringify(paths));
    assert.deepEqual(KNOWN_SETTING_PATHS.filter((p) => !paths.includes(p)), []);
  });

  await t.test('covers every leaf of a loaded config', (t) => {
    const config = loadConfig({ env: {}, cwd: tempDir(t) });
    const leaves: string[] = [];
    (function visit(node: unknown, path: string) {
      if (typeof node === 'object' && node !== null && !Array.isArray(node)) {
        for (const [key, child] of Object.entries(node)) visit(child, path ? `${path}.${key}` : key);
      } else {
        leaves.push(path);
      }
    })(config, '');
    const listed = new Set(rows.map((r) => r.path));
    assert.deepEqual(leaves.filter((p) => !listed.has(p)), []);
  });

  await t.test('every row has a description, a type and its real default', (t) => {
    const cwd = tempDir(t);
    const config = loadConfig({ env: {}, cwd });
    for (const row of rows) {
      assert.equal(typeof row.description, 'string', row.path);
      assert.ok(row.description.trim().length > 0, row.path);
      assert.ok(['string', 'number', 'boolean', 'array', 'enum'].includes(row.type), `${row.path}: ${row.type}`);
      const loaded = valueAt(config, row.path);
      const expected = row.path === 'data.file' && typeof row.default === 'string' && !isAbsolute(row.default) ? resolve(cwd, row.default) : row.default;
      assert.deepEqual(loaded, expected, row.path);
    }
  });

  await t.test('env names are unique, upper snake case, and GATEWAY_CONFIG is not one', () => {
    const names = rows.flatMap((r) => (r.env === undefined ? [] : [r.env]));
    assert.equal(new Set(names).size, names.length, JSON.stringify(names));
    for (const name of names) assert.match(name, /^[A-Z][A-Z0-9_]*$/);
    assert.ok(!names.includes('GATEWAY_CONFIG'));
    for (const expected of ['PORT', 'HOST', 'GATEWAY_DATA_FILE', 'SIGNING_KEYS', 'LOG_LEVEL']) assert.ok(names.includes(expected), expected);
  });

  await t.test('signing keys, the directory upstream\'s credential, Redis credentials (the sentinels\' too), the DPoP nonce key, the device-cookie key, the second-factor key, the single sign-on client secret, the SMTP URL (its login) and the ACME EAB key are marked secret', () => {
    assert.equal(rows.find((r) => r.path === 'signing.keys')?.secret, true);
    assert.deepEqual(rows.filter((r) => r.secret).map((r) => r.path), ['dpop.nonceSecret', 'signing.keys', 'directory.http.token', 'redis.url', 'redis.password', 'redis.sentinelPassword', 'owner.deviceCookieSecret', 'owner.secondFactorKey', 'owner.sso.clientSecret', 'mail.smtpUrl', 'acme.eabHmacKey']);
  });
});

test('describeConfig lists every setting for the start-up log and redacts secrets', () => {
  const pem = '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIK\n-----END PRIVATE KEY-----\n';
  const config = loadConfig({ env: { PORT: '9001' }, overrides: { signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pem }] } } });
  const described = describeConfig(config);
  assert.deepEqual(Object.keys(described), describeSettings().map((s) => s.path));
  assert.equal(described['server.port'], 9001);
  assert.equal(described['signing.keys'], '[redacted]');
  assert.ok(!JSON.stringify(described).includes('PRIVATE KEY'));
  const withToken = describeConfig(loadConfig({ env: { DIRECTORY_TOKEN: 'svc-secret-token' } }));
  assert.equal(withToken['directory.http.token'], '[redacted]');
  assert.ok(!JSON.stringify(withToken).includes('svc-secret-token'));
});
