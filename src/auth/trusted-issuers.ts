/**
 * Access tokens of other issuers (`trustedIssuers`, docs/identity-providers.md): an OpenID
 * provider's JWT access tokens, accepted on the routes that name the issuer in `issuers`, and
 * turned into the same Identity as the gateway's own tokens, so quotas, logs, metrics and
 * identity headers treat the caller alike.
 *
 * Verification is jose's jwtVerify, given only what the configuration allows:
 * - the algorithms of `algorithms`, all asymmetric (the schema has no `none`, no HS*), and a key
 *   from the issuer's JWKS whose type fits the algorithm (jose picks by `kid` and key type;
 *   issuer-keys.ts keeps public signing keys only), so no HMAC-with-the-public-key confusion;
 * - never a key the token brings: a header with `jwk`, `jku`, `x5u` or `x5c` is refused before
 *   any key is looked up;
 * - `iss` exactly, the audience (`aud`, or `audienceClaim`), `exp` (required), `nbf`, with
 *   `tokens.clockSkewSeconds` against the gateway's clock; the RFC 9068 `typ` when `tokenType` is
 *   set; the claims of `requiredClaims`.
 * Which verifier a token goes to is decided by its unverified `iss`, among the issuers the route
 * accepts only; the gateway's own tokens (`iss` = tokens.issuer, or no JWT at all) go to the
 * gateway's own check (auth/bearer.ts) when the route accepts "self". Every failure is a 401
 * invalid_token; no issuer's outage can make one a 500.
 * A verified token is kept in a verified-token cache (auth/verified-tokens.ts) bound to the key
 * set that verified it: a refetch or the end of the stale window (issuer-keys.ts `current`)
 * sends it back to a full check.
 * The gateway's token resets do not apply to these tokens: the issuer, not the gateway, decides
 * how long they live. test/http/trusted-issuers.test.ts holds it.
 */
import { createHash } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import { SELF_ISSUER, type Config } from '../config/schema.js';
import { isSettingsTokenShaped } from '../domain/settings-token.js';
import { InvalidToken } from '../errors/errors.js';
import type { Logger } from '../telemetry/log.js';
import type { IssuerTokenOutcome, Metrics } from '../telemetry/metrics.js';
import type { Clock } from '../util/clock.js';
import { presentsDpopScheme, type Authenticate, type Identity } from './bearer.js';
import { createIssuerKeys, IssuerKeysUnavailable, type KeySetGeneration } from './issuer-keys.js';
import { createVerifiedTokenCache, type VerifiedTokenCache } from './verified-tokens.js';
import { EXPIRED } from './signer.js';

export type TrustedIssuerConfig = Config['trustedIssuers'][number];

/** Longest token of another issuer we will parse (Entra's carry many claims; 16 KiB is plenty). */
const MAX_TOKEN_LENGTH = 16_384;
/** Header parameters that bring their own key (RFC 7515 §4.1.2–4.1.6): never trusted. */
const KEY_BEARING = ['jwk', 'jku', 'x5u', 'x5c'];
/** A value that goes into an identity header as it is: visible ASCII, bounded. */
const HEADER_SAFE = /^[\x21-\x7e]{1,256}$/;
const UNKNOWN_ISSUER = '(unknown)';

export interface TrustedIssuers {
  /**
   * The bearer check of a route that accepts `accepted` ("self" and issuer URLs, validated by
   * the schema): the same Authenticate for the same list, so routes can ask on every request.
   */
  authenticatorFor(accepted: readonly string[]): Authenticate;
}

export interface TrustedIssuerDeps {
  /** The gateway's own check, for tokens it issued (and a missing token). */
  authenticate: Authenticate;
  config: Pick<Config, 'trustedIssuers' | 'issuerKeys' | 'tokens'>;
  clock: Clock;
  log: Logger;
  metrics: Pick<Metrics, 'issuerKeysFetched' | 'issuerTokenChecked' | 'tokenValidated'>;
  /** Outbound HTTP for the issuers' keys; global fetch by default. */
  fetch?: typeof fetch;
}

type VerifyExternal = (token: string) => Promise<Identity>;

/** What the verified-token cache keeps of a trusted issuer's token: its identity, its times, and the key set that verified it. */
interface VerifiedExternal {
  identity: Readonly<Identity>;
  notBefore: number | undefined;
  generation: KeySetGeneration;
}

/** A header that brings its own key or a URL to fetch one from; `code` as jose's errors, for the log line. */
class EmbeddedKeyRefused extends Error {
  readonly code = 'ERR_EMBEDDED_KEY';
}

export function createTrustedIssuers(deps: TrustedIssuerDeps): TrustedIssuers {
  const { authenticate, config, metrics } = deps;
  // One cache for every trusted issuer, bounded as the gateway's own (tokens.verifiedCache*); none without issuers.
  const { verifiedCacheMaxEntries: maxEntries, verifiedCacheMaxBytes: maxBytes } = config.tokens;
  const verified = createVerifiedTokenCache<VerifiedExternal>({ maxEntries: config.trustedIssuers.length === 0 ? 0 : maxEntries, maxBytes, clock: deps.clock });
  const verifiers = new Map(config.trustedIssuers.map((issuer) => [issuer.issuer, createIssuerVerifier(issuer, deps, verified)]));
  const byList = new Map<string, Authenticate>();

  const selfIssuer = config.tokens.issuer;
  const refuse = (issuer: string, message: string): never => {
    metrics.issuerTokenChecked(issuer, 'not_accepted');
    metrics.tokenValidated('invalid');
    // The label only: an unknown `iss` is the caller's text.
    deps.log.info({ issuer, outcome: 'not_accepted' }, 'trusted issuer token refused');
    throw new InvalidToken(message);
  };

  function build(accepted: readonly string[]): Authenticate {
    const acceptsSelf = accepted.includes(SELF_ISSUER);
    const external = new Map(accepted.filter((i) => i !== SELF_ISSUER).map((i) => [i, verifiers.get(i)!]));
    return async function authenticateAny(token, req) {
      // No token, an API settings token, anything that is no JWT, or a JWT of ours: the gateway's own check.
      const iss = token === undefined || isSettingsTokenShaped(token) ? undefined : issuerOf(token);
      if (iss === undefined || iss === selfIssuer) {
        if (acceptsSelf || token === undefined) return authenticate(token, req);
        return refuse(SELF_ISSUER, 'This route does not accept the gateway\'s own tokens.');
      }
      const verify = external.get(iss);
      // Another issuer's token is checked as a bearer token only: its binding is that issuer's.
      if (verify !== undefined && presentsDpopScheme(req)) return refuse(iss, 'Send this issuer\'s tokens as "Authorization: Bearer <token>".');
      if (verify !== undefined) return verify(token!);
      return refuse(verifiers.has(iss) ? iss : UNKNOWN_ISSUER, 'This route does not accept tokens of this issuer.');
    };
  }

  return {
    authenticatorFor(accepted) {
      const key = accepted.join('\n');
      let found = byList.get(key);
      if (found === undefined) byList.set(key, found = build(accepted));
      return found;
    },
  };
}

/** The unverified `iss` of a JWT, or undefined when it is none (then it is no other issuer's). */
function issuerOf(token: string): string | undefined {
  if (token.length > MAX_TOKEN_LENGTH) return undefined;
  try {
    const { iss } = decodeJwt(token);
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

function createIssuerVerifier(issuer: TrustedIssuerConfig, { config, clock, log, metrics, fetch }: TrustedIssuerDeps, verified: VerifiedTokenCache<VerifiedExternal>): VerifyExternal {
  const keys = createIssuerKeys(issuer, { settings: config.issuerKeys, clock, log, metrics, fetch });
  const name = issuer.issuer;
  const skew = config.tokens.clockSkewSeconds;
  const counted = (outcome: IssuerTokenOutcome) => {
    metrics.issuerTokenChecked(name, outcome);
    metrics.tokenValidated(outcome === 'valid' ? 'valid' : outcome === 'expired' ? 'expired' : outcome === 'keys_unavailable' ? 'unavailable' : 'invalid');
  };
  /**
   * A token verified before, while the key set that verified it is still the one in use (not
   * refetched, not past the stale window) and within its times by the gateway's clock now;
   * anything else is verified in full again.
   */
  const cached = (token: string): Identity | undefined => {
    const hit = verified.get(token);
    if (hit === undefined) return undefined;
    const now = Math.floor(clock.now() / 1000);
    if (hit.generation !== keys.current() || hit.identity.expiresAt <= now - skew || (hit.notBefore !== undefined && hit.notBefore > now + skew)) {
      verified.forget(token);
      return undefined;
    }
    return { ...hit.identity };
  };
  return async function verifyExternal(token) {
    const hit = token.length > MAX_TOKEN_LENGTH ? undefined : cached(token);
    if (hit !== undefined) {
      counted('valid');
      return hit;
    }
    let payload: JWTPayload;
    let generation: KeySetGeneration | undefined;
    try {
      const header = decodeProtectedHeader(token);
      if (KEY_BEARING.some((param) => param in header)) throw new EmbeddedKeyRefused();
      const lookup = async (...args: Parameters<typeof keys.resolve>) => {
        const resolved = await keys.resolve(...args);
        generation = resolved.generation;
        return resolved.key;
      };
      ({ payload } = await jwtVerify(token, lookup, {
        issuer: name,
        audience: issuer.audienceClaim === 'aud' ? issuer.audience : undefined,
        algorithms: issuer.algorithms,
        clockTolerance: skew,
        currentDate: new Date(clock.now()),
        typ: issuer.tokenType,
        requiredClaims: ['exp', ...issuer.requiredClaims],
      }));
    } catch (err) {
      const outcome: IssuerTokenOutcome = err instanceof IssuerKeysUnavailable ? 'keys_unavailable' : err instanceof joseErrors.JWTExpired ? 'expired' : 'invalid';
      counted(outcome);
      // The jose code says why (a claim, the algorithm, no matching key), never the token's content.
      log.info({ issuer: name, outcome, reason: (err as { code?: string }).code ?? (err as Error).name }, 'trusted issuer token refused');
      if (outcome === 'expired') throw new InvalidToken(EXPIRED);
      throw new InvalidToken(outcome === 'keys_unavailable' ? 'The access token\'s issuer cannot be checked now.' : undefined, { cause: err });
    }
    try {
      const identity = identityOf(token, payload, issuer, clock);
      counted('valid');
      if (token.length <= MAX_TOKEN_LENGTH) {
        verified.remember(token, { identity: Object.freeze({ ...identity }), notBefore: payload.nbf, generation: generation! }, (identity.expiresAt + skew) * 1000);
      }
      return identity;
    } catch (err) {
      counted('invalid');
      log.info({ issuer: name, outcome: 'invalid', reason: (err as Error).message }, 'trusted issuer token refused');
      throw new InvalidToken();
    }
  };
}

/** The Identity a verified token of `issuer` stands for; a TypeError names what is missing or malformed. */
function identityOf(token: string, payload: JWTPayload, issuer: TrustedIssuerConfig, clock: Clock): Identity {
  if (issuer.audienceClaim !== 'aud') {
    const value = claimAt(payload, issuer.audienceClaim);
    if (!(value === issuer.audience || (Array.isArray(value) && value.includes(issuer.audience)))) throw new TypeError(`${issuer.audienceClaim}: not the audience`);
  }
  const accountId = claimAt(payload, issuer.accountClaim);
  if (typeof accountId !== 'string' || !HEADER_SAFE.test(accountId)) throw new TypeError(`${issuer.accountClaim}: expected the account as a string`);
  const clientId = payload.client_id ?? payload.azp ?? payload.cid;
  const keyId = typeof clientId === 'string' && HEADER_SAFE.test(clientId) ? clientId : accountId;
  // RFC 9068 §2.2 requires jti; where an issuer leaves it out, a digest of the token names it in logs and headers.
  const tokenId = typeof payload.jti === 'string' && HEADER_SAFE.test(payload.jti) ? payload.jti : createHash('sha256').update(token).digest('base64url').slice(0, 22);
  const issuedAt = typeof payload.iat === 'number' ? payload.iat : Math.floor(clock.now() / 1000);
  const identity: Identity = {
    accountId, keyId, tokenId, issuedAt, issuedAtMs: issuedAt * 1000, expiresAt: payload.exp!,
    scopes: wordsAt(payload, issuer.scopeClaim),
    issuer: issuer.issuer,
    // For a route's rules and claim headers (proxy/policy.ts, proxy/claim-headers.ts).
    claims: Object.freeze({ ...payload }),
  };
  if (issuer.rolesClaim !== undefined) identity.roles = wordsAt(payload, issuer.rolesClaim);
  return identity;
}

/**
 * A claim by name, or by a dotted path into nested objects (Keycloak's `realm_access.roles`)
 * when no claim has the whole name (Auth0's namespaced claims are URLs with dots in them).
 */
function claimAt(payload: JWTPayload, name: string): unknown {
  if (Object.hasOwn(payload, name)) return payload[name];
  let value: unknown = payload;
  for (const part of name.split('.')) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** A space-separated string (RFC 9068 `scope`, Entra's `scp`) or an array of strings (Okta's `scp`, roles); absent: none. */
function wordsAt(payload: JWTPayload, name: string): string[] {
  const value = claimAt(payload, name);
  if (value === undefined) return [];
  const words = typeof value === 'string' ? value.split(' ').filter((w) => w !== '') : value;
  if (!Array.isArray(words) || words.length > 256 || !words.every((w) => typeof w === 'string' && HEADER_SAFE.test(w))) throw new TypeError(`${name}: expected a space-separated string or an array of strings`);
  return words as string[];
}
