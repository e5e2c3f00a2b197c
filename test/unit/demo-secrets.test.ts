/**
 * The sign-in's demo check (src/auth/demo-secrets.ts) on its own: which presented secrets and
 * records it refuses, in either encoding a client may send, and that it warns once per key,
 * never with the secret. test/redis/demo-secrets.test.ts holds the whole gateway.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createDemoSecretGuard } from '../../src/auth/demo-secrets.js';
import { hashSecret, secretDigest } from '../../src/domain/secrets.js';
import { readDataFile } from '../../src/state/data-file/data-file.js';
import type { ApiKeyRecord } from '../../src/state/keys/store.js';
import { createLogger } from '../../src/telemetry/log.js';

const demo = readDataFile(new URL('../../config/demo-data.json', import.meta.url).pathname);
const clientHash = (secret: string) => createHash('sha256').update(secret, 'utf8').digest();

function guardWithLog(refuse: boolean) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({ write(chunk, _encoding, done) { lines.push(JSON.parse(String(chunk))); done(); } });
  return { guard: createDemoSecretGuard({ refuse, log: createLogger('info', sink) }), lines, text: () => JSON.stringify(lines) };
}

const alice: ApiKeyRecord = { keyId: 'key_alice_1', accountId: 'acct_alice', secretDigest: secretDigest(hashSecret('sk_demo_alice_secret')), disabled: false, scopes: [] };

test('refusing: a demo secret in hex or base64url is refused, once warned about by key, never logged', () => {
  const { guard, lines, text } = guardWithLog(true);
  const hex = clientHash('sk_demo_alice_secret').toString('hex');
  assert.equal(guard.refusesSignIn(alice, hex), true);
  assert.equal(guard.refusesSignIn(alice, hex.toUpperCase()), true);
  assert.equal(guard.refusesSignIn(alice, clientHash('sk_demo_alice_secret').toString('base64url')), true);
  assert.equal(guard.refusesKey(alice), true);
  assert.equal(lines.length, 1, text());
  assert.equal(lines[0]!.accountId, 'acct_alice');
  assert.equal(lines[0]!.keyId, 'key_alice_1');
  assert.ok(!text().includes('sk_demo_alice_secret') && !text().includes(hex), 'no secret in the log');
});

test('refusing: a real secret, on a record whose previous secret was a demo one, is served', () => {
  const { guard, lines } = guardWithLog(true);
  const real = randomBytes(32).toString('base64url');
  const rolled: ApiKeyRecord = { ...alice, secretDigest: secretDigest(hashSecret(real)), previousSecretDigest: alice.secretDigest, previousValidUntil: Date.now() + 60_000 };
  assert.equal(guard.refusesSignIn(rolled, clientHash(real).toString('hex')), false);
  assert.equal(guard.refusesKey(rolled), false);
  // The demo secret it replaced is still refused while it would sign in.
  assert.equal(guard.refusesSignIn(rolled, clientHash('sk_demo_alice_secret').toString('hex')), true);
  assert.equal(lines.length, 1);
});

test('refusing: the demo owners are refused by their shipped hash, other owners not', () => {
  const { guard, lines } = guardWithLog(true);
  for (const owner of demo.owners) assert.equal(guard.refusesOwner(owner), true, owner.id);
  assert.equal(guard.refusesOwner({ ...demo.owners[0]!, passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }), false);
  assert.deepEqual(lines.map((line) => line.ownerId), demo.owners.map((o) => o.id));
  assert.ok(!JSON.stringify(lines).includes('passphrase'));
});

test('not refusing (outside production, or ALLOW_DEMO_DATA=true): nothing refused, nothing logged', () => {
  const { guard, lines } = guardWithLog(false);
  assert.equal(guard.refusesSignIn(alice, clientHash('sk_demo_alice_secret').toString('hex')), false);
  assert.equal(guard.refusesKey(alice), false);
  assert.equal(guard.refusesOwner(demo.owners[0]!), false);
  assert.deepEqual(lines, []);
});
