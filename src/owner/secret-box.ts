/**
 * TOTP secrets at rest (owner/totp.ts): sealed with AES-256-GCM under `owner.secondFactorKey`
 * when it is set, so a copy of the data file or of Redis holds no secret that makes codes.
 * Sealed: `v1.<iv>.<ciphertext>.<tag>`, base64url, the owner's id bound in as associated data
 * (a sealed secret copied to another owner does not open). Without a key a secret is kept as it
 * is (base32), and opened as it is; with one, a secret kept before the key was set still opens,
 * and is sealed at its next enrollment. A secret that does not open (another key) matches no
 * code: the owner signs in with a recovery code and enrolls again.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const SEALED = /^v1\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{1,128})\.([A-Za-z0-9_-]{22})$/;

export interface SecretBox {
  seal(secret: string, ownerId: string): string;
  /** The secret, or undefined when it does not open. */
  open(stored: string, ownerId: string): string | undefined;
}

export function createSecretBox(key: string | undefined): SecretBox {
  if (key === undefined) {
    return { seal: (secret) => secret, open: (stored) => (SEALED.test(stored) ? undefined : stored) };
  }
  const aesKey = createHash('sha256').update(`gw-totp-v1|${key}`, 'utf8').digest();
  return {
    seal(secret, ownerId) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', aesKey, iv).setAAD(Buffer.from(ownerId, 'utf8'));
      const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return `v1.${iv.toString('base64url')}.${sealed.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}`;
    },
    open(stored, ownerId) {
      const m = SEALED.exec(stored);
      if (m === null) return stored;
      try {
        const decipher = createDecipheriv('aes-256-gcm', aesKey, Buffer.from(m[1]!, 'base64url')).setAAD(Buffer.from(ownerId, 'utf8'));
        decipher.setAuthTag(Buffer.from(m[3]!, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(m[2]!, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        return undefined;
      }
    },
  };
}
