/**
 * API key + secret checking. The client sends apiSecret = SHA-256(secret), in hex (either case)
 * or base64/base64url; the directory keeps only SHA-256 of those 32 decoded bytes, so neither
 * the secret nor the value a client sends is ever stored. A fast hash is enough because
 * secrets are 256 random bits made by `npm run keys:create`, not passwords a person chose.
 *
 * An unknown key and a wrong secret take the same path (a digest comparison against a dummy)
 * and give the same answer, so neither timing nor the reply tells which keys exist.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { secretDigest } from '../domain/secrets.js';
import { InvalidRequest } from '../errors/errors.js';
import type { ApiKeyRecord, KeyDirectory } from '../state/keys/store.js';

const HEX_64 = /^[0-9a-fA-F]{64}$/;
const BASE64_32 = /^[A-Za-z0-9+/]{43}=?$|^[A-Za-z0-9_-]{43}=?$/;

/** The 32 bytes of a SHA-256 given as hex or base64(url); undefined for anything else. */
export function decodeSecretHash(apiSecret: string): Buffer | undefined {
  if (HEX_64.test(apiSecret)) return Buffer.from(apiSecret, 'hex');
  // Either base64 alphabet; both decode to the same 32 bytes, and so to the same digest.
  if (BASE64_32.test(apiSecret)) return Buffer.from(apiSecret, 'base64url');
  return undefined;
}

const DUMMY_DIGEST = secretDigest(randomBytes(32));

/** Both digests against the presented one, always, so the time taken tells nothing. */
function digestsEqual(expected: string, actual: Buffer): boolean {
  const bytes = Buffer.from(expected);
  return bytes.length === actual.length && timingSafeEqual(bytes, actual);
}

/**
 * The key record when apiKey and apiSecret match an enabled key, else undefined. A rolled
 * key's replaced secret matches too until its `previousValidUntil` (compared with `now`).
 * A malformed apiSecret (not a SHA-256 in a known encoding) is the caller's format mistake: 400.
 */
export async function verifyApiCredentials(keys: KeyDirectory, apiKey: string, apiSecret: string, now: number): Promise<ApiKeyRecord | undefined> {
  const secretHash = decodeSecretHash(apiSecret);
  if (secretHash === undefined) {
    throw new InvalidRequest('apiSecret must be the SHA-256 of the API secret, as 64 hex digits or base64.');
  }
  const record = await keys.findByApiKey(apiKey);
  const actual = Buffer.from(secretDigest(secretHash));
  // Both comparisons run whatever the record holds (a dummy stands in for what it lacks).
  const current = digestsEqual(record?.secretDigest ?? DUMMY_DIGEST, actual);
  const previous = digestsEqual(record?.previousSecretDigest ?? DUMMY_DIGEST, actual);
  const previousValid = record?.previousSecretDigest !== undefined && record.previousValidUntil !== undefined && now < record.previousValidUntil;
  const matches = current || (previous && previousValid);
  return matches && record !== undefined && !record.disabled ? record : undefined;
}
