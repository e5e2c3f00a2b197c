/**
 * The run's signing key, and access tokens for the load of bench:proxy and bench:limits, made
 * as the gateway's signer makes them (src/auth/signer.ts), so the gateway under test verifies
 * real tokens: one key (`kid` "bench"), distinct `jti`s, `acct_bench_<i % accounts>` as subject.
 */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { fmt, log } from './report.js';

export const ISSUER = 'auth-gateway';
export const KID = 'bench';
/** The gateway's default access-token lifetime: a run must re-mint before its tokens age out. */
export const TOKEN_LIFETIME_S = 900;

/** An Ed25519 key made for the run: as the gateway's SIGNING_KEYS reads it, and its public half for the peers. */
export interface SigningKey {
  privateKey: KeyObject;
  signingKeys: string;
  publicPem: string;
}

export function makeSigningKey(): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey,
    signingKeys: JSON.stringify([{ kid: KID, alg: 'EdDSA', pem: privateKey.export({ type: 'pkcs8', format: 'pem' }) }]),
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

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

/**
 * The load's tokens in one file, one a line (wrk's bearer.lua reads them round-robin), minted
 * anew when the oldest would not outlive the next run: the gateway refuses tokens older than
 * their lifetime.
 */
export class TokenSupply {
  readonly #privateKey: KeyObject;
  readonly #count: number;
  readonly #accounts: number;
  #tokens: Tokens;

  private constructor(privateKey: KeyObject, count: number, accounts: number, tokens: Tokens) {
    this.#privateKey = privateKey;
    this.#count = count;
    this.#accounts = accounts;
    this.#tokens = tokens;
  }

  /** `count` tokens of `accounts` accounts into `<dir>/tokens.txt`, the time it took logged. */
  static async mint(name: string, privateKey: KeyObject, dir: string, count: number, accounts: number): Promise<TokenSupply> {
    const start = performance.now();
    const tokens = await mintTokens(privateKey, join(dir, 'tokens.txt'), count, accounts);
    log(`${name}: ${count} distinct tokens (${accounts} accounts) minted in ${fmt((performance.now() - start) / 1000, 1)} s`);
    return new TokenSupply(privateKey, count, accounts, tokens);
  }

  /** The file the tokens are in (bench/wrk/bearer.lua's argument). */
  get file(): string {
    return this.#tokens.file;
  }

  /**
   * Mints every token anew, now: for a gateway started after them, which refuses access tokens
   * issued before it started (its resets would have died with an earlier process:
   * src/stores/revocation.memory.ts; on Redis, before the epoch began).
   */
  async renew(): Promise<void> {
    this.#tokens = await mintTokens(this.#privateKey, this.#tokens.file, this.#count, this.#accounts);
  }

  /** The file, its tokens young enough to outlast a run of `seconds` with a minute to spare. */
  async fileFor(seconds: number): Promise<string> {
    if (Date.now() - this.#tokens.mintedAt > (TOKEN_LIFETIME_S - seconds - 60) * 1000) {
      log('  tokens near the end of their lifetime: minting new ones');
      await this.renew();
    }
    return this.#tokens.file;
  }
}
