/**
 * Access tokens for the load of bench:proxy and bench:limits, made as the gateway's signer
 * makes them (src/auth/signer.ts), so the gateway under test verifies real tokens: one key
 * (`kid` "bench"), distinct `jti`s, `acct_bench_<i % accounts>` as subject.
 */
import { randomBytes, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { SignJWT } from 'jose';

export const ISSUER = 'auth-gateway';
export const KID = 'bench';
/** The gateway's default access-token lifetime: a run must re-mint before its tokens age out. */
export const TOKEN_LIFETIME_S = 900;

export interface Tokens {
  file: string;
  /** When minting began: the oldest token's issue time, ms. */
  mintedAt: number;
}

export async function mintToken(privateKey: KeyObject, i: number, accounts: number): Promise<string> {
  const now = Date.now();
  const iat = Math.floor(now / 1000);
  return new SignJWT({ client_id: 'key_bench', iat_ms: now })
    .setProtectedHeader({ alg: 'EdDSA', kid: KID, typ: 'at+jwt' })
    .setIssuer(ISSUER)
    .setAudience(ISSUER)
    .setSubject(`acct_bench_${i % accounts}`)
    .setJti(randomBytes(16).toString('base64url'))
    .setIssuedAt(iat)
    .setExpirationTime(iat + TOKEN_LIFETIME_S)
    .sign(privateKey);
}

/** `count` distinct tokens, one a line, into `file` (wrk's bearer.lua reads them round-robin). */
export async function mintTokens(privateKey: KeyObject, file: string, count: number, accounts: number): Promise<Tokens> {
  const mintedAt = Date.now();
  const tokens: string[] = [];
  for (let i = 0; i < count; i += 256) {
    tokens.push(...await Promise.all(Array.from({ length: Math.min(256, count - i) }, (_, j) => mintToken(privateKey, i + j, accounts))));
  }
  if (new Set(tokens).size !== tokens.length) throw new Error('minted tokens are not distinct');
  writeFileSync(file, `${tokens.join('\n')}\n`);
  return { file, mintedAt };
}
