/**
 * DPoP proofs (RFC 9449 §4.2) made with jose, as a client makes them, and made wrong on purpose
 * (a stale `iat`, another key, a private `jwk`, `alg: none`) for the refusal tests.
 */
import { createHash, randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

export interface ProofKey {
  privateKey: CryptoKey;
  publicJwk: JWK;
  /** RFC 7638 SHA-256 thumbprint, base64url: what `cnf.jkt` must say. */
  thumbprint: string;
  alg: string;
}

export async function makeProofKey(alg = 'ES256'): Promise<ProofKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  return { privateKey, publicJwk, thumbprint: await calculateJwkThumbprint(publicJwk, 'sha256'), alg };
}

export interface ProofClaims {
  htm: string;
  htu: string;
  /** Seconds; default now (the caller passes the gateway's clock). */
  iat: number;
  /** The access token the proof goes with: `ath` is its SHA-256. */
  accessToken?: string;
  jti?: string;
  nonce?: string;
  /** Extra or replaced claims (undefined deletes one). */
  claims?: Record<string, unknown>;
  /** Header members replaced (`typ`, `jwk` …). */
  header?: Record<string, unknown>;
}

export function accessTokenHash(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

export async function makeProof(key: ProofKey, { htm, htu, iat, accessToken, jti = randomUUID(), nonce, claims = {}, header = {} }: ProofClaims): Promise<string> {
  const payload: Record<string, unknown> = { htm, htu, iat, jti, ...(accessToken === undefined ? {} : { ath: accessTokenHash(accessToken) }), ...(nonce === undefined ? {} : { nonce }), ...claims };
  for (const name of Object.keys(payload)) if (payload[name] === undefined) delete payload[name];
  return new SignJWT(payload).setProtectedHeader({ alg: key.alg, typ: 'dpop+jwt', jwk: key.publicJwk, ...header }).sign(key.privateKey);
}

/** A JWS with `alg: none` and no signature: refused by every verifier worth the name. */
export function unsignedProof(key: ProofKey, claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'dpop+jwt', jwk: key.publicJwk })}.${part(claims)}.`;
}
