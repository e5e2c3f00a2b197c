/**
 * DPoP (RFC 9449): proofs of possession, checked at sign-in and refresh (where they bind the new
 * pair to the proof's key) and on every call with a DPoP-bound access token (auth/bearer.ts).
 *
 * A proof is a JWT the client signs for one request (§4.2): `typ` `dpop+jwt`, an asymmetric
 * `alg` of `dpop.algorithms`, and its public key as `jwk` in the header (never a private part);
 * claims `htm` and `htu` naming this request's method and URL (without query and fragment),
 * `iat` within `dpop.iatWindowSeconds` (and `tokens.clockSkewSeconds` ahead), a `jti` never
 * seen before (state/dpop-proofs/, on every instance with Redis), with an access token its
 * SHA-256 as `ath`, and with `dpop.nonce: required` a current server nonce. The signature and
 * the key are jose's (EmbeddedJWK, calculateJwkThumbprint); nothing of JOSE is written here.
 *
 * Nonces are stateless (§8, §9): the HMAC of a time step under `dpop.nonceSecret`, with the step
 * in clear, so any instance with the same secret accepts any instance's nonce without a store.
 * A nonce is good in its step and the next.
 *
 * What it refuses to do: cache a proof (each is single use; the verified-token cache holds the
 * access token only, and this check runs on every request, hit or miss), or let any failure of
 * the parsers through as anything but InvalidDpopProof. test/http/dpop.test.ts holds it.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { calculateJwkThumbprint, EmbeddedJWK, jwtVerify, type JWK } from 'jose';
import type { Config } from '../config/schema.js';
import { InvalidDpopProof, UseDpopNonce } from '../errors/errors.js';
import type { DpopProofStore } from '../state/dpop-proofs/store.js';
import { countHeader } from '../util/raw-headers.js';
import type { Clock } from '../util/clock.js';

export const DPOP_PROOF_TYPE = 'dpop+jwt';
/** Longest `jti` taken (a UUID or 128 random bits is what clients send). */
const MAX_JTI_LENGTH = 256;
/** JWK members that only private or symmetric keys have (RFC 7518 §6). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k', 'priv'];

/** The request a proof must name: its method and target as the caller sent them. */
export interface ProofTarget {
  method: string;
  /** The request target (origin-form); the query is ignored. */
  url: string;
}

export interface DpopProofs {
  /** The accepted algorithms, space-separated, as the challenge's `algs` names them. */
  readonly algs: string;
  /** Whether proofs bind at sign-in and refresh (`dpop.enabled`). */
  readonly bindsAtSignIn: boolean;
  /** The `DPoP` header of the request; undefined without one; InvalidDpopProof when repeated or too long. */
  read(req: IncomingMessage): string | undefined;
  /**
   * Checks `proof` for `req` (method and URL as `target` says, else the request's own) and
   * remembers its `jti`; answers the key's RFC 7638 thumbprint. `accessToken`: the token it
   * comes with (then `ath` must be its SHA-256). Throws InvalidDpopProof, UseDpopNonce.
   */
  check(proof: string, req: IncomingMessage, options?: { target?: ProofTarget; accessToken?: string }): Promise<string>;
  /** The nonce a client should use now (for a `DPoP-Nonce` header). */
  currentNonce(): string;
  /**
   * With nonces required, the `DPoP-Nonce` header for a successful answer to a DPoP call (RFC
   * 9449 §8.2), so that a client calling at least once per step never meets a stale nonce;
   * undefined while nonces are off.
   */
  nonceHeader(): Record<string, string> | undefined;
}

export interface DpopDeps {
  config: Config['dpop'];
  /** `tokens.clockSkewSeconds`: how far ahead of the gateway's clock an `iat` may be. */
  clockSkewSeconds: number;
  clock: Clock;
  proofs: DpopProofStore;
  /** True for a peer whose X-Forwarded-Host and X-Forwarded-Proto describe the request (proxy.trustedProxies). */
  isTrustedProxy: (address: string) => boolean;
}

export function createDpopProofs({ config, clockSkewSeconds, clock, proofs, isTrustedProxy }: DpopDeps): DpopProofs {
  const algs = config.algorithms.join(' ');
  const invalid = (message: string) => new InvalidDpopProof(message, algs);
  const nonces = createNonces(config, clock);
  const originOf = createOriginReader(config.publicOrigins, isTrustedProxy);
  const windowSeconds = config.iatWindowSeconds;

  return {
    algs,
    bindsAtSignIn: config.enabled,
    read(req) {
      const proof = req.headers.dpop;
      if (proof === undefined) return undefined;
      if (typeof proof !== 'string' || countHeader(req.rawHeaders, 'dpop') > 1) throw invalid('Send one DPoP header.');
      if (proof.length > config.maxProofBytes) throw invalid('The DPoP proof is too long.');
      return proof;
    },
    async check(proof, req, options = {}) {
      const { header, payload } = await verifySignature(proof, config.algorithms, new Date(clock.now()), invalid);
      const jwk = header.jwk as JWK;
      if (PRIVATE_MEMBERS.some((member) => member in jwk)) throw invalid('The proof\'s jwk must be a public key.');
      const target = options.target ?? { method: req.method ?? '', url: req.url ?? '/' };
      if (payload.htm !== target.method) throw invalid('The proof\'s htm is not this request\'s method.');
      if (typeof payload.htu !== 'string' || !sameTarget(payload.htu, originOf(req), config.publicOrigins, target.url)) throw invalid('The proof\'s htu is not this request\'s URL.');
      const now = clock.now() / 1000;
      const iat = payload.iat;
      if (typeof iat !== 'number' || !Number.isFinite(iat)) throw invalid('The proof has no iat.');
      if (iat > now + clockSkewSeconds || iat < now - windowSeconds) throw invalid('The proof\'s iat is outside the accepted window: make a new proof.');
      const jti = payload.jti;
      if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) throw invalid('The proof has no valid jti.');
      if (options.accessToken !== undefined && payload.ath !== sha256(options.accessToken)) throw invalid('The proof\'s ath is not the hash of this access token.');
      if (config.nonce === 'required' && !nonces.isCurrent(payload.nonce)) throw new UseDpopNonce(nonces.current(), algs);
      const jkt = await calculateJwkThumbprint(jwk, 'sha256');
      // Remembered last, once everything else passed: a refused proof costs no store call.
      const fresh = await proofs.remember(sha256(`${jkt}.${jti}`), Math.ceil((iat + windowSeconds + clockSkewSeconds) * 1000) + 1000, clock.now());
      if (!fresh) throw invalid('This DPoP proof was used before: make a new one for each request.');
      return jkt;
    },
    currentNonce: () => nonces.current(),
    nonceHeader: () => (config.nonce === 'required' ? { 'DPoP-Nonce': nonces.current() } : undefined),
  };
}

/** jose's check of signature, `typ`, `alg` and the embedded key; any failure is an invalid proof. */
async function verifySignature(proof: string, algorithms: readonly string[], currentDate: Date, invalid: (message: string) => InvalidDpopProof) {
  try {
    const { protectedHeader, payload } = await jwtVerify(proof, EmbeddedJWK, { typ: DPOP_PROOF_TYPE, algorithms: [...algorithms], currentDate });
    return { header: protectedHeader, payload };
  } catch (err) {
    const error = invalid('The DPoP proof is not a valid dpop+jwt signed by its jwk with an accepted algorithm.');
    (error as { cause?: unknown }).cause = err;
    throw error;
  }
}

/** base64url SHA-256: `ath` (RFC 9449 §4.2) and the replay store's names. */
function sha256(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

/**
 * The proof's `htu` names this request (RFC 9449 §4.3 step 9: without query and fragment, after
 * RFC 3986 §6.2.2/§6.2.3 normalisation, which WHATWG URL parsing does): its origin is one of
 * `publicOrigins`, or with none configured the request's own, and its path the request's.
 */
function sameTarget(htu: string, requestOrigin: string | undefined, publicOrigins: readonly string[], url: string): boolean {
  if (htu.length > 8192 || !URL.canParse(htu)) return false;
  const named = new URL(htu);
  const origins = publicOrigins.length > 0 ? publicOrigins : requestOrigin === undefined ? [] : [requestOrigin];
  if (!origins.includes(named.origin)) return false;
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  if (!URL.canParse(path, named.origin)) return false;
  return new URL(path, named.origin).pathname === named.pathname;
}

/** The request's origin as the client addressed it; undefined when its Host is unusable. */
function createOriginReader(publicOrigins: readonly string[], isTrustedProxy: (address: string) => boolean) {
  return function originOf(req: IncomingMessage): string | undefined {
    if (publicOrigins.length > 0) return undefined;
    const trusted = isTrustedProxy(req.socket.remoteAddress ?? '');
    const forwardedHost = trusted ? firstValue(req.headers['x-forwarded-host']) : undefined;
    const forwardedProto = trusted ? firstValue(req.headers['x-forwarded-proto']) : undefined;
    const host = forwardedHost ?? req.headers.host ?? firstValue(req.headers[':authority']);
    const proto = forwardedProto ?? ((req.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http');
    if (host === undefined || (proto !== 'http' && proto !== 'https')) return undefined;
    const origin = `${proto}://${host}`;
    return URL.canParse(origin) ? new URL(origin).origin : undefined;
  };
}

function firstValue(value: string | string[] | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first?.split(',')[0]?.trim() || undefined;
}

/** Stateless nonces: `<step>.<HMAC(step)>`, good in their step and the next. */
function createNonces(config: Config['dpop'], clock: Clock) {
  // Without a configured secret each gateway makes its own (main.ts gives its workers one).
  const secret = config.nonceSecret ?? randomBytes(32).toString('base64url');
  const stepMs = config.nonceStepSeconds * 1000;
  const mac = (step: number) => createHmac('sha256', secret).update(`dpop-nonce ${step}`).digest().subarray(0, 16);
  const make = (step: number) => `${step.toString(36)}.${mac(step).toString('base64url')}`;
  return {
    current: () => make(Math.floor(clock.now() / stepMs)),
    isCurrent(nonce: unknown): boolean {
      if (typeof nonce !== 'string' || nonce.length > 64) return false;
      const [stepText, given] = nonce.split('.');
      if (stepText === undefined || given === undefined || !/^[0-9a-z]{1,12}$/.test(stepText)) return false;
      const step = parseInt(stepText, 36);
      const now = Math.floor(clock.now() / stepMs);
      if (step !== now && step !== now - 1) return false;
      const presented = Buffer.from(given, 'base64url');
      const expected = mac(step);
      return presented.length === expected.length && timingSafeEqual(presented, expected);
    },
  };
}
