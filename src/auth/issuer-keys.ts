/**
 * A trusted issuer's signing keys: fetched from its `jwksUri`, or from the `jwks_uri` its
 * OpenID discovery document (`<issuer>/.well-known/openid-configuration`) names, and kept.
 *
 * - Every fetch is bounded: `fetchTimeoutMs` for the whole answer, body included, and
 *   `maxBytes` read at most (a longer body is cut off and the fetch failed); no redirects.
 * - One fetch at a time per issuer: concurrent requests that need the keys wait for the same one.
 * - A kept set is used as it is for `cacheSeconds`; then it still answers at once while one
 *   background fetch replaces it. If the issuer cannot be reached, the old set answers until it
 *   is `cacheSeconds + maxStaleSeconds` old; after that the issuer's tokens are refused (fail
 *   closed) until a fetch succeeds.
 * - A `kid` the set does not hold prompts a fetch (a rotation at the issuer), but at most one
 *   per `minRefetchSeconds`, and so does a failure: made-up kids cannot make the gateway hammer
 *   the issuer.
 * - Only public signing keys are kept: symmetric (`oct`) keys, private keys and keys for
 *   encryption are dropped, so no JWKS can make an HMAC secret out of a public key.
 * Times are the gateway's clock (tests move it); the fetch timeout is real time.
 * test/http/trusted-issuers.test.ts holds it against a real OpenID provider.
 */
import { Readable } from 'node:stream';
import { createLocalJWKSet, errors as joseErrors, type JSONWebKeySet, type JWK } from 'jose';
import type { Config } from '../config/schema.js';
import type { Logger } from '../telemetry/log.js';
import type { IssuerKeyFetch, Metrics } from '../telemetry/metrics.js';
import type { Clock } from '../util/clock.js';
import { readLimited } from '../util/read-limited.js';

export type IssuerKeySettings = Config['issuerKeys'];

/** What jwtVerify is given: the key for a token's header, or a rejection. */
export type KeyLookup = (...args: Parameters<ReturnType<typeof createLocalJWKSet>>) => ReturnType<ReturnType<typeof createLocalJWKSet>>;

/** The keys of an issuer could not be had (never fetched, or too long unreachable): its tokens are refused. */
export class IssuerKeysUnavailable extends Error {
  override name = 'IssuerKeysUnavailable';
}

interface KeptSet {
  lookup: ReturnType<typeof createLocalJWKSet>;
  /** Gateway clock, ms. */
  fetchedAt: number;
}

/** A kept key set, as an opaque token of identity: a cached verification is bound to the set that made it. */
export type KeySetGeneration = object;

export interface IssuerKeys {
  /** The verification key for a token's header, and the set it came from; rejects as jose's key sets do. */
  resolve(...args: Parameters<KeyLookup>): Promise<{ key: Awaited<ReturnType<KeyLookup>>; generation: KeySetGeneration }>;
  /**
   * The set in use now, without waiting: the kept one while it is within cacheSeconds +
   * maxStaleSeconds (a stale one starts a background fetch, as a lookup would); undefined when
   * none is usable. A cached verification counts only while this is the set that made it, so
   * a refetch (a key removed at the issuer) and the end of the stale window reach cached tokens too.
   */
  current(): KeySetGeneration | undefined;
}

interface Deps {
  settings: IssuerKeySettings;
  clock: Clock;
  log: Logger;
  metrics: Pick<Metrics, 'issuerKeysFetched'>;
  /** Outbound HTTP, injectable; global fetch by default. */
  fetch?: typeof fetch;
}

export function createIssuerKeys({ issuer, jwksUri }: { issuer: string; jwksUri?: string | undefined }, deps: Deps): IssuerKeys {
  const { settings, clock, log, metrics } = deps;
  const doFetch = deps.fetch ?? fetch;
  let kept: KeptSet | undefined;
  let inFlight: Promise<KeptSet | undefined> | undefined;
  /** Gateway clock, ms, of the last fetch started (rate limit of prompted fetches); -Infinity: none yet. */
  let lastAttemptAt = Number.NEGATIVE_INFINITY;

  const cacheMs = settings.cacheSeconds * 1000;
  const staleMs = settings.maxStaleSeconds * 1000;
  const minRefetchMs = settings.minRefetchSeconds * 1000;

  /** One fetch at a time; resolves to the new set, or undefined when it failed (logged and counted). */
  function refresh(): Promise<KeptSet | undefined> {
    if (inFlight !== undefined) return inFlight;
    lastAttemptAt = clock.now();
    inFlight = fetchKeySet(issuer, jwksUri, settings, doFetch).then(
      (jwks) => {
        kept = { lookup: createLocalJWKSet(jwks), fetchedAt: clock.now() };
        metrics.issuerKeysFetched(issuer, 'ok');
        return kept;
      },
      (err: unknown) => {
        const outcome: IssuerKeyFetch = err instanceof FetchFailure ? err.outcome : 'error';
        metrics.issuerKeysFetched(issuer, outcome);
        log.warn({ issuer, outcome, reason: err instanceof FetchFailure ? err.message : 'error' }, 'trusted issuer keys could not be fetched');
        return undefined;
      },
    ).finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }

  const mayPrompt = () => clock.now() - lastAttemptAt >= minRefetchMs;

  /** The kept set while it may be used, without waiting; a stale one is replaced in the background. */
  function currentSet(): KeptSet | undefined {
    const age = kept === undefined ? Number.POSITIVE_INFINITY : clock.now() - kept.fetchedAt;
    if (age < cacheMs) return kept;
    if (age > cacheMs + staleMs) return undefined;
    // Stale: answer with it at once, and replace it in the background (at most once per minRefetchSeconds).
    if (mayPrompt()) void refresh();
    return kept;
  }

  /** The set to verify with now, fetching when there is none usable; undefined: fail closed. */
  async function usableSet(): Promise<KeptSet | undefined> {
    const set = currentSet();
    if (set !== undefined) return set;
    // None, or too old to trust: wait for a fetch (shared, bounded), unless one failed just now.
    if (inFlight === undefined && !mayPrompt()) return undefined;
    return refresh();
  }

  return {
    current: currentSet,
    async resolve(header, token) {
      const set = await usableSet();
      if (set === undefined) throw new IssuerKeysUnavailable(`the keys of ${issuer} are unavailable`);
      try {
        return { key: await set.lookup(header, token), generation: set };
      } catch (err) {
        // An unknown kid: perhaps the issuer rotated its keys. Fetch again (rate-limited; or join
        // the fetch already under way) and look once more.
        if (!(err instanceof joseErrors.JWKSNoMatchingKey) || (inFlight === undefined && !mayPrompt())) throw err;
        const fresh = await refresh();
        if (fresh === undefined) throw err;
        return { key: await fresh.lookup(header, token), generation: fresh };
      }
    },
  };
}

class FetchFailure extends Error {
  readonly outcome: IssuerKeyFetch;
  constructor(outcome: IssuerKeyFetch, message: string) {
    super(message);
    this.outcome = outcome;
  }
}

/** The issuer's JWKS, filtered to public signing keys; FetchFailure on anything else. */
async function fetchKeySet(issuer: string, jwksUri: string | undefined, settings: IssuerKeySettings, doFetch: typeof fetch): Promise<JSONWebKeySet> {
  // One deadline for the discovery document and the JWKS together.
  const signal = AbortSignal.timeout(settings.fetchTimeoutMs);
  let uri = jwksUri;
  if (uri === undefined) {
    const discovery = await fetchJson(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, settings, signal, doFetch);
    const named = (discovery as { jwks_uri?: unknown; issuer?: unknown } | null);
    // OpenID Connect Discovery 1.0 §4.3: the document's issuer must be the one asked about.
    if (named === null || typeof named !== 'object' || named.issuer !== issuer) throw new FetchFailure('malformed', 'the discovery document names another issuer');
    if (typeof named.jwks_uri !== 'string' || !/^https?:\/\//.test(named.jwks_uri)) throw new FetchFailure('malformed', 'the discovery document has no http(s) jwks_uri');
    uri = named.jwks_uri;
  }
  const body = await fetchJson(uri, settings, signal, doFetch);
  return publicSigningKeys(body);
}

async function fetchJson(url: string, { maxBytes, fetchTimeoutMs }: IssuerKeySettings, signal: AbortSignal, doFetch: typeof fetch): Promise<unknown> {
  let text: string;
  try {
    const res = await doFetch(url, { signal, redirect: 'error', headers: { accept: 'application/json' } });
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      throw new FetchFailure('http_error', `${new URL(url).origin} answered ${res.status}`);
    }
    const declared = Number(res.headers.get('content-length') ?? Number.NaN);
    if (declared > maxBytes) {
      await res.body?.cancel().catch(() => {});
      throw new FetchFailure('too_large', `${new URL(url).origin} answered more than ${maxBytes} bytes`);
    }
    text = res.body === null ? '' : await readLimited(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), maxBytes);
  } catch (err) {
    if (err instanceof FetchFailure) throw err;
    if (signal.aborted) throw new FetchFailure('timeout', `${new URL(url).origin} did not answer within ${fetchTimeoutMs} ms`);
    if ((err as { type?: string }).type === 'entity.too.large') throw new FetchFailure('too_large', `${new URL(url).origin} answered more than ${maxBytes} bytes`);
    throw new FetchFailure('unreachable', `${new URL(url).origin} could not be reached`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new FetchFailure('malformed', `${new URL(url).origin} did not answer JSON`);
  }
}

/** Most keys kept of one set: an issuer publishes a few; thousands are an attack on our CPU. */
const MAX_KEYS = 100;

function publicSigningKeys(body: unknown): JSONWebKeySet {
  const keys = (body as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new FetchFailure('malformed', 'the JWKS has no "keys" array');
  const kept = keys.filter((k): k is JWK => typeof k === 'object' && k !== null && !Array.isArray(k)
    && ['RSA', 'EC', 'OKP'].includes((k as JWK).kty as string)
    && (k as JWK).d === undefined && ((k as JWK).use === undefined || (k as JWK).use === 'sig'));
  if (kept.length === 0 || kept.length > MAX_KEYS) throw new FetchFailure('malformed', `the JWKS holds ${kept.length} usable signing keys (1 … ${MAX_KEYS} expected)`);
  return { keys: kept };
}
