/**
 * Reading `Authorization: Bearer <token>` (RFC 6750 §2.1) and the guard that requires it.
 *
 * - no Authorization header, or another scheme (Basic …): 401 without an error attribute,
 *   the challenge tells the client to use Bearer (§3.1);
 * - the Bearer scheme (any case, RFC 9110 §11.1) with a missing or non-b64token credential,
 *   or the header repeated: 400 invalid_request;
 * - a well-formed token that does not verify: 401 invalid_token (signer.ts);
 * - the DPoP scheme (RFC 9449 §7.1) carries the token the same way; a DPoP-bound token needs it
 *   and a proof (auth/dpop.ts), an unbound one is refused with it (test/http/dpop.test.ts).
 * test/unit/bearer.test.ts holds the grammar; test/http/protected-routes.test.ts the guard.
 */
import type { IncomingMessage } from 'node:http';
import type { Context, Next } from 'koa';
import { isSettingsTokenShaped } from '../domain/settings-token.js';
import { InvalidDpopProof, InvalidToken, MalformedAuthorization, MissingToken, StoreUnavailable } from '../errors/errors.js';
import type { Metrics, TokenValidation } from '../telemetry/metrics.js';
import { countHeader } from '../util/raw-headers.js';
import { verifiedClientCertificate } from './client-certificate.js';
import type { DeniedTokens } from './denied-tokens.js';
import type { DpopProofs } from './dpop.js';
import type { Revocations } from './revocation.js';
import { EXPIRED, type Signer } from './signer.js';

const CREDENTIALS = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?: +(.*))?$/;
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * The access token of the request, `Bearer` or `DPoP` (RFC 9449 §7.1: the same b64token), or
 * undefined when it presents neither. Which of the two it came as is the authenticator's to check
 * (a DPoP-bound token must come as DPoP, an unbound one as Bearer).
 */
export function readBearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  // Node keeps only the first of repeated Authorization headers; an ambiguous request is refused.
  if (countHeader(req.rawHeaders, 'authorization') > 1) throw new MalformedAuthorization('The Authorization header may be sent once.');
  const match = CREDENTIALS.exec(header);
  if (match === null) throw new MalformedAuthorization();
  const scheme = match[1]!.toLowerCase();
  if (scheme !== 'bearer' && scheme !== 'dpop') return undefined;
  const token = match[2];
  if (token === undefined || !B64TOKEN.test(token)) throw new MalformedAuthorization();
  return token;
}

/** True when the request's Authorization uses the DPoP scheme (any case); read after readBearerToken accepted it. */
export function presentsDpopScheme(req: IncomingMessage | undefined): boolean {
  const header = req?.headers.authorization;
  return header !== undefined && header.length > 5 && header.charCodeAt(4) === 0x20 && header.slice(0, 4).toLowerCase() === 'dpop';
}

/** Who is calling, as the verified access token says; set on ctx.state.identity by the guard. */
export interface Identity {
  accountId: string;
  keyId: string;
  tokenId: string;
  /** Seconds since the epoch. */
  issuedAt: number;
  /** Milliseconds since the epoch (compared with token resets). */
  issuedAtMs: number;
  /** The reset store's epoch an access token was issued under (`reset_epoch`; auth/revocation.ts). */
  epoch?: number;
  expiresAt: number;
  /** The key's scopes, from the `scope` claim (an API settings token's own). */
  scopes: readonly string[];
  /** An API settings token: its validity is kept in the owner store, not only in resets. */
  durable?: boolean;
  /** The client certificate the token is bound to (`cnf.x5t#S256`, base64url SHA-256), if any. */
  certificateThumbprint?: string;
  /** The DPoP key the token is bound to (`cnf.jkt`, RFC 7638 thumbprint), whose proof came with this call. */
  dpopThumbprint?: string;
  /** A trusted issuer's token (auth/trusted-issuers.ts): its `iss`. Absent: the gateway's own. */
  issuer?: string;
  /** A trusted issuer's token: the roles its `rolesClaim` names. */
  roles?: readonly string[];
  /**
   * Every claim of the verified access token (frozen), for a route's rules and claim headers
   * (proxy/policy.ts); absent for an API settings token, which has no claims beyond the above.
   */
  claims?: Readonly<Record<string, unknown>>;
}

/**
 * `req`: the request the token came with. Only for a token bound to a client certificate
 * (RFC 8705 §3) is its connection's verified certificate read (auth/client-certificate.ts); the
 * token is refused without that one, and without a request. An unbound token, the usual case,
 * costs no look at it.
 */
export type Authenticate = (token: string | undefined, req?: IncomingMessage) => Promise<Identity>;

/**
 * The one check of a bearer token, for the gateway's routes, proxied routes and WebSocket
 * upgrades alike: verified, then refused if a reset of its account or key came after it. An
 * API settings token (its own prefix, never a JWT's first characters) goes to its own check
 * (auth/settings-tokens.ts) before any JWT parsing. With `metrics`, each check's outcome is
 * counted (gateway_token_validations_total). With `denied`, a token revoked by its `jti`, or
 * by its refresh family (`sid`; POST /api/revoke, auth/denied-tokens.ts), is refused too: asked on every call, after the
 * verified-token cache, so no cached verification outlives a revocation.
 */
export function createAuthenticator(signer: Signer, revocations: Revocations, settingsTokens?: (token: string) => Promise<Identity>, metrics?: Pick<Metrics, 'tokenValidated'>, denied?: Pick<DeniedTokens, 'isDenied'>, dpop?: DpopProofs): Authenticate {
  const counted = (outcome: TokenValidation) => metrics?.tokenValidated(outcome);
  const failed = (err: unknown) => {
    counted(err instanceof InvalidToken ? (err.message === EXPIRED ? 'expired' : 'invalid') : err instanceof StoreUnavailable ? 'unavailable' : 'invalid');
    throw err;
  };
  return async function authenticate(token, req) {
    if (token === undefined) {
      counted('missing');
      throw new MissingToken();
    }
    const asDpop = presentsDpopScheme(req);
    if (asDpop && isSettingsTokenShaped(token)) return failed(notDpopBound(dpop));
    if (settingsTokens !== undefined && isSettingsTokenShaped(token)) {
      return settingsTokens(token).then((identity) => {
        counted('valid');
        return identity;
      }, failed);
    }
    let claims;
    try {
      claims = await signer.verifyAccessToken(token);
    } catch (err) {
      return failed(asDpop ? inDpopTerms(err, dpop) : err);
    }
    const identity: Identity = {
      accountId: claims.sub, keyId: claims.client_id, tokenId: claims.jti,
      issuedAt: claims.iat, issuedAtMs: claims.iat_ms, expiresAt: claims.exp, epoch: claims.reset_epoch,
      scopes: claims.scope === undefined || claims.scope === '' ? [] : claims.scope.split(' '),
      claims: claims as unknown as Readonly<Record<string, unknown>>,
    };
    if (claims.cnf?.['x5t#S256'] !== undefined) {
      identity.certificateThumbprint = claims.cnf['x5t#S256'];
      // RFC 8705 §3: a bound token is refused with invalid_token unless the connection's
      // verified certificate is the one it names. Compared before the reset look-up: no store
      // is asked on behalf of a token this request may not use.
      if (req === undefined || verifiedClientCertificate(req)?.thumbprint !== identity.certificateThumbprint) {
        counted('invalid');
        throw new InvalidToken('The access token is bound to a client certificate that this request did not present.');
      }
    }
    if (denied?.isDenied(claims.jti, claims.sid) === true) {
      counted('revoked');
      const refusal = new InvalidToken('The access token was revoked; sign in again.');
      throw asDpop ? inDpopTerms(refusal, dpop) : refusal;
    }
    // RFC 9449 §7.1: after the certificate and the revocation list (no proof is spent on a
    // request refused anyway) and before the reset look-up; on every request, since the
    // verified-token cache holds the token, never its proof.
    if (claims.cnf?.jkt !== undefined || asDpop) {
      try {
        identity.dpopThumbprint = await checkDpopBinding(dpop, token, req, claims.cnf?.jkt, asDpop);
      } catch (err) {
        return failed(err);
      }
    }
    // Usually answered from the cache without a promise; awaited only on a miss.
    let revoked = revocations.isRevoked(identity);
    if (revoked !== true && revoked !== false) revoked = await revoked.catch(failed);
    if (revoked) {
      counted('revoked');
      const refusal = new InvalidToken('The access token was revoked by a token reset; sign in again.');
      throw asDpop ? inDpopTerms(refusal, dpop) : refusal;
    }
    counted('valid');
    return identity;
  };
}

/** RFC 9449 §7.1: a token sent as DPoP is refused with a DPoP challenge, whatever is wrong with it. */
function inDpopTerms(err: unknown, dpop: DpopProofs | undefined): unknown {
  if (!(err instanceof InvalidToken) || err.challenge?.scheme === 'DPoP') return err;
  return new InvalidToken(err.message, { cause: err.cause, challenge: { scheme: 'DPoP', algs: dpop?.algs } });
}

/** An unbound token (or an API settings token) sent with the DPoP scheme. */
function notDpopBound(dpop: DpopProofs | undefined): InvalidToken {
  return new InvalidToken('This access token is not DPoP-bound: send it as "Authorization: Bearer <token>".', { challenge: { scheme: 'DPoP', algs: dpop?.algs } });
}

/**
 * A DPoP-bound token (`jkt`) comes as `Authorization: DPoP` with a proof for this request, by
 * the key it is bound to, over this very token (`ath`); an unbound one never as DPoP. Answers
 * the thumbprint.
 */
async function checkDpopBinding(dpop: DpopProofs | undefined, token: string, req: IncomingMessage | undefined, jkt: string | undefined, asDpop: boolean): Promise<string> {
  if (jkt === undefined) throw notDpopBound(dpop);
  if (!asDpop || dpop === undefined || req === undefined) {
    throw new InvalidToken('This access token is DPoP-bound: send it as "Authorization: DPoP <token>" with a DPoP proof.', { challenge: { scheme: 'DPoP', algs: dpop?.algs } });
  }
  const proof = dpop.read(req);
  if (proof === undefined) throw new InvalidDpopProof('This call needs a DPoP proof (the DPoP header) made for it.', dpop.algs);
  const thumbprint = await dpop.check(proof, req, { accessToken: token });
  if (thumbprint !== jkt) throw new InvalidDpopProof('The DPoP proof is signed by another key than the one the access token is bound to.', dpop.algs);
  return thumbprint;
}

/**
 * Koa guard: sets ctx.state.identity, or throws the 400/401 the request deserves. `dpop`: a DPoP
 * call's answer gets the current server nonce, when nonces are required.
 */
export function requireBearer(authenticate: Authenticate, dpop?: Pick<DpopProofs, 'nonceHeader'>) {
  return async function requireBearer(ctx: Context, next: Next): Promise<void> {
    const identity = await authenticate(readBearerToken(ctx.req), ctx.req);
    ctx.state.identity = identity;
    if (identity.dpopThumbprint !== undefined) {
      const nonce = dpop?.nonceHeader();
      if (nonce !== undefined) ctx.set(nonce);
    }
    await next();
  };
}
