/**
 * Refresh tokens: `<handle>.<secret>`. The handle is base64url of the JSON array
 * [accountId, keyId, familyId, tokenId] and only locates the record: it tells its holder
 * nothing the access token does not already say in clear, besides two random ids. The secret is
 * 256 random bits; the store keeps only its SHA-256. Carrying the account and key in the handle
 * lets a refresh sign the new access token before its single atomic store call, instead of
 * reading the record first; carrying the family lets a Redis store name every key that call
 * touches up front (all under the account's hash tag, so it also runs on Redis Cluster).
 *
 * For the grace window, the successor pair is sealed (AES-256-GCM) under a key derived from
 * the presented token's secret: whoever holds that token may read its successor again for a
 * few seconds, and the store, which never sees the secret, cannot.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
// Ids in a handle: what the data file allows for account and key ids (ours are base64url). A
// handle is client input that becomes part of store key names, so nothing else gets through.
import { ID_PATTERN } from '../domain/formats.js';

const SECRET_BYTES = 32;
const SECRET_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/** Bounds the work done on a hostile string before it is rejected. */
const MAX_TOKEN_LENGTH = 1024;
const SEAL_INFO = 'gateway refresh grace v1';

export interface RefreshTokenParts {
  accountId: string;
  keyId: string;
  familyId: string;
  tokenId: string;
  secret: string;
}

export interface MintedRefreshToken extends RefreshTokenParts {
  token: string;
  secretHash: string;
}

export function newId(): string {
  return randomBytes(16).toString('base64url');
}

export function mintRefreshToken(accountId: string, keyId: string, familyId: string): MintedRefreshToken {
  const tokenId = newId();
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  const handle = Buffer.from(JSON.stringify([accountId, keyId, familyId, tokenId])).toString('base64url');
  return { token: `${handle}.${secret}`, accountId, keyId, familyId, tokenId, secret, secretHash: hashRefreshSecret(secret) };
}

/** The parts of a well-formed token; undefined for anything else (the caller answers 401). */
export function parseRefreshToken(token: string): RefreshTokenParts | undefined {
  if (token.length > MAX_TOKEN_LENGTH) return undefined;
  const dot = token.indexOf('.');
  if (dot <= 0 || dot !== token.lastIndexOf('.')) return undefined;
  const secret = token.slice(dot + 1);
  if (!SECRET_PATTERN.test(secret)) return undefined;
  let handle: unknown;
  try {
    handle = JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(handle) || handle.length !== 4 || !handle.every((part) => typeof part === 'string' && ID_PATTERN.test(part))) {
    return undefined;
  }
  const [accountId, keyId, familyId, tokenId] = handle as [string, string, string, string];
  return { accountId, keyId, familyId, tokenId, secret };
}

export function hashRefreshSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
}

function sealKey(secret: string): Buffer {
  return createHmac('sha256', secret).update(SEAL_INFO).digest();
}

export function sealPair(pair: TokenPair, secret: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealKey(secret), iv);
  const body = Buffer.concat([cipher.update(JSON.stringify(pair), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
}

/** The sealed pair, or undefined when it does not open with this secret. */
export function unsealPair(sealed: string, secret: string): TokenPair | undefined {
  try {
    const bytes = Buffer.from(sealed, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', sealKey(secret), bytes.subarray(0, 12));
    decipher.setAuthTag(bytes.subarray(12, 28));
    const text = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8');
    return JSON.parse(text) as TokenPair;
  } catch {
    return undefined;
  }
}
