/**
 * How an API secret is kept. A client sends SHA-256 of its secret (hashSecret) at sign-in; a
 * key directory stores only "sha256:" and the hex SHA-256 of those 32 bytes (secretDigest), so
 * neither the secret nor what a client sends is ever stored. Here, not in auth/, because the
 * data file and the stores check and write digests too. A leaf: node:crypto only.
 */
import { createHash } from 'node:crypto';

/** What a key directory stores for a secret. */
export const SECRET_DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** What the directory stores for a secret: "sha256:" + hex SHA-256 of the client's 32 bytes. */
export function secretDigest(secretHash: Buffer): string {
  return `sha256:${createHash('sha256').update(secretHash).digest('hex')}`;
}

/** SHA-256 of the plain secret, as a client computes it before sign-in. */
export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}
