/**
 * The run's signing key, and access tokens for the load of bench:proxy, bench:limits and
 * bench:memory, made as the gateway's signer makes them (src/auth/signer.ts): header
 * `{alg, kid: "bench", typ: "at+jwt"}`, the gateway's claims, distinct `jti`s,
 * `acct_bench_<i % accounts>` as subject. Signed synchronously by fast-jwt's signer
 * (node:crypto): jose's SignJWT goes through WebCrypto, a thread-pool hop per token, which
 * makes minting a hundred thousand tokens, or one per request as bench:memory does, slow. An
 * Ed25519 private key signs EdDSA tokens, a secret key HS256 ones (for the HS256 floor).
 */
import { createSecretKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSigner } from 'fast-jwt';
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

/** An HS256 secret made for the run (the HS256 floor's key): the key, and its bytes as base64url for the server's environment. */
export function makeHmacSecret(): { key: KeyObject; base64url: string } {
  const bytes = randomBytes(32);
  return { key: createSecretKey(bytes), base64url: bytes.toString('base64url') };
}

type Sign = (payload: Record<string, unknown>) => string;
const signers = new WeakMap<KeyObject, Sign>();

function signerFor(key: KeyObject): Sign {
  let sign = signers.get(key);
  if (sign === undefined) {
    sign = key.type === 'secret'
      ? createSigner({ key: Buffer.from(key.export()), algorithm: 'HS256', kid: KID, header: { alg: 'HS256', typ: 'at+jwt' } })
      : createSigner({ key: key.export({ type: 'pkcs8', format: 'pem' }) as string, algorithm: 'EdDSA', kid: KID, header: { alg: 'EdDSA', typ: 'at+jwt' } });
    signers.set(key, sign);
  }
  return sign;
}

/**
 * One access token, signed now by `key`: EdDSA for an Ed25519 private key, HS256 for a secret
 * key; the gateway's header fields and claims.
 */
export function mintToken(key: KeyObject, i: number, accounts: number): string {
  const now = Date.now();
  const iat = Math.floor(now / 1000);
  return signerFor(key)({
    client_id: 'key_bench', iat_ms: now, iss: ISSUER, aud: ISSUER, sub: `acct_bench_${i % accounts}`,
    jti: randomBytes(16).toString('base64url'), iat, exp: iat + TOKEN_LIFETIME_S,
  });
}

export interface Tokens {
  file: string;
  /** When minting began: the oldest token's issue time, ms. */
  mintedAt: number;
}

/** `count` distinct tokens, one a line, into `file` (wrk's bearer.lua reads them round-robin). */
export function mintTokens(key: KeyObject, file: string, count: number, accounts: number): Tokens {
  const mintedAt = Date.now();
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) tokens.push(mintToken(key, i, accounts));
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
  readonly #key: KeyObject;
  readonly #count: number;
  readonly #accounts: number;
  #tokens: Tokens;

  private constructor(key: KeyObject, count: number, accounts: number, tokens: Tokens) {
    this.#key = key;
    this.#count = count;
    this.#accounts = accounts;
    this.#tokens = tokens;
  }

  /**
   * `count` tokens of `accounts` accounts signed by `key` (see mintToken) into `<dir>/<file>`,
   * the time it took logged.
   */
  static async mint(name: string, key: KeyObject, dir: string, count: number, accounts: number, file = 'tokens.txt'): Promise<TokenSupply> {
    const start = performance.now();
    const tokens = mintTokens(key, join(dir, file), count, accounts);
    log(`${name}: ${count} distinct ${key.type === 'secret' ? 'HS256' : 'EdDSA'} token(s) (${Math.min(count, accounts)} accounts) minted in ${fmt((performance.now() - start) / 1000, 1)} s`);
    return new TokenSupply(key, count, accounts, tokens);
  }

  /** How many distinct tokens the file holds. */
  get count(): number {
    return this.#count;
  }

  /** The file the tokens are in (bench/wrk/bearer.lua's argument). */
  get file(): string {
    return this.#tokens.file;
  }

  /**
   * Mints every token anew, now: for a gateway started after them, which refuses access tokens
   * issued before it started (its resets would have died with an earlier process:
   * src/state/revocation/memory.ts; on Redis, before the epoch began).
   */
  async renew(): Promise<void> {
    this.#tokens = mintTokens(this.#key, this.#tokens.file, this.#count, this.#accounts);
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
