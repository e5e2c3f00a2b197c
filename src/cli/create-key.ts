/**
 * npm run keys:create -- --account <accountId> [--key-id <id>]
 *
 * Makes a new API key and secret (256 random bits each side) and prints the line to add to
 * the account's "apiKeys" in the data file. The secret is printed once and stored nowhere:
 * the line holds only the digest the gateway compares against.
 */
import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { hashSecret, secretDigest } from '../auth/credentials.js';

export function createApiKey(keyId?: string) {
  const apiKey = `ak_${randomBytes(18).toString('base64url')}`;
  const apiSecret = `sk_${randomBytes(32).toString('base64url')}`;
  const secretHash = hashSecret(apiSecret);
  return {
    apiKey,
    apiSecret,
    /** What a client sends as `apiSecret` at sign-in. */
    apiSecretSha256: secretHash.toString('hex'),
    entry: { id: keyId ?? `key_${randomBytes(9).toString('base64url')}`, apiKey, secretDigest: secretDigest(secretHash) },
  };
}

function run(): void {
  let values;
  try {
    ({ values } = parseArgs({ options: { account: { type: 'string' }, 'key-id': { type: 'string' }, help: { type: 'boolean' } } }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  if (values.help || values.account === undefined) {
    process.stderr.write('usage: npm run keys:create -- --account <accountId> [--key-id <id>]\n');
    process.exitCode = values.help ? 0 : 2;
    return;
  }
  const key = createApiKey(values['key-id']);
  process.stdout.write([
    `API key:    ${key.apiKey}`,
    `API secret: ${key.apiSecret}`,
    '            (shown this once; the gateway keeps only a digest of its SHA-256)',
    `Clients sign in with apiSecret = SHA-256 of the secret: ${key.apiSecretSha256}`,
    '',
    `Add this to "apiKeys" of account "${values.account}" in the data file, then restart the gateway:`,
    JSON.stringify(key.entry),
    '',
  ].join('\n'));
}

// Run when executed, not when imported (tests import createApiKey).
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) run();
