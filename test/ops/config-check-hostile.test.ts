/**
 * `config check` fed hostile and mistaken inputs, each holding a secret where an operator might
 * put one (a PEM, a Redis password in the URL, the sentinels' password, the directory token,
 * credentials in a directory URL, an API key's digest, an owner's password hash): whatever the
 * outcome, no secret is printed, in the report, the settings or an error message.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DEMO_FILE } from '../helpers/directory.js';
import { runConfigCheck } from '../../src/cli/config-check.js';
import { gatewayEnv, tempDir } from '../helpers/process.js';

const SECRETS = ['LEAKpem0123', 'LEAKredis0123', 'LEAKsentinel0123', 'LEAKtoken0123', 'LEAKdirpass0123', 'LEAKdigest0123', 'LEAKhash0123'];
const PEM = `-----BEGIN PRIVATE KEY-----\\n${SECRETS[0]}MC4CAQAwBQYDK2VwBCIEIN\\n-----END PRIVATE KEY-----`;

/** [what, config file text (undefined: none), extra env, data file edit] */
const CASES: [string, string | undefined, Record<string, string>, ((data: any) => void)?][] = [
  ['a malformed PEM', `{"signing": {"keys": [{"kid": "a", "alg": "ES256", "pem": "${PEM}"}]}}`, {}],
  ['a config file cut inside a PEM', `{"signing": {"keys": [{"kid": "a", "alg": "ES256", "pem": "-----BEGIN PRIVATE KEY-----\\n${SECRETS[0]}`, {}],
  ['a Redis URL of the wrong scheme', `{"redis": {"url": "http://:${SECRETS[1]}@x"}}`, {}],
  ['a Redis URL with a password, and a bad port', `{"redis": {"url": "redis://:${SECRETS[1]}@x:notaport"}}`, {}],
  ['a sentinel password of the wrong type', `{"redis": {"sentinels": ["a:1"], "sentinelName": "m", "sentinelPassword": ["${SECRETS[2]}"]}}`, {}],
  ['a sentinel password without sentinels', undefined, { REDIS_SENTINEL_PASSWORD: SECRETS[2]! }],
  ['a directory token beside an unknown key', `{"directory": {"http": {"token": "${SECRETS[3]}", "bogus": 1}}}`, {}],
  ['a good configuration with every secret set', undefined, { REDIS_URL: `redis://:${SECRETS[1]}@127.0.0.1:1`, DIRECTORY_TOKEN: SECRETS[3]!, SIGNING_KEYS: 'not json' }],
  // Unused while the store is not "http", and so not refused; printed all the same.
  ['credentials in the directory URLs', undefined, {
    DIRECTORY_SIGN_URL: `https://svc:${SECRETS[4]}@dir.example/{accountId}/{address}`,
    DIRECTORY_ROLES_URL: `https://svc:${SECRETS[4]}@dir.example/{accountId}/roles`,
  }],
  ['credentials in the directory URLs of the http store', undefined, {
    DIRECTORY_STORE: 'http', DIRECTORY_TOKEN: SECRETS[3]!,
    DIRECTORY_SIGN_URL: `https://svc:${SECRETS[4]}@dir.example/{accountId}/{address}`,
    DIRECTORY_ROLES_URL: `https://svc:${SECRETS[4]}@dir.example/{accountId}/roles`,
  }],
  ['a malformed API key digest', undefined, {}, (data) => { data.accounts[0].apiKeys[0].secretDigest = `sha256:${SECRETS[5]}`; }],
  ['an API key digest of the wrong type beside a duplicate key', undefined, {}, (data) => {
    data.accounts[0].apiKeys[0].secretDigest = { digest: SECRETS[5] };
    data.accounts[1].apiKeys[0].apiKey = data.accounts[0].apiKeys[0].apiKey;
  }],
  ['a malformed owner password hash', undefined, {}, (data) => { data.owners[0].passwordHash = `$argon2id$${SECRETS[6]}`; }],
];

for (const [what, configText, env, editData] of CASES) {
  test(`config check with ${what} prints no secret`, async (t) => {
    const dir = tempDir(t, 'gw-config-hostile-');
    const data = JSON.parse(readFileSync(DEMO_FILE, 'utf8'));
    editData?.(data);
    const dataFile = join(dir, 'data.json');
    writeFileSync(dataFile, JSON.stringify(data));
    const extra: Record<string, string> = { ...env };
    if (configText !== undefined) {
      writeFileSync(join(dir, 'gateway.json'), configText);
      extra.GATEWAY_CONFIG = join(dir, 'gateway.json');
    }
    const results = [false, true].map((json) => runConfigCheck([...(json ? ['--json'] : []), '--data', dataFile], gatewayEnv(extra)));
    for (const [i, json] of [false, true].entries()) {
      const result = results[i]!;
      assert.ok([0, 1, 2].includes(result.code ?? -1), `${what}: exit ${result.code}\n${result.stderr}`);
      const out = result.stdout + result.stderr;
      for (const secret of SECRETS) assert.ok(!out.includes(secret), `${what}${json ? ' (--json)' : ''}: ${secret} printed:\n${out.split('\n').filter((l) => l.includes(secret)).join('\n')}`);
    }
  });
}
