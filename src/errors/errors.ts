/**
 * The one error family of the gateway. Anything thrown below the error boundary that is not a
 * GatewayError is a bug or an unexpected failure and is answered as a generic 500; a
 * GatewayError carries everything the boundary needs to answer: status, a stable snake_case
 * code (RFC 6750 words where they exist), a sentence safe to show, and an optional bearer
 * challenge or extra headers.
 */

/**
 * The `error` attribute of a challenge: RFC 6750 §3.1's for Bearer (absent for a missing token),
 * and RFC 9449 §7.1's two more for DPoP.
 */
export type ChallengeError = 'invalid_request' | 'invalid_token' | 'insufficient_scope' | 'invalid_dpop_proof' | 'use_dpop_nonce';

export interface GatewayErrorOptions {
  cause?: unknown;
  headers?: Record<string, string>;
  /** Set on errors that answer a bearer-protected request: the boundary writes WWW-Authenticate. */
  challenge?: {
    error?: ChallengeError;
    scope?: string;
    /** A `DPoP` challenge (RFC 9449 §7.1) instead of `Bearer`: for DPoP proofs and DPoP-bound tokens. */
    scheme?: 'DPoP';
    /** With `scheme: 'DPoP'`: the proof algorithms accepted, space-separated (the challenge's `algs`). */
    algs?: string;
  };
  /** Show the message to the caller even from 500 up (it names no internals). */
  expose?: boolean;
  /** The request field at fault ("name", "scopes.2"), rendered as `message.field`. */
  field?: string;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly code: string;
  readonly headers: Record<string, string>;
  readonly challenge: GatewayErrorOptions['challenge'];
  readonly field: string | undefined;
  readonly #expose: boolean | undefined;

  constructor(status: number, code: string, message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.headers = options.headers ?? {};
    this.challenge = options.challenge;
    this.field = options.field;
    this.#expose = options.expose;
  }

  /** Below 500 the sentence is the caller's to read; from 500 up it stays in the log, unless set. */
  get expose(): boolean {
    return this.#expose ?? this.status < 500;
  }
}

export class InvalidRequest extends GatewayError {
  constructor(message: string, options?: GatewayErrorOptions) {
    super(400, 'invalid_request', message, options);
  }
}

/** 401 without an `error` attribute: the request carried no credentials at all (RFC 6750 §3.1). */
export class MissingToken extends GatewayError {
  constructor(message = 'This call requires an access token: send "Authorization: Bearer <token>".') {
    super(401, 'missing_token', message, { challenge: {} });
  }
}

export class InvalidToken extends GatewayError {
  /** `options.challenge`: only its scheme and algs (a DPoP-bound token's refusal, RFC 9449 §7.1); the error is always invalid_token. */
  constructor(message = 'The access token is invalid, expired or revoked.', options: GatewayErrorOptions = {}) {
    super(401, 'invalid_token', message, { ...options, challenge: { ...options.challenge, error: 'invalid_token' } });
  }
}

/**
 * A DPoP proof (RFC 9449 §4.3) that is missing where one is required, malformed, stale, replayed,
 * for another method or URL, or of another key: 401 with `WWW-Authenticate: DPoP
 * error="invalid_dpop_proof"` and the algorithms accepted (§7.1).
 */
export class InvalidDpopProof extends GatewayError {
  constructor(message: string, algs: string) {
    super(401, 'invalid_dpop_proof', message, { challenge: { scheme: 'DPoP', error: 'invalid_dpop_proof', algs } });
  }
}

/**
 * A proof without the current server nonce (RFC 9449 §8, §9): 401 with `error="use_dpop_nonce"`
 * and the nonce to use in `DPoP-Nonce`; the client retries once with it.
 */
export class UseDpopNonce extends GatewayError {
  constructor(nonce: string, algs: string) {
    super(401, 'use_dpop_nonce', 'This call needs a DPoP proof with the server nonce of the DPoP-Nonce header.', {
      challenge: { scheme: 'DPoP', error: 'use_dpop_nonce', algs },
      headers: { 'DPoP-Nonce': nonce },
    });
  }
}

/** A malformed Authorization header: 400 with a challenge (RFC 6750 §3.1 invalid_request). */
export class MalformedAuthorization extends GatewayError {
  constructor(message = 'The Authorization header is malformed: expected "Bearer <token>".') {
    super(400, 'invalid_request', message, { challenge: { error: 'invalid_request' } });
  }
}

/** Sign-in failed. Same answer for an unknown key and a wrong secret, so keys cannot be probed. */
export class InvalidCredentials extends GatewayError {
  constructor() {
    super(401, 'invalid_credentials', 'The API key or API secret is not valid.', { challenge: {} });
  }
}

/**
 * A secret-scanning report (POST /api/leaks/github) without a valid signature by one of the
 * reporter's published keys (a missing header, a key id the reporter does not publish, a
 * signature that does not verify): nothing in it is looked at. 401 with a challenge, as every 401.
 */
export class InvalidSignature extends GatewayError {
  constructor(message: string) {
    super(401, 'invalid_signature', message, { challenge: {} });
  }
}

/**
 * mTLS (docs/tls.md): the route, or the API key signing in, needs a client certificate that
 * the request's connection did not present verified (none, another CA's, expired, or another
 * certificate than the key's). 401 with a challenge (RFC 9110 §15.5.2 wants one on every 401).
 */
export class ClientCertificateRequired extends GatewayError {
  constructor(message = 'This route requires a client certificate signed by a CA the gateway trusts.') {
    super(401, 'client_certificate_required', message, { challenge: {} });
  }
}

/** Refresh failed: unknown, expired, revoked or reused refresh token (RFC 6749 §5.2 word). */
export class InvalidGrant extends GatewayError {
  constructor() {
    super(401, 'invalid_grant', 'The refresh token is invalid, expired or revoked; sign in again.', { challenge: {} });
  }
}

/** RFC 7009 §2.2.1: the server does not revoke this kind of token here (an API settings token: the owner API does). */
export class UnsupportedTokenType extends GatewayError {
  constructor(message: string) {
    super(400, 'unsupported_token_type', message);
  }
}

/**
 * RFC 7009 §2.2.1's 503: the revoked access tokens' deny list is at its bound
 * (`tokens.revokedAccessTokensMax`), so this revocation was not recorded; entries leave as their
 * tokens expire.
 */
export class RevocationListFull extends GatewayError {
  constructor(retryAfterSeconds = 60) {
    super(503, 'temporarily_unavailable', 'The gateway cannot record another revoked access token now; try again later, or let the token expire.', {
      headers: { 'Retry-After': String(retryAfterSeconds) },
      expose: true,
    });
  }
}

/** The token is valid but lacks what the route requires (RFC 6750 §3.1 insufficient_scope). */
export class InsufficientScope extends GatewayError {
  /** `scope`: the scope wanted, or several space-separated (the challenge's `scope`, RFC 6750 §3). */
  constructor(scope: string, message = `This route requires the scope "${scope}".`) {
    super(403, 'insufficient_scope', message, { challenge: { error: 'insufficient_scope', scope } });
  }
}

/** A change that contradicts what is stored: a duplicate id, slug or email, the last owner removed. */
export class Conflict extends GatewayError {
  constructor(message: string, field?: string) {
    super(409, 'conflict', message, field === undefined ? {} : { field });
  }
}

/** The object belongs to a store the gateway only reads (the HTTP directory, a file shared by several instances). */
export class ReadOnlyStore extends GatewayError {
  constructor(message: string) {
    super(409, 'read_only_store', message);
  }
}

/** The caller is known but may not do this (an owner asking for an operator's action). */
export class Forbidden extends GatewayError {
  constructor(message = 'This operation is not allowed for this caller.', code = 'forbidden') {
    super(403, code, message);
  }
}

/**
 * A single sign-on that cannot finish (owner/sso.ts): its transaction missing, expired or not
 * this browser's (`sso_state_mismatch`), the provider's answer refused (`sso_failed`), the email
 * not verified (`sso_email_unverified`), no owner and no invite for it (`sso_not_invited`).
 */
export class SsoFailed extends GatewayError {
  constructor(code: 'sso_state_mismatch' | 'sso_failed' | 'sso_email_unverified' | 'sso_not_invited', message: string, options: { status?: 400 | 403; cause?: unknown } = {}) {
    super(options.status ?? 400, code, message, options.cause === undefined ? {} : { cause: options.cause });
  }
}

/** A state-changing owner call without the session's CSRF token, or from a foreign origin. */
export class CsrfFailed extends GatewayError {
  constructor(message = 'This change needs the session\'s X-CSRF-Token header and must come from the gateway\'s own origin.') {
    super(403, 'csrf_failed', message);
  }
}

/** No owner session, or one that expired or was signed out: one answer for all of them. */
export class SessionRequired extends GatewayError {
  constructor() {
    super(401, 'session_required', 'Sign in first: this call needs an owner session (or an operator token).');
  }
}

/** Owner sign-in failed. Same answer for an unknown email and a wrong password. */
export class InvalidOwnerCredentials extends GatewayError {
  constructor() {
    super(401, 'invalid_credentials', 'The email or password is not valid.');
  }
}

/**
 * The password was right, and the owner has a second factor (owner/second-factor.ts): sign in
 * again with `otp` (a TOTP code or a recovery code) or a passkey. Also the answer to a wrong or
 * replayed code, so that a code's failure tells nothing the password's success did not.
 */
export class SecondFactorRequired extends GatewayError {
  constructor() {
    super(401, 'mfa_required', 'A second factor is required: send a current code from the authenticator app (or a recovery code) as "otp", or use a passkey.');
  }
}

/**
 * The owner must use a second factor (their account's or the deployment's requirement) and has
 * none: only the enrollment operations and the session's own work until one is set up.
 */
export class SecondFactorEnrollmentRequired extends GatewayError {
  constructor() {
    super(403, 'mfa_enrollment_required', 'Set up a second factor first (an authenticator app or a passkey): it is required for this owner.');
  }
}

/** A present admin token that matches none configured: one answer, whatever was wrong with it. */
export class InvalidAdminToken extends GatewayError {
  constructor() {
    super(401, 'invalid_credentials', 'The admin token is not valid.', { challenge: {} });
  }
}

export class NotFound extends GatewayError {
  constructor(message = 'There is nothing at this path.', code = 'not_found') {
    super(404, code, message);
  }
}

/**
 * The methods the gateway serves on some path: the Allow of a method it serves on none
 * (CONNECT, and TRACE on proxied routes).
 */
export const SERVED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

export class MethodNotAllowed extends GatewayError {
  constructor(allowed: string) {
    super(405, 'method_not_allowed', 'This method is not allowed on this path.', { headers: { Allow: allowed } });
  }
}

/** The request did not finish arriving within the server's header or request timeout (server.ts). */
export class RequestTimeout extends GatewayError {
  constructor() {
    super(408, 'request_timeout', 'The request took too long to arrive.');
  }
}

export class PayloadTooLarge extends GatewayError {
  constructor(limit: number) {
    super(413, 'payload_too_large', `The request body is larger than ${limit} bytes.`);
  }
}

export class UnsupportedMediaType extends GatewayError {
  constructor(message: string) {
    super(415, 'unsupported_media_type', message);
  }
}

/** An Expect header other than 100-continue (RFC 9110 §10.1.1). */
export class ExpectationFailed extends GatewayError {
  constructor() {
    super(417, 'expectation_failed', 'The only expectation supported is 100-continue.');
  }
}

/** Over a rate limit; `headers` carry Retry-After and the RateLimit fields (limits/limiter.ts). */
export class TooManyRequests extends GatewayError {
  constructor(retryAfterSeconds: number, headers: Record<string, string>) {
    super(429, 'rate_limited', `Too many requests: try again in ${retryAfterSeconds} s.`, {
      headers: { ...headers, 'Retry-After': String(retryAfterSeconds) },
    });
  }
}

/** Node's parser refused the request head as larger than the server's maxHeaderSize. */
export class RequestHeadersTooLarge extends GatewayError {
  constructor() {
    super(431, 'headers_too_large', 'The request headers are too large.');
  }
}

export class StoreUnavailable extends GatewayError {
  constructor(cause?: unknown, retryAfterSeconds = 1) {
    super(503, 'store_unavailable', 'A store the gateway depends on is unavailable; try again shortly.', {
      cause,
      headers: { 'Retry-After': String(retryAfterSeconds) },
      expose: true,
    });
  }
}

/**
 * Work the gateway bounds (owner password hashing) already has as much waiting as it may hold:
 * refused at once rather than queued without bound.
 */
export class Overloaded extends GatewayError {
  constructor(retryAfterSeconds = 1) {
    super(503, 'overloaded', 'The gateway is busy checking passwords; try again shortly.', {
      headers: { 'Retry-After': String(retryAfterSeconds) },
      expose: true,
    });
  }
}

/** A store the gateway reads (the directory's) did not answer within its time limit. */
export class StoreTimeout extends GatewayError {
  constructor(cause?: unknown, retryAfterSeconds = 1) {
    super(504, 'store_timeout', 'A store the gateway depends on did not answer in time; try again shortly.', {
      cause,
      headers: { 'Retry-After': String(retryAfterSeconds) },
      expose: true,
    });
  }
}

/**
 * A store answered with records the gateway cannot put in the interface's representation (a
 * role id that is not a number, say). They are never passed on; the log names what was wrong.
 */
export class BadStoreData extends GatewayError {
  constructor(cause?: unknown) {
    super(502, 'bad_store_data', 'A store the gateway depends on returned data it cannot use.', { cause, expose: true });
  }
}

/** The backend refused, reset or broke the connection before answering. */
export class BadGateway extends GatewayError {
  constructor(cause?: unknown) {
    super(502, 'bad_gateway', 'The backend behind this route could not be reached or did not answer properly.', { cause, expose: true });
  }
}

/** The backend did not answer within the route's timeout. */
export class GatewayTimeout extends GatewayError {
  constructor(cause?: unknown) {
    super(504, 'gateway_timeout', 'The backend behind this route did not answer in time.', { cause, expose: true });
  }
}

/**
 * A Transfer-Encoding other than exactly `chunked` (RFC 9112 §6.1 asks for 501). A 5xx by the
 * RFC's choice, but the caller's doing, so its sentence is shown; the framing cannot tell
 * where the next request starts, so the connection ends too.
 */
export class UnsupportedTransferCoding extends GatewayError {
  constructor() {
    super(501, 'unsupported_transfer_coding', 'The only transfer coding accepted is chunked.', { headers: { Connection: 'close' }, expose: true });
  }
}

export class InternalError extends GatewayError {
  constructor(cause?: unknown) {
    super(500, 'internal_error', 'The gateway failed to answer this request.', { cause });
  }
}
