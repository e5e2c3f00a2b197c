/**
 * Refresh tokens: `<handle>.<secret>`. The handle is base64url of the JSON array
 * [accountId, keyId, familyId, tokenId], with a fifth element, the family's granted scopes
 * space-separated, when a sign-in narrowed them (the token endpoint's `scope`), and only locates
 * the record: it tells its holder nothing the access token does not already say in clear,
 * besides two random ids. The store holds the grant too and refuses a handle naming another. The secret is
 * 256 random bits; the store keeps only its SHA-256. Carrying the account and key in the handle
 * lets a refresh sign the new access token before its single atomic store call, instead of
 * reading the record first; carrying the family lets a Redis store name every key that call
 * touches up front (all under the account's hash tag, so it also runs on Redis Cluster).
 *
 * For the grace window, the successor pair is sealed (AES-256-GCM) under a key derived from
 * the presented token's secret: whoever holds that token may read its successor again for a
 * few seconds, and the store, which never sees the secret, cannot.
 */
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hash, randomFillSync, type KeyObject } from 'node:crypto';
// Ids in a handle: what the data file allows for account and key ids (ours are base64url). A
// handle is client input that becomes part of store key names, so nothing else gets through.
import { ID_PATTERN, SCOPE_PATTERN } from '../domain/formats.js';

const SECRET_BYTES = 32;
const SECRET_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/**
 * Bounds the work done on a hostile string before it is rejected: four ids of at most 128
 * characters and a grant of at most MAX_GRANT_LENGTH fit, in base64url, with the secret.
 */
const MAX_TOKEN_LENGTH = 2048;
/** The longest grant a family keeps (the token endpoint refuses a longer `scope`). */
export const MAX_GRANT_LENGTH = 512;
const SEAL_INFO = 'gateway refresh grace v1';

export interface RefreshTokenParts {
  accountId: string;
  keyId: string;
  familyId: string;
  tokenId: string;
  secret: string;
  /** The family's granted scopes; absent when the sign-in did not narrow the key's. */
  scopes?: readonly string[];
}

export interface MintedRefreshToken extends RefreshTokenParts {
  token: string;
  secretHash: string;
}

/**
 * Random bytes are drawn a block at a time, as randomUUID does: one randomFillSync per 4 KiB
 * instead of a call (about 1.5 µs) for each of the three ids or secrets an operation makes.
 * Every byte of a block is handed out once; a block is process memory like the secrets made
 * from it, and a worker is a process of its own with its own pool.
 */
const pool = Buffer.allocUnsafe(4096);
let poolOffset = pool.length;

function randomSpan(bytes: number): number {
  if (poolOffset + bytes > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += bytes;
  return at;
}

function randomText(bytes: number): string {
  const at = randomSpan(bytes);
  return pool.toString('base64url', at, at + bytes);
}

export function newId(): string {
  return randomText(16);
}

export function mintRefreshToken(accountId: string, keyId: string, familyId: string, scopes?: readonly string[]): MintedRefreshToken {
  const tokenId = newId();
  const secret = randomText(SECRET_BYTES);
  const parts = scopes === undefined ? [accountId, keyId, familyId, tokenId] : [accountId, keyId, familyId, tokenId, scopes.join(' ')];
  const handle = Buffer.from(JSON.stringify(parts)).toString('base64url');
  return { token: `${handle}.${secret}`, accountId, keyId, familyId, tokenId, secret, secretHash: hashRefreshSecret(secret), ...(scopes === undefined ? {} : { scopes }) };
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
  if (!Array.isArray(handle) || (handle.length !== 4 && handle.length !== 5) || !handle.slice(0, 4).every((part) => typeof part === 'string' && ID_PATTERN.test(part))) {
    return undefined;
  }
  const [accountId, keyId, familyId, tokenId, grant] = handle as [string, string, string, string, unknown];
  if (handle.length === 4) return { accountId, keyId, familyId, tokenId, secret };
  const scopes = parseGrant(grant);
  return scopes === undefined ? undefined : { accountId, keyId, familyId, tokenId, secret, scopes };
}

/** A handle's grant: scope tokens separated by single spaces, each once, in order (as minted). */
function parseGrant(grant: unknown): readonly string[] | undefined {
  if (typeof grant !== 'string' || grant.length > MAX_GRANT_LENGTH) return undefined;
  const scopes = grant.split(' ');
  return scopes.every((scope, i) => SCOPE_PATTERN.test(scope) && (i === 0 || scopes[i - 1]! < scope)) ? scopes : undefined;
}

/**
 * The `sid` claim of the access tokens minted in a family: a digest, not the family id itself,
 * which is a part of the refresh token's handle (and the key of its family's refresh limit) that
 * backends seeing access tokens need not learn.
 */
export function sessionOf(familyId: string): string {
  return hash('sha256', `gateway session v1:${familyId}`, 'base64url').slice(0, 22);
}

export function hashRefreshSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  /**
   * How the access token is sent (RFC 6749 §7.1): `DPoP` for one bound to a DPoP key (RFC 9449
   * §5), else `Bearer`. Absent from pairs sealed by an earlier version (read as Bearer).
   */
  token_type?: 'Bearer' | 'DPoP';
}

/**
 * A KeyObject, not the Buffer: given a Buffer, Node 24's createCipheriv first tries it as a
 * KeyObject, and that check throws and catches a TypeError (9 µs a call against 1 µs).
 */
function sealKey(secret: string): KeyObject {
  return createSecretKey(createHmac('sha256', secret).update(SEAL_INFO).digest());
}

export function sealPair(pair: TokenPair, secret: string): string {
  const at = randomSpan(12);
  const iv = Buffer.from(pool.subarray(at, at + 12));
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
