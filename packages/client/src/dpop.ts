/**
 * DPoP (RFC 9449): proofs of possession of a key this client holds, so that its tokens are of no
 * use to whoever copies them. With `dpop` set, sign-in and refresh carry a proof (the gateway
 * then binds the pair to the key: `cnf.jkt`), and every call with a bound token sends it as
 * `Authorization: DPoP <token>` with a fresh proof for that very request (method, URL without
 * query, the token's hash as `ath`).
 *
 * The key: by default an ECDSA P-256 pair made with Web Crypto whose private half is not
 * extractable (no script, this one included, can read it out: it can only sign); or a
 * CryptoKeyPair the application made (and perhaps keeps in IndexedDB, so a reload keeps its
 * binding); or, in Node, a private KeyObject, imported into Web Crypto as not extractable.
 * Signing is Web Crypto's; the proof is a compact JWS written here (a header, a payload and a
 * signature: the client has no runtime dependency).
 *
 * Nonces (§8, §9): a `DPoP-Nonce` header on any answer is kept and put in the next proofs; a 401
 * `use_dpop_nonce` is answered by one retry with the nonce it carried.
 */
import type { DpopCryptoKey, DpopKeyObject, DpopKeyPair, DpopOption, Jwk } from './dpop-types.js';
import { ConfigurationError } from './errors.js';


interface ProofKey {
  privateKey: DpopCryptoKey;
  /** The public key as the proof's `jwk` header: its public members only. */
  jwk: Jwk;
  alg: 'ES256' | 'EdDSA';
  sign: { name: string; hash?: string };
}

const ECDSA_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;

export class DpopProver {
  readonly #key: Promise<ProofKey>;
  #nonce: string | undefined;

  constructor(option: DpopOption) {
    this.#key = loadKey(option);
    // An unhandled rejection now would be noise: the first proof reports it.
    this.#key.catch(() => {});
  }

  /** A proof for `method` on `url` (its query and fragment left out), with `ath` when `accessToken` is given. */
  async proof(method: string, url: URL, accessToken?: string): Promise<string> {
    const key = await this.#key;
    const header = { typ: 'dpop+jwt', alg: key.alg, jwk: key.jwk };
    const payload: Record<string, unknown> = {
      jti: globalThis.crypto.randomUUID(),
      htm: method.toUpperCase(),
      htu: `${url.origin}${url.pathname}`,
      iat: Math.floor(Date.now() / 1000),
    };
    if (accessToken !== undefined) payload.ath = base64url(await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(accessToken)));
    if (this.#nonce !== undefined) payload.nonce = this.#nonce;
    const input = `${base64url(json(header))}.${base64url(json(payload))}`;
    const signature = await globalThis.crypto.subtle.sign(key.sign, key.privateKey as never, new TextEncoder().encode(input));
    return `${input}.${base64url(signature)}`;
  }

  /**
   * Sends with a proof, and once more with a new one when the gateway answers 401
   * `use_dpop_nonce` (`replayable`: false for a body that cannot be sent twice). Keeps any nonce.
   */
  async send(method: string, url: URL, accessToken: string | undefined, replayable: boolean, attempt: (proof: string) => Promise<Response>): Promise<Response> {
    for (let tried = 0; ; tried++) {
      const res = await attempt(await this.proof(method, url, accessToken));
      const nonce = res.headers.get('dpop-nonce');
      if (nonce !== null && /^[\x21\x23-\x5b\x5d-\x7e]{1,256}$/.test(nonce)) this.#nonce = nonce;
      if (tried > 0 || !replayable || nonce === null || res.status !== 401 || !/error="?use_dpop_nonce"?/.test(res.headers.get('www-authenticate') ?? '')) return res;
      await res.body?.cancel().catch(() => {});
    }
  }
}

/** Whether an access token says it is DPoP-bound (`cnf.jkt` in its payload); an unreadable one is taken as not. */
export function isDpopBound(token: string): boolean {
  const part = token.split('.')[1];
  if (part === undefined) return false;
  try {
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/');
    const binary = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    const payload = JSON.parse(new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)))) as { cnf?: { jkt?: unknown } };
    return typeof payload?.cnf?.jkt === 'string';
  } catch {
    return false;
  }
}

async function loadKey(option: DpopOption): Promise<ProofKey> {
  const subtle = globalThis.crypto?.subtle;
  if (subtle === undefined) throw new ConfigurationError({ code: 'invalid_configuration', description: 'dpop: this platform has no Web Crypto (crypto.subtle); pages need a secure context (https)' });
  if (option === true) {
    const pair = await subtle.generateKey(ECDSA_P256, false, ['sign', 'verify']) as unknown as DpopKeyPair;
    return fromPair(pair);
  }
  if (isKeyObject(option.privateKey)) return fromKeyObject(option.privateKey);
  return fromPair(option as DpopKeyPair);
}

function isKeyObject(key: unknown): key is DpopKeyObject {
  // A CryptoKey has no export method; a KeyObject has.
  return typeof key === 'object' && key !== null && typeof (key as DpopKeyObject).export === 'function' && typeof (key as DpopKeyObject).type === 'string';
}

async function fromPair(pair: DpopKeyPair): Promise<ProofKey> {
  const { alg, sign } = algorithmOf(pair.privateKey?.algorithm);
  // A public key is always extractable, whatever the private half is.
  const jwk = publicMembers(await globalThis.crypto.subtle.exportKey('jwk', pair.publicKey as never) as Jwk);
  return { privateKey: pair.privateKey, jwk, alg, sign };
}

async function fromKeyObject(key: DpopKeyObject): Promise<ProofKey> {
  if (key.type !== 'private') throw new ConfigurationError({ code: 'invalid_configuration', description: 'dpop.privateKey: a private KeyObject is needed' });
  const jwk = key.export({ format: 'jwk' }) as Jwk;
  const algorithm = jwk.kty === 'EC' && jwk.crv === 'P-256' ? ECDSA_P256 : jwk.kty === 'OKP' && jwk.crv === 'Ed25519' ? { name: 'Ed25519' } : undefined;
  if (algorithm === undefined) throw new ConfigurationError({ code: 'invalid_configuration', description: 'dpop.privateKey: an EC P-256 or Ed25519 key is needed' });
  // Imported not extractable: from here on the client can only sign with it.
  const privateKey = await globalThis.crypto.subtle.importKey('jwk', jwk as never, algorithm, false, ['sign']) as unknown as DpopCryptoKey;
  const { alg, sign } = algorithmOf(privateKey.algorithm);
  return { privateKey, jwk: publicMembers(jwk), alg, sign };
}

function algorithmOf(algorithm: DpopCryptoKey['algorithm'] | undefined): Pick<ProofKey, 'alg' | 'sign'> {
  if (algorithm?.name === 'ECDSA' && algorithm.namedCurve === 'P-256') return { alg: 'ES256', sign: { name: 'ECDSA', hash: 'SHA-256' } };
  if (algorithm?.name === 'Ed25519') return { alg: 'EdDSA', sign: { name: 'Ed25519' } };
  throw new ConfigurationError({ code: 'invalid_configuration', description: 'dpop: an ECDSA P-256 or Ed25519 key pair is needed' });
}

/** RFC 9449 §4.2: the `jwk` header holds the public key and nothing private. */
function publicMembers({ kty, crv, x, y }: Jwk): Jwk {
  return { kty, crv, x, ...(y === undefined ? {} : { y }) };
}

function json(value: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(value));
}

function base64url(bytes: ArrayBuffer | Uint8Array): string {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let binary = '';
  for (const b of view) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * One attempt with `token`: as `DPoP` with a proof when the client has a key and the token is
 * bound to one, else as `Bearer` (an unbound token sent as DPoP is refused). `attempt` gets the
 * headers to set.
 */
export function sendAuthorized(prover: DpopProver | undefined, method: string, url: URL, token: string, replayable: boolean,
  attempt: (headers: Record<string, string>) => Promise<Response>): Promise<Response> {
  if (prover === undefined || !isDpopBound(token)) return attempt({ authorization: `Bearer ${token}` });
  return prover.send(method, url, token, replayable, (proof) => attempt({ authorization: `DPoP ${token}`, dpop: proof }));
}
