import type { DpopOption } from './dpop-types.js';

/**
 * The client's public types: the gateway's answers in the interface's exact shapes, the
 * options, and the hooks an application can plug in.
 */

/** `GET /api/sign?address=…`: the caller's account's sign record for an address. */
export interface SignRecord {
  /** The address exactly as sent. */
  did: string;
  signedNonce: number;
  /** `YYYY-MM-DD HH:MM:SS`, UTC unless the gateway's `data.timeZone` says otherwise. */
  signedAt: string;
  signedExpiredAt: string;
}

/** One role of `GET /api/roles`. */
export interface Role {
  id: number;
  slug: string;
  name: string;
  description: string;
  public: 0 | 1;
}

/** `GET /api/roles`: one page. `pages` is a string, as existing clients parse it. */
export interface RolesPage {
  pages: string;
  items: Role[];
  total: number;
}

export interface RolesQuery {
  /** 1 … 1,000,000; default 1. */
  page?: number;
  /** 1 … the gateway's `roles.maxLimit` (100); default its `roles.defaultLimit` (10). */
  limit?: number;
  /** A case-insensitive substring of the role's name. */
  name?: string;
}

/** `POST /api/reset`. */
export interface ResetResult {
  scope: 'key' | 'account';
  accountId: string;
  /** Key scope only. */
  keyId?: string;
  /** `YYYY-MM-DD HH:MM:SS`. */
  resetAt: string;
}

/** What `/api/signin` and `/api/refresh` answer. */
export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  /** `DPoP` when the pair is bound to this client's DPoP key, else `Bearer` (absent from gateways before DPoP, and in stored pairs). */
  token_type?: 'Bearer' | 'DPoP';
}

/** One item of the gateway's IETF `RateLimit` field, joined with its `RateLimit-Policy` item. */
export interface RateLimitItem {
  /** The policy's name, e.g. `roles-account-1s`. */
  policy: string;
  /** Requests remaining in the window (`r`). */
  remaining: number;
  /** Seconds until the window resets (`t`). */
  resetSeconds: number;
  /** The window's quota (`q` of RateLimit-Policy), when the policy was sent. */
  quota?: number;
  /** The window's length in seconds (`w` of RateLimit-Policy), when the policy was sent. */
  windowSeconds?: number;
}

/** The RateLimit fields of one answer. */
export interface RateLimitInfo {
  items: RateLimitItem[];
  /** The tightest item: least remaining (ties: the one resetting last). */
  tightest: RateLimitItem;
}

/**
 * How the client authenticates. With `apiKey` + `apiSecret` it signs in itself (servers; the
 * secret is hashed in the process and never sent). With `settingsToken` (an owner's `gwst_…`
 * API settings token) it sends that token as the bearer and has nothing to renew. With
 * `refreshToken` it starts from a pair minted elsewhere (the application's backend), which
 * is how a browser uses the client without ever holding the API secret.
 */
export type Credentials =
  | { apiKey: string; apiSecret: string }
  | { settingsToken: string }
  | { refreshToken: string; accessToken?: string };

/**
 * Where the token pair is kept besides memory. `load` is read before the first sign-in and
 * inside the cross-tab lock; `save` is called with every new pair, and with `undefined` once the
 * pair is known to be dead. Either may be async. Keep it somewhere only this application reads.
 * What `load` returns that is not a pair of tokens is ignored; a `save` that throws costs the
 * pair's persistence only (the pair stays in memory and the call goes on).
 */
export interface TokenStorage {
  load(): TokenPair | undefined | Promise<TokenPair | undefined>;
  save(pair: TokenPair | undefined): void | Promise<void>;
}

export interface RetryOptions {
  /** Retries after the first attempt; default 2. 0 turns retries off. */
  retries?: number;
  /** A Retry-After longer than this fails at once instead of waiting; default 60,000. */
  maxRetryAfterMs?: number;
  /** Backoff base when the answer names no Retry-After; default 300. */
  baseDelayMs?: number;
  /** Backoff cap; default 10,000. */
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** The gateway's base URL, e.g. `https://gateway.example.com`. */
  baseUrl: string | URL;
  credentials: Credentials;
  /** Keeps the pair outside memory too (see TokenStorage). Default: memory only. */
  storage?: TokenStorage;
  /**
   * Cross-tab single flight through Web Locks, used only with a `storage` (tabs share a pair
   * only through shared storage). Default `true` where `navigator.locks` exists.
   */
  crossTabLock?: boolean;
  /** The lock's name; default `auth-gateway-client:<baseUrl>:<credential id>`. */
  lockName?: string;
  /** Renew this long before the access token expires; default max(5 s, 10 % of its lifetime), at most half of it. */
  renewBeforeMs?: number;
  /** Per-call time limit, retries and waits included; default 30,000. Infinity: none. */
  timeoutMs?: number;
  /** Retry policy for idempotent calls; `false` turns retries off. */
  retry?: RetryOptions | false;
  /** A fetch implementation; default the platform's `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** Called with the RateLimit fields of every answer that carries them; what it throws is dropped. */
  onRateLimit?: (info: RateLimitInfo) => void;
  /** Called when the client can no longer renew (refresh refused and no key to sign in with); what it throws is dropped. */
  onSessionExpired?: (error: Error) => void;
  /**
   * DPoP (RFC 9449; see the README, "DPoP"): sign-in, refresh and every call carry a proof of
   * this key, and the gateway binds the tokens to it, so a copied token is of no use elsewhere.
   * `true` makes a non-extractable ES256 key with Web Crypto (kept in memory: a new client, a
   * new key, a new binding); or pass a CryptoKeyPair (ECDSA P-256 or Ed25519, its private half
   * best made non-extractable), or in Node `{ privateKey }` with a private KeyObject.
   */
  dpop?: DpopOption;
  /**
   * In a browser, an API secret or an API settings token in the page is readable by every
   * script on it. The constructor refuses them there unless this is true.
   */
  dangerouslyAllowBrowser?: boolean;
}

/** Options every method takes. */
export interface CallOptions {
  signal?: AbortSignal;
  /** This call's time limit, overriding the client's. */
  timeoutMs?: number;
  /** This call's retry policy, overriding the client's. */
  retry?: RetryOptions | false;
}

/** `client.fetch`'s init: fetch's own, plus the client's per-call options. */
export interface GatewayRequestInit extends RequestInit {
  timeoutMs?: number;
  retry?: RetryOptions | false;
}
