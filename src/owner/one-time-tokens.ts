/**
 * The one-time tokens mailed to an owner (a password reset, an email verification): a prefix,
 * 43 base62 characters (256 bits) and, after a ".", the owner's id, so that a token finds its
 * owner without an index; only the SHA-256 of the whole token is kept, on the owner record, with
 * its end. A token is compared with the kept digest in constant time; anything malformed,
 * unknown, replaced, used or past its end is one answer.
 */
import { timingSafeEqual } from 'node:crypto';
import { ID_PATTERN } from '../domain/formats.js';
import { randomBase62 } from '../domain/random.js';
import { secretDigest } from '../domain/secrets.js';

const SECRET = /^[0-9A-Za-z]{43}$/;

export function makeOneTimeToken(prefix: string, ownerId: string): { token: string; digest: string } {
  const token = `${prefix}${randomBase62(43)}.${ownerId}`;
  return { token, digest: tokenDigest(token) };
}

export function tokenDigest(token: string): string {
  return secretDigest(Buffer.from(token, 'utf8'));
}

/** The owner a well-formed token names, or undefined. */
export function ownerOfToken(prefix: string, token: string): string | undefined {
  if (!token.startsWith(prefix)) return undefined;
  const dot = token.indexOf('.', prefix.length);
  if (dot === -1) return undefined;
  const [secret, ownerId] = [token.slice(prefix.length, dot), token.slice(dot + 1)];
  return SECRET.test(secret) && ID_PATTERN.test(ownerId) ? ownerId : undefined;
}

/** True when `token` is the one `kept` names and `kept` has not ended at `now`. */
export function matchesKept(token: string, kept: { digest: string; expiresAt: string } | undefined, now: number): boolean {
  if (kept === undefined || Date.parse(kept.expiresAt) <= now) return false;
  const [a, b] = [Buffer.from(tokenDigest(token)), Buffer.from(kept.digest)];
  return a.length === b.length && timingSafeEqual(a, b);
}
