/**
 * Every failure the client reports is a GatewayError. What callers branch on:
 *
 * - `ApiError` and its subclasses: the gateway (or, for `client.fetch`, nothing: proxied answers
 *   are returned, not thrown) answered with its error envelope. They carry the envelope's `code`
 *   and `description`, the HTTP `status` and the `requestId` to quote to the gateway's operator.
 * - `UnexpectedResponseError`: an answer that is not the gateway's envelope (a proxy in front of
 *   the gateway answering with HTML, say).
 * - `NetworkError`: no answer at all (refused, reset, DNS). `TimeoutError`: the call's time
 *   limit passed. `AbortError`: the caller's AbortSignal fired. The three are distinct so that a
 *   caller can retry the first, report the second and ignore the third.
 * - `ConfigurationError`: the client was asked for something its options cannot do (a reset
 *   without the key's secret, a secret in a browser without opting in).
 *
 * `name` is the class name, so `err.name === 'AbortError'` keeps working as it does for fetch.
 */
import type { RateLimitInfo } from './types.js';

export interface GatewayErrorDetails {
  code: string;
  description: string;
  status?: number | undefined;
  requestId?: string | undefined;
  cause?: unknown;
}

export class GatewayError extends Error {
  /** The envelope's stable snake_case code, or the client's own (`network_error`, `timeout`, …). */
  readonly code: string;
  /** One sentence saying what went wrong. */
  readonly description: string;
  /** The HTTP status, when there was an answer. */
  readonly status: number | undefined;
  /** The gateway's `X-Request-Id` (or the envelope's `requestId` on a 5xx), when there was an answer. */
  readonly requestId: string | undefined;

  constructor({ code, description, status, requestId, cause }: GatewayErrorDetails) {
    super(`${code}: ${description}`, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.code = code;
    this.description = description;
    this.status = status;
    this.requestId = requestId;
  }
}

export interface ApiErrorDetails extends GatewayErrorDetails {
  status: number;
  /** Retry-After in milliseconds, when the answer carried one. */
  retryAfterMs?: number | undefined;
  /** The RateLimit fields of the answer, when it carried them. */
  rateLimit?: RateLimitInfo | undefined;
}

/** The gateway answered with its error envelope. */
export class ApiError extends GatewayError {
  declare readonly status: number;
  readonly retryAfterMs: number | undefined;
  readonly rateLimit: RateLimitInfo | undefined;

  constructor(details: ApiErrorDetails) {
    super(details);
    this.retryAfterMs = details.retryAfterMs;
    this.rateLimit = details.rateLimit;
  }
}

/** 400 and the other 4xx without a class of their own (413, 415, 431, …). */
export class InvalidRequestError extends ApiError {}
/** 401: `missing_token`, `invalid_token`, `invalid_credentials`, `invalid_grant`, … */
export class AuthenticationError extends ApiError {}
/** 403: `insufficient_scope`, or an owner API refusal. */
export class PermissionError extends ApiError {}
/** 404: `not_found`, `sign_record_not_found`, … */
export class NotFoundError extends ApiError {}
/** 409: the owner API's conflicts (`read_only_store`, a stale version, …). */
export class ConflictError extends ApiError {}
/** 429 `rate_limited`: `retryAfterMs` says when to come back. */
export class RateLimitError extends ApiError {}
/** 5xx: `internal_error`, `bad_gateway`, `store_unavailable`, `gateway_timeout`, … */
export class ServerError extends ApiError {}

/** An answer that is not the gateway's envelope. */
export class UnexpectedResponseError extends GatewayError {}
/** No answer: the connection failed (refused, reset, DNS, CORS refused in a browser). */
export class NetworkError extends GatewayError {}
/** The call's time limit (`timeoutMs`) passed before it finished. */
export class TimeoutError extends GatewayError {}
/** The caller's AbortSignal fired; `cause` is the signal's reason. */
export class AbortError extends GatewayError {}
/** The client's options cannot do what was asked. */
export class ConfigurationError extends GatewayError {}

/** The ApiError subclass for a status. */
export function apiErrorFor(details: ApiErrorDetails): ApiError {
  const { status } = details;
  if (status === 401) return new AuthenticationError(details);
  if (status === 403) return new PermissionError(details);
  if (status === 404) return new NotFoundError(details);
  if (status === 409) return new ConflictError(details);
  if (status === 429) return new RateLimitError(details);
  if (status >= 500) return new ServerError(details);
  return new InvalidRequestError(details);
}
