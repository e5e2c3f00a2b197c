/**
 * Which keys count as demo data (src/state/data-file/demo-data.ts): every key of the shipped demo file,
 * by its published secret, wherever it is copied; no key made by `keys:create`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { hashSecret, secretDigest } from '../../src/domain/secrets.js';
import { readDataFile } from '../../src/state/data-file/data-file.js';
import { verifyPassword } from '../../src/owner/passwords.js';
import { checkDemoData, DemoDataError, findDemoKeys } from '../../src/state/data-file/demo-data.js';

const demo = readDataFile(new URL('../../config/demo-data.json', import.meta.url).pathname);

test('every API key and owner of config/demo-data.json counts as demo data', () => {
  const keys = demo.accounts.flatMap((a) => a.apiKeys.map((k) => `${a.id}/${k.id}`));
  const owners = demo.owners.map((o) => `owner ${o.id}`);
  assert.ok(keys.length > 0 && owners.length > 0);
  assert.deepEqual(findDemoKeys(demo), [...keys, ...owners], 'a demo key or owner whose secret is not among the published ones');
});

test('the demo owners sign in with the passwords the README publishes', async () => {
  const published = new Map([['alice@demo.example', 'alice demo passphrase'], ['bob@demo.example', 'bob demo passphrase']]);
  assert.deepEqual(demo.owners.map((o) => o.email).sort(), [...published.keys()].sort());
  for (const owner of demo.owners) assert.equal(await verifyPassword(owner.passwordHash, published.get(owner.email)!), true, owner.email);
});

test('a key counts by its secret, whatever its account, id or apiKey', () => {
  const demoKey = demo.accounts[0]!.apiKeys[0]!;
  const fresh = { id: 'key_real', apiKey: 'ak_real', secretDigest: secretDigest(hashSecret(randomBytes(32).toString('base64url'))) };
  const data = { accounts: [{ id: 'acct_real', apiKeys: [fresh, { ...demoKey, id: 'key_renamed', apiKey: 'ak_renamed' }] }], owners: [] } as unknown as typeof demo;
  assert.deepEqual(findDemoKeys(data), ['acct_real/key_renamed']);
  assert.deepEqual(findDemoKeys({ accounts: [{ id: 'acct_real', apiKeys: [fresh] }], owners: [] } as unknown as typeof demo), []);
});

test('refused only in production and only without the opt-in', () => {
  const file = '/etc/gateway/data.json';
  assert.equal(checkDemoData(demo, { file, isProduction: false, allowDemoData: false }), undefined);
  assert.throws(() => checkDemoData(demo, { file, isProduction: true, allowDemoData: false }), DemoDataError);
  assert.match(checkDemoData(demo, { file, isProduction: true, allowDemoData: true }) ?? '', /ALLOW_DEMO_DATA=true/);
});
