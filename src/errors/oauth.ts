/**
 * The token endpoint's errors (RFC 6749 §5.2): OAuth clients read `{error, error_description}`,
 * not the envelope, so an error thrown while the token endpoint answers is turned into an
 * OAuthError (toOAuthError, once, in the route) and the boundary renders that shape instead of
 * the envelope (errors/boundary.ts, errorAnswer). Everything else keeps the envelope.
 *
 * RFC 6749 has no word for a rate limit or an unavailable store at the token endpoint: a 429
 * says `slow_down` (registered for the token endpoint by RFC 8628 §7.2: "the client should
 * wait"), a 503 `temporarily_unavailable`, and both keep their Retry-After.
 */
import { GatewayError, type GatewayErrorOptions } from './errors.js';

/** RFC 6749 §5.2's codes, and the registered ones the token endpoint uses besides. */
export type OAuthErrorCode =
  | 'invalid_request' | 'invalid_client' | 'invalid_grant' | 'unauthorized_client' | 'unsupported_grant_type' | 'invalid_scope'
  | 'slow_down' | 'temporarily_unavailable' | 'server_error'
  // RFC 9449 §5, §8: a DPoP proof at the token endpoint.
  | 'invalid_dpop_proof' | 'use_dpop_nonce';

/** The body of an OAuth error answer. */
export interface OAuthErrorBody {
  error: OAuthErrorCode;
  error_description?: string;
}

/**
 * An error answered in RFC 6749's shape. `basicChallenge`: an invalid_client of a client that
 * tried the Authorization header, answered with a Basic challenge (§5.2: MUST). A client that
 * sent its secret in the body, or nothing, gets the 401 without one, as §5.2 allows: a
 * challenge would have OAuth libraries (openid-client among them) read the answer as a demand
 * for HTTP authentication rather than as the OAuth error it is.
 */
export class OAuthError extends GatewayError {
  readonly error: OAuthErrorCode;
  readonly basicChallenge: boolean;

  constructor(status: number, error: OAuthErrorCode, message: string, options: Omit<GatewayErrorOptions, 'challenge'> & { basicChallenge?: boolean } = {}) {
    super(status, error, message, options);
    this.error = error;
    this.basicChallenge = options.basicChallenge ?? false;
  }
}

export class InvalidClient extends OAuthError {
  constructor(message = 'Client authentication failed: the client_id (API key) or client_secret (API secret) is not valid.', basicChallenge = false) {
    super(401, 'invalid_client', message, { basicChallenge });
  }
}

export class InvalidScope extends OAuthError {
  constructor(message = 'The requested scope is not one this API key (or this refresh token\'s grant) has.') {
    super(400, 'invalid_scope', message);
  }
}

export class UnsupportedGrantType extends OAuthError {
  constructor(grantType: string) {
    super(400, 'unsupported_grant_type', `The grant type \`${grantType.slice(0, 64)}\` is not supported: use client_credentials or refresh_token.`);
  }
}

/**
 * Any error of the token endpoint in RFC 6749's words. `triedHeader`: the request carried an
 * Authorization header, so an invalid_client answers with the Basic challenge.
 */
export function toOAuthError(thrown: unknown, triedHeader: boolean): OAuthError {
  if (thrown instanceof InvalidClient && thrown.basicChallenge !== triedHeader) return new InvalidClient(thrown.message, triedHeader);
  if (thrown instanceof OAuthError) return thrown;
  if (!(thrown instanceof GatewayError)) return new OAuthError(500, 'server_error', 'The token endpoint failed.', { cause: thrown });
  const keep = { cause: thrown, headers: thrown.headers };
  switch (thrown.code) {
    case 'invalid_credentials':
    case 'client_certificate_required':
      return new InvalidClient(thrown.message, triedHeader);
    case 'invalid_grant':
      // RFC 6749 §5.2: invalid_grant is a 400, not the 401 of /api/refresh.
      return new OAuthError(400, 'invalid_grant', 'The refresh token is invalid, expired, revoked or not this client\'s.', keep);
    case 'rate_limited':
      return new OAuthError(429, 'slow_down', thrown.message, keep);
    // RFC 9449 §5.2 and §8: 400 at the token endpoint (a DPoP-Nonce header kept for the retry).
    case 'invalid_dpop_proof':
    case 'use_dpop_nonce':
      return new OAuthError(400, thrown.code, thrown.message, keep);
    default:
      break;
  }
  if (thrown.status >= 500) return new OAuthError(thrown.status, thrown.status === 503 ? 'temporarily_unavailable' : 'server_error', thrown.message, { ...keep, expose: thrown.expose });
  // Every other refusal of the request itself (a body too large, another content type, a
  // repeated or malformed parameter) is RFC 6749's one word for it.
  return new OAuthError(400, 'invalid_request', thrown.message, keep);
}
