/**
 * The DPoP option's types (dpop.ts does the work): apart, so that the client's options
 * (types.ts) name them without importing the prover and what it imports.
 */
/** A JWK's members this reads. */
export interface Jwk {
  kty?: string | undefined;
  crv?: string | undefined;
  x?: string | undefined;
  y?: string | undefined;
}

/**
 * A Web Crypto key, typed by what this reads of it: the package compiles with the DOM's types,
 * and the repository's tests compile it with Node's, which name Web Crypto's types apart.
 */
export interface DpopCryptoKey {
  readonly type: string;
  readonly algorithm: { readonly name: string; readonly namedCurve?: string };
}

/** A Web Crypto key pair (a `CryptoKeyPair`). */
export interface DpopKeyPair {
  privateKey: DpopCryptoKey;
  publicKey: DpopCryptoKey;
}

/** What a Node `KeyObject` offers that this needs (no `node:` import: the package runs in browsers). */
export interface DpopKeyObject {
  readonly type: string;
  export(options: { format: 'jwk' }): object;
}

/** `true`: a new non-extractable ES256 key; or the application's key pair; or a Node private KeyObject (P-256 or Ed25519). */
export type DpopOption = true | DpopKeyPair | { privateKey: DpopKeyObject };
