/**
 * npm run keys:create -- --account <accountId> [--key-id <id>] [--scope <scope>]… [--redis]
 *
 * Makes a new API key and secret (256 random bits each side) and prints the line to add to
 * the account's "apiKeys" in the data file, or with --redis writes the key into the gateways'
 * Redis (for `data.keySource` "redis"), where every instance finds it at once. The secret is
 * printed once and stored nowhere: only the digest the gateway compares against is kept.
 */
import { randomBytes } from 'node:crypto';
import { ID_PATTERN, ID_SPELLING, SCOPE_PATTERN } from '../domain/formats.js';
import { hashSecret, secretDigest } from '../domain/secrets.js';
import { RedisKeyDirectory } from '../state/keys/redis.js';
import { UsageError, parseOptions, runWhenExecuted, withRedis } from './redis.js';

export function createApiKey(keyId?: string, scopes: readonly string[] = []) {
  const apiKey = `ak_${randomBytes(18).toString('base64url')}`;
  const apiSecret = `sk_${randomBytes(32).toString('base64url')}`;
  const secretHash = hashSecret(apiSecret);
  return {
    apiKey,
    apiSecret,
    /** What a client sends as `apiSecret` at sign-in. */
    apiSecretSha256: secretHash.toString('hex'),
    entry: {
      id: keyId ?? `key_${randomBytes(9).toString('base64url')}`, apiKey, secretDigest: secretDigest(secretHash),
      ...(scopes.length > 0 ? { scopes: [...scopes] } : {}),
    },
  };
}

const USAGE = 'usage: npm run keys:create -- --account <accountId> [--key-id <id>] [--scope <scope>]... [--redis]';

async function main(): Promise<void> {
  const values = parseOptions({ account: { type: 'string' }, 'key-id': { type: 'string' }, scope: { type: 'string', multiple: true }, redis: { type: 'boolean' }, help: { type: 'boolean' } }, USAGE);
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (values.account === undefined) throw new UsageError(USAGE);
  for (const id of [values.account, values['key-id']]) {
    if (id !== undefined && !ID_PATTERN.test(id)) throw new UsageError(`"${id}": ids are ${ID_SPELLING}`);
  }
  const scopes = values.scope ?? [];
  for (const scope of scopes) {
    if (!SCOPE_PATTERN.test(scope)) throw new UsageError(`"${scope}": a scope is 1 to 128 printable characters without spaces, quotes or backslashes`);
  }
  const key = createApiKey(values['key-id'], scopes);
  const lines = [
    `API key:    ${key.apiKey}`,
    `API secret: ${key.apiSecret}`,
    '            (shown this once; the gateway keeps only a digest of its SHA-256)',
    `Clients sign in with apiSecret = SHA-256 of the secret: ${key.apiSecretSha256}`,
    '',
  ];
  if (values.redis) {
    await withRedis((redis) => new RedisKeyDirectory(redis).putKey(key.apiKey, {
      keyId: key.entry.id, accountId: values.account!, secretDigest: key.entry.secretDigest, disabled: false, scopes,
    }));
    lines.push(`Written to Redis as key "${key.entry.id}" of account "${values.account}": usable at once by gateways with data.keySource "redis".`, '');
  } else {
    lines.push(`Add this to "apiKeys" of account "${values.account}" in the data file, then restart the gateway:`, JSON.stringify(key.entry), '');
  }
  process.stdout.write(lines.join('\n'));
}

runWhenExecuted(import.meta.url, main);
