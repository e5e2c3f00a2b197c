/**
 * Access tokens: JWTs (RFC 9068 profile, `typ: at+jwt`), signed with node:crypto's synchronous
 * sign() (see createTokenSigner), verified with fast-jwt (synchronous node:crypto too: the check
 * every proxied request pays, see createAccessTokenVerifier).
 *
 * Several keys may be configured; one signs, all verify, and all public halves are published
 * in the JWKS, so a key is rotated by adding the new one, making it active, and removing the
 * old one after the access-token lifetime. Verification pins everything a forger could vary:
 * the `kid` (looked up in our own key set only) and with it the one algorithm of that key (so
 * `alg: none`, HMAC-with-the-public-key and cross-key confusions fail), issuer, audience,
 * `typ`, the claims and their times. Library errors become InvalidToken here and nowhere else.
 *
 * A token verified once is answered from a cache of verified tokens when presented again
 * (auth/verified-tokens.ts; its times and key are checked on every hit), and the key set can
 * be replaced while running (useKeys), which drops the cached tokens of keys that went away.
 *
 * A token has one accepted spelling: of the several byte strings that verify as one signature
 * (base64url's spare bits, ECDSA's `s` and `n − s`, an RSA integer without its leading zero
 * byte), only the one the gateway itself produces is accepted; test/unit/signer.test.ts holds
 * it for every algorithm.
 */
import { constants, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { createVerifier } from 'fast-jwt';
import { decodeProtectedHeader, type JSONWebKeySet, type JWK, type JWTPayload } from 'jose';
import type { Config, SigningKeyConfig } from '../config/schema.js';
import { InvalidToken } from '../errors/errors.js';
import type { Clock } from '../util/clock.js';
import { OperatorFileError, readOperatorFile } from '../util/operator-file.js';
import { newId } from './refresh.js';
import { createVerifiedTokenCache, type VerifiedTokenStats } from './verified-tokens.js';

export const ACCESS_TOKEN_TYPE = 'at+jwt';

/** The message of an expired token's InvalidToken (metrics tell expiry from other refusals by it). */
export const EXPIRED = 'The access token has expired.';
/** Longest compact JWS we will parse; ours are a few hundred bytes. */
const MAX_TOKEN_LENGTH = 4096;

export interface AccessTokenClaims {
  /** Account id. */
  sub: string;
  /** API key id (RFC 9068 §2.2: the client the token was issued to). */
  client_id: string;
  jti: string;
  /** Seconds since the epoch. */
  iat: number;
  /**
   * The issue time in milliseconds (the same instant as `iat`): what a token reset compares
   * against, since a reset and a sign-in may fall in the same second.
   */
  iat_ms: number;
  /**
   * The token-reset store's epoch it was issued under (auth/revocation.ts): a token from an
   * epoch that is no longer the store's is refused, since the resets before it may be lost.
   * Absent on tokens issued while the epoch could not be read (and by earlier versions).
   */
  reset_epoch?: number;
  exp: number;
  /** Space-separated scopes of the key (RFC 9068 §2.2.3); absent when it has none. */
  scope?: string;
  /**
   * RFC 8705 §3.1: the token is bound to the client certificate whose SHA-256 (base64url) this
   * is; a request presenting another certificate, or none, may not use it. Absent: unbound.
   */
  cnf?: {
    'x5t#S256'?: string;
    /**
     * RFC 9449 §6.1: the token is DPoP-bound to the key with this RFC 7638 thumbprint (SHA-256,
     * base64url); every call must come with a proof by that key (auth/dpop.ts).
     */
    jkt?: string;
  };
  /**
   * The sign-in session the token was minted in: a digest of its refresh-token family's id
   * (auth/refresh.ts `sessionOf`), so that revoking the family (POST /api/revoke) refuses its
   * access tokens too (RFC 7009 §2.1). Absent on tokens of earlier versions.
   */
  sid?: string;
}

/** A SHA-256 in base64url without padding: 43 characters. */
const THUMBPRINT = /^[A-Za-z0-9_-]{43}$/;

/** What a backend behind a route learns about the caller, signed (see issueAssertion). */
export interface AssertionSubject {
  accountId: string;
  keyId: string;
  tokenId: string;
  scopes: readonly string[];
  /** The route's name: the assertion's `aud`, so one route's assertion is no good at another. */
  audience: string;
  requestId: string;
  /** A trusted issuer's token: its issuer (`token_iss`) and roles (`roles`). */
  issuer?: string | undefined;
  roles?: readonly string[] | undefined;
}

export const ASSERTION_TYPE = 'gateway-assertion+jwt';

export interface Signer {
  /** Signs a new access token for the key's account; `jti`, `iat`, `exp` are set here. */
  issueAccessToken(subject: { accountId: string; keyId: string; scopes?: readonly string[]; epoch?: number; certificateThumbprint?: string | undefined; session?: string | undefined; dpopThumbprint?: string | undefined }): Promise<string>;
  /**
   * A short-lived JWT for a backend (typ `gateway-assertion+jwt`, signed by the same keys, so
   * the JWKS verifies it): who called, through which route, for which request.
   */
  issueAssertion(subject: AssertionSubject): Promise<string>;
  /**
   * The verified claims (frozen), or InvalidToken for anything else. A token verified before is
   * answered from the verified-token cache (auth/verified-tokens.ts) after its times are checked
   * again; whether it was reset, and what it may do, is for the caller to check every time.
   */
  verifyAccessToken(token: string): Promise<AccessTokenClaims>;
  /**
   * Replaces the key set at run time (a reload): validated as at start-up, and on any problem
   * SigningKeyError with the old set still in use. Tokens of a key that is gone, or whose kid
   * now names another key, stop verifying at once (their cached entries are dropped).
   */
  useKeys(signing: Config['signing']): void;
  /** Size of the verified-token cache (tests, metrics). */
  verifiedTokenStats(): VerifiedTokenStats;
  /** Empties the verified-token cache (the reset store lost its data: nothing cached before is kept). */
  forgetVerifiedTokens(): void;
  /** The public keys, for /.well-known/jwks.json (the current set's). */
  readonly jwks: JSONWebKeySet;
  /** True when the signing key was made at start-up and dies with the process. */
  readonly isEphemeral: boolean;
}

interface LoadedKey {
  kid: string;
  alg: SigningKeyConfig['alg'];
  privateKey?: KeyObject;
  publicKey: KeyObject;
  publicJwk: JWK;
}

/** A verifier of one key's access tokens (createAccessTokenVerifier). */
type Verify = (token: string, signature: Buffer) => unknown;

/**
 * Everything that follows from the configured keys, replaced as a whole by useKeys: a request
 * sees the old set or the new one, never a mix.
 */
interface KeySet {
  keys: LoadedKey[];
  isEphemeral: boolean;
  jwks: JSONWebKeySet;
  /** kid → verifier. A verifier object stands for one (kid, alg, public key) binding. */
  verifiers: Map<string, Verify>;
  signWith: (typ: string, payload: JWTPayload) => string;
  /**
   * With one key (the usual case) the header is not decoded up front: the verifier decodes it
   * anyway, and the kid is checked after. Decoding it twice was 2 % of a proxied request.
   */
  onlyKid: string | undefined;
}

/** What the verified-token cache keeps of a token: its frozen claims, and which key checked them. */
interface VerifiedEntry {
  claims: AccessTokenClaims;
  kid: string;
  verify: Verify;
}

export function createSigner(config: Pick<Config, 'signing' | 'tokens' | 'proxy'>, clock: Clock): Signer {
  const { issuer, audience, accessTokenTtlSeconds, clockSkewSeconds, verifiedCacheMaxEntries, verifiedCacheMaxBytes } = config.tokens;
  let keySet = loadKeySet(config.signing, config.tokens);
  const verified = createVerifiedTokenCache<VerifiedEntry>({ maxEntries: verifiedCacheMaxEntries, maxBytes: verifiedCacheMaxBytes, clock });

  const assertionTtlSeconds = config.proxy.assertionTtlSeconds;

  /** Every JWT the gateway issues: its active key, its issuer, a fresh `jti`, `iat` and `exp`. */
  async function sign(claims: JWTPayload, { typ, audience: aud, subject, now, ttlSeconds }: { typ: string; audience: string; subject: string; now: number; ttlSeconds: number }): Promise<string> {
    const iat = Math.floor(now / 1000);
    // The claims in the order jose's SignJWT wrote them, so tokens read as they always did.
    return keySet.signWith(typ, { ...claims, iss: issuer, aud, sub: subject, jti: newId(), iat, exp: iat + ttlSeconds });
  }

  return {
    get jwks() {
      return keySet.jwks;
    },
    get isEphemeral() {
      return keySet.isEphemeral;
    },

    async issueAccessToken({ accountId, keyId, scopes = [], epoch, certificateThumbprint, session, dpopThumbprint }) {
      const now = clock.now();
      const cnf = certificateThumbprint === undefined && dpopThumbprint === undefined ? {} : {
        cnf: { ...(certificateThumbprint === undefined ? {} : { 'x5t#S256': certificateThumbprint }), ...(dpopThumbprint === undefined ? {} : { jkt: dpopThumbprint }) },
      };
      const sid = session === undefined ? {} : { sid: session };
      return sign({ client_id: keyId, iat_ms: now, ...(epoch === undefined ? {} : { reset_epoch: epoch }), ...scopeClaim(scopes), ...cnf, ...sid }, { typ: ACCESS_TOKEN_TYPE, audience, subject: accountId, now, ttlSeconds: accessTokenTtlSeconds });
    },

    async issueAssertion({ accountId, keyId, tokenId, scopes, audience: routeName, requestId, issuer: tokenIssuer, roles }) {
      const external = { ...(tokenIssuer === undefined ? {} : { token_iss: tokenIssuer }), ...(roles === undefined ? {} : { roles: [...roles] }) };
      return sign({ client_id: keyId, token_jti: tokenId, request_id: requestId, ...scopeClaim(scopes), ...external },
        { typ: ASSERTION_TYPE, audience: routeName, subject: accountId, now: clock.now(), ttlSeconds: assertionTtlSeconds });
    },

    async verifyAccessToken(token) {
      const keys = keySet;
      // Longer strings are never cached: not worth hashing for the look-up.
      const hit = token.length > MAX_TOKEN_LENGTH ? undefined : verified.get(token);
      // A hit counts only while its kid is still bound to the verifier that checked it (useKeys
      // drops the others at once; this holds even for one it missed), and only within its
      // times, by the gateway's clock now.
      if (hit !== undefined) {
        if (keys.verifiers.get(hit.kid) !== hit.verify) {
          verified.forget(token);
        } else {
          try {
            checkTimes(hit.claims as unknown as Record<string, unknown>, Math.floor(clock.now() / 1000), config.tokens);
          } catch (err) {
            verified.forget(token);
            throw err;
          }
          return hit.claims;
        }
      }
      const entry = verifyInFull(token, keys, clock, config.tokens);
      const { exp, iat } = entry.claims;
      verified.remember(token, entry, (Math.min(exp, iat + accessTokenTtlSeconds) + clockSkewSeconds) * 1000);
      return entry.claims;
    },

    useKeys(signing) {
      const next = loadKeySet(signing, config.tokens, keySet);
      keySet = next;
      verified.dropWhere((entry) => next.verifiers.get(entry.kid) !== entry.verify);
    },

    verifiedTokenStats: () => verified.stats(),
    forgetVerifiedTokens: () => verified.dropWhere(() => true),
  };
}

/** The rules of `tokens.*` that a token's times are held to. */
type TimeRules = Pick<Config['tokens'], 'accessTokenTtlSeconds' | 'clockSkewSeconds'>;

/**
 * The time claims, against the gateway's clock (fast-jwt reads the system clock, and tests
 * move ours), with jose's rules: expired once `exp` is `clockSkewSeconds` behind; not yet
 * valid before `nbf`; issued neither in the future nor longer than an access-token lifetime
 * ago, each with the same tolerance.
 */
function checkTimes({ exp, iat, nbf }: Record<string, unknown>, now: number, { accessTokenTtlSeconds, clockSkewSeconds }: TimeRules): void {
  if (typeof exp !== 'number' || typeof iat !== 'number' || (nbf !== undefined && typeof nbf !== 'number')) throw new InvalidToken();
  const age = now - iat;
  if (exp <= now - clockSkewSeconds || age - clockSkewSeconds > accessTokenTtlSeconds) throw new InvalidToken(EXPIRED);
  if ((nbf !== undefined && nbf > now + clockSkewSeconds) || age < -clockSkewSeconds) throw new InvalidToken();
}

/** The full check: signature, header, claims, times. */
function verifyInFull(token: string, keys: KeySet, clock: Clock, rules: TimeRules): VerifiedEntry {
  if (token.length > MAX_TOKEN_LENGTH) throw new InvalidToken();
  const signature = canonicalSignature(token);
  if (signature === undefined) throw new InvalidToken();
  let payload: Record<string, unknown>;
  let kid: unknown;
  let verify: Verify | undefined;
  try {
    // The kid picks the one verifier, and with it the one algorithm, this token may use.
    kid = keys.onlyKid ?? decodeProtectedHeader(token).kid;
    verify = typeof kid === 'string' ? keys.verifiers.get(kid) : undefined;
    if (verify === undefined) throw new InvalidToken();
    const result = verify(token, signature) as { header: { kid?: unknown }; payload: Record<string, unknown> };
    if (result.header.kid !== kid) throw new InvalidToken();
    payload = result.payload;
  } catch (err) {
    // Whatever the parsers or the verifier threw: a token that cannot be verified is invalid.
    throw err instanceof InvalidToken ? err : new InvalidToken(undefined, { cause: err });
  }
  checkTimes(payload, Math.floor(clock.now() / 1000), rules);
  if (typeof payload.sub !== 'string' || typeof payload.client_id !== 'string' || typeof payload.jti !== 'string'
    || !Number.isSafeInteger(payload.iat_ms) || Math.floor((payload.iat_ms as number) / 1000) !== payload.iat
    || (payload.reset_epoch !== undefined && !Number.isSafeInteger(payload.reset_epoch))
    || (payload.scope !== undefined && typeof payload.scope !== 'string') || (payload.sid !== undefined && typeof payload.sid !== 'string')
    || !isConfirmation(payload.cnf)) {
    throw new InvalidToken();
  }
  // Frozen: the same object answers every later hit, so no caller may change it.
  return { claims: Object.freeze(payload) as unknown as AccessTokenClaims, kid: kid as string, verify };
}

/**
 * No `cnf`, or one holding a well-formed `x5t#S256`, a well-formed `jkt` or both, and nothing
 * else (a confirmation the gateway cannot check is no token of its own).
 */
function isConfirmation(cnf: unknown): boolean {
  if (cnf === undefined) return true;
  if (typeof cnf !== 'object' || cnf === null || Array.isArray(cnf)) return false;
  const entries = Object.entries(cnf);
  return entries.length > 0 && entries.every(([name, value]) => (name === 'x5t#S256' || name === 'jkt') && typeof value === 'string' && THUMBPRINT.test(value));
}

/**
 * The key set of a `signing` config, or SigningKeyError. A key already in `previous` under the
 * same kid, alg and public key keeps its verifier, so its cached tokens stay good across a
 * reload; an ephemeral key is kept while no keys are configured (a new one would end every
 * token issued so far).
 */
function loadKeySet(signing: Config['signing'], tokens: Config['tokens'], previous?: KeySet): KeySet {
  if (signing.keys.length === 0 && previous?.isEphemeral === true) {
    pickSigningKey(previous.keys, signing.activeKid);
    return previous;
  }
  const { keys, isEphemeral } = loadKeys(signing.keys);
  const signingKey = pickSigningKey(keys, signing.activeKid);
  const verifiers = new Map(keys.map((k) => {
    const kept = previous?.keys.find((p) => p.kid === k.kid && p.alg === k.alg && p.publicKey.equals(k.publicKey));
    return [k.kid, kept === undefined ? createAccessTokenVerifier(k, tokens) : previous!.verifiers.get(k.kid)!];
  }));
  return {
    keys,
    isEphemeral,
    jwks: { keys: keys.map((k) => k.publicJwk) },
    verifiers,
    signWith: createTokenSigner(signingKey),
    onlyKid: keys.length === 1 ? keys[0]!.kid : undefined,
  };
}

/**
 * One verifier per key: fast-jwt checks the signature synchronously with node:crypto, which
 * costs about half of jose's WebCrypto check per token (bench/README.md), and with it the
 * algorithm (this key's only), `typ`, `iss`, `aud`, `crit` and that the claims are present.
 * The times are checked by checkTimes, against the gateway's clock.
 */
function createAccessTokenVerifier(key: LoadedKey, { issuer, audience }: Config['tokens']): Verify {
  const form = signatureFormOf(key);
  let verify: (token: string) => unknown;
  try {
    verify = createVerifier({
      key: key.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      algorithms: [key.alg],
      allowedIss: issuer,
      allowedAud: audience,
      checkTyp: ACCESS_TOKEN_TYPE,
      // fast-jwt checks iss and aud only when present: they must be required too.
      requiredClaims: ['iss', 'aud', 'sub', 'client_id', 'jti', 'iat', 'iat_ms', 'exp'],
      ignoreExpiration: true,
      ignoreNotBefore: true,
      // Header and payload: the caller checks the kid.
      complete: true,
      cache: false,
    });
  } catch (err) {
    throw new SigningKeyError(`signing key "${key.kid}": cannot verify ${key.alg} with it (${(err as Error).message})`);
  }
  return (token, signature) => {
    if (!hasSignatureForm(signature, form)) throw new InvalidToken();
    return verify(token);
  };
}

/**
 * Signing with node:crypto's synchronous sign(): jose's SignJWT goes through WebCrypto, a
 * promise and a thread-pool hop per token, and re-encodes the same header each time. Here the
 * header of each `typ` is encoded once per key, and the signature is made as jose makes it
 * (RFC 7518 §3: ECDSA as R ‖ S, PSS with a salt as long as the hash), then put in the
 * gateway's one spelling (low S for ECDSA). test/unit/signer.test.ts verifies the tokens with
 * jose for every algorithm.
 */
function createTokenSigner(key: LoadedKey & { privateKey: KeyObject }): (typ: string, payload: JWTPayload) => string {
  const headers = new Map<string, string>();
  const sign = signFunctionOf(key);
  const form = signatureFormOf(key);
  return (typ, payload) => {
    let header = headers.get(typ);
    if (header === undefined) {
      header = Buffer.from(JSON.stringify({ alg: key.alg, kid: key.kid, typ })).toString('base64url');
      headers.set(typ, header);
    }
    const input = `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
    const signature = sign(Buffer.from(input));
    return `${input}.${(form.ecdsaOrder === undefined ? signature : toLowS(signature, form)).toString('base64url')}`;
  };
}

function signFunctionOf({ alg, privateKey: key }: LoadedKey & { privateKey: KeyObject }): (data: Buffer) => Buffer {
  switch (alg) {
    case 'EdDSA': return (data) => cryptoSign(null, data, key);
    case 'ES256': return (data) => cryptoSign('sha256', data, { key, dsaEncoding: 'ieee-p1363' });
    case 'ES384': return (data) => cryptoSign('sha384', data, { key, dsaEncoding: 'ieee-p1363' });
    case 'RS256': return (data) => cryptoSign('sha256', data, { key, padding: constants.RSA_PKCS1_PADDING });
    case 'PS256': return (data) => cryptoSign('sha256', data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST });
  }
}

/** The `scope` claim (RFC 9068 §2.2.3), left out when there is no scope. */
function scopeClaim(scopes: readonly string[]): { scope?: string } {
  return scopes.length > 0 ? { scope: scopes.join(' ') } : {};
}

/**
 * The signature's bytes, or undefined when they are not spelt canonically: base64url decoding
 * is lenient (spare low bits, `=` padding), so one signature has several spellings that all
 * verify. Only the canonical one is accepted, so that a token has one string form: anything
 * keyed on it (logs, deny lists, caches) cannot be sidestepped.
 */
function canonicalSignature(token: string): Buffer | undefined {
  const text = token.slice(token.lastIndexOf('.') + 1);
  const signature = Buffer.from(text, 'base64url');
  return signature.toString('base64url') === text ? signature : undefined;
}

type EcdsaAlg = Extract<SigningKeyConfig['alg'], `ES${string}`>;

/** Order n of each ECDSA curve's base point (SEC 2 v2 §2.4.2, §2.5.1), and its length in bytes. */
const ECDSA_CURVE: Record<EcdsaAlg, { order: bigint; bytes: number }> = {
  ES256: { order: BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551'), bytes: 32 },
  ES384: { order: BigInt('0xffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf581a0db248b0a77aecec196accc52973'), bytes: 48 },
};

/**
 * The one form of a key's signatures, beyond verifying. Its exact length (RFC 7518 §3.3–3.5,
 * RFC 8032 §5.1.6): OpenSSL verifies an RSA-PSS signature with its leading zero byte left out,
 * so that form would otherwise be a second spelling. For ECDSA, `s` at most n/2: (r, s) and
 * (r, n − s) both verify, so the gateway signs with the low one (as Bitcoin's BIP 62 does) and
 * refuses the high one. EdDSA needs no more: node refuses S ≥ L (RFC 8032 §5.1.7) itself.
 */
interface SignatureForm {
  length: number;
  ecdsaOrder?: bigint;
  /** Largest `s` accepted, big-endian over half the signature: compared without a bigint per request. */
  maxS?: Buffer;
}

function signatureFormOf(key: LoadedKey): SignatureForm {
  if (key.alg === 'EdDSA') return { length: 64 };
  if (key.alg === 'RS256' || key.alg === 'PS256') return { length: Math.ceil(key.publicKey.asymmetricKeyDetails!.modulusLength! / 8) };
  const { order, bytes } = ECDSA_CURVE[key.alg];
  return { length: 2 * bytes, ecdsaOrder: order, maxS: bigIntToBytes(order / 2n, bytes) };
}

function hasSignatureForm(signature: Buffer, { length, maxS }: SignatureForm): boolean {
  return signature.length === length && (maxS === undefined || Buffer.compare(signature.subarray(length / 2), maxS) <= 0);
}

/** An ECDSA signature (R ‖ S, RFC 7518 §3.4) in its low-S form: S, or n − S when S is above n/2. */
function toLowS(signature: Buffer, { ecdsaOrder: order, maxS }: SignatureForm): Buffer {
  const half = signature.length / 2;
  if (Buffer.compare(signature.subarray(half), maxS!) <= 0) return signature;
  const s = BigInt(`0x${signature.subarray(half).toString('hex')}`);
  return Buffer.concat([signature.subarray(0, half), bigIntToBytes(order! - s, half)]);
}

function bigIntToBytes(value: bigint, length: number): Buffer {
  return Buffer.from(value.toString(16).padStart(length * 2, '0'), 'hex');
}

/** Key type each algorithm requires; a mismatch is a configuration error, found at start-up. */
const KEY_TYPE: Record<SigningKeyConfig['alg'], (k: KeyObject) => boolean> = {
  EdDSA: (k) => k.asymmetricKeyType === 'ed25519',
  ES256: (k) => k.asymmetricKeyType === 'ec' && k.asymmetricKeyDetails?.namedCurve === 'prime256v1',
  ES384: (k) => k.asymmetricKeyType === 'ec' && k.asymmetricKeyDetails?.namedCurve === 'secp384r1',
  PS256: (k) => (k.asymmetricKeyType === 'rsa' || k.asymmetricKeyType === 'rsa-pss') && (k.asymmetricKeyDetails?.modulusLength ?? 0) >= 2048,
  RS256: (k) => k.asymmetricKeyType === 'rsa' && (k.asymmetricKeyDetails?.modulusLength ?? 0) >= 2048,
};

export class SigningKeyError extends Error {
  override name = 'SigningKeyError';
}

/** A PEM key is a few KiB; a pemFile larger than this is not one. */
const MAX_PEM_FILE_BYTES = 1024 * 1024;

function loadKeys(configured: readonly SigningKeyConfig[]): { keys: LoadedKey[]; isEphemeral: boolean } {
  if (configured.length === 0) {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const kid = `ephemeral-${randomBytes(6).toString('hex')}`;
    return { keys: [{ kid, alg: 'EdDSA', privateKey, publicKey, publicJwk: publicJwk(publicKey, kid, 'EdDSA') }], isEphemeral: true };
  }
  const keys = configured.map((entry, i): LoadedKey => {
    const where = `signing.keys.${i} (kid "${entry.kid}")`;
    let pem: string;
    try {
      pem = entry.pem ?? readOperatorFile(entry.pemFile!, MAX_PEM_FILE_BYTES);
    } catch (err) {
      throw new SigningKeyError(`${where}: cannot read pemFile (${err instanceof OperatorFileError ? err.reason : 'error'})`);
    }
    let privateKey: KeyObject | undefined;
    let publicKey: KeyObject;
    try {
      if (pem.includes('PRIVATE KEY')) {
        privateKey = createPrivateKey(pem);
        publicKey = createPublicKey(privateKey);
      } else {
        publicKey = createPublicKey(pem);
      }
    } catch {
      throw new SigningKeyError(`${where}: expected a PEM private key (PKCS#8) or public key (SPKI)`);
    }
    if (!KEY_TYPE[entry.alg](publicKey)) throw new SigningKeyError(`${where}: the key does not fit alg ${entry.alg}`);
    return { kid: entry.kid, alg: entry.alg, privateKey, publicKey, publicJwk: publicJwk(publicKey, entry.kid, entry.alg) };
  });
  return { keys, isEphemeral: false };
}

function pickSigningKey(keys: LoadedKey[], activeKid: string | undefined): LoadedKey & { privateKey: KeyObject } {
  const candidates = keys.filter((k) => k.privateKey !== undefined && (activeKid === undefined || k.kid === activeKid));
  if (activeKid !== undefined && candidates.length === 0) throw new SigningKeyError(`signing.activeKid: key "${activeKid}" has no private key`);
  if (candidates.length === 0) throw new SigningKeyError('signing.keys: no private key to sign with');
  if (candidates.length > 1) throw new SigningKeyError('signing.activeKid: required when several private keys are configured');
  return candidates[0] as LoadedKey & { privateKey: KeyObject };
}

function publicJwk(key: KeyObject, kid: string, alg: string): JWK {
  return Object.freeze({ ...(key.export({ format: 'jwk' }) as JWK), kid, alg, use: 'sig' });
}
