/**
 * Every error class, and how an application branches on them. Compiled, never run.
 */
import {
  AbortError, ApiError, AuthenticationError, ConfigurationError, ConflictError, GatewayClient, GatewayError,
  InvalidRequestError, NetworkError, NotFoundError, PermissionError, RateLimitError, ServerError, TimeoutError,
  UnexpectedResponseError, type ApiErrorDetails, type GatewayErrorDetails, type RateLimitInfo,
} from '@auth-gateway/client';
import * as owner from '@auth-gateway/client/owner';
import { expectAssignable, type Equal, type Expect } from './assert-types.js';

const gateway = new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { settingsToken: 'gwst_…' } });

try {
  await gateway.sign('0x52908400098527886E0F7030069857D2E4169EE7', { timeoutMs: 2_000 });
} catch (err) {
  if (err instanceof RateLimitError) {
    expectAssignable<number | undefined>(err.retryAfterMs);
    expectAssignable<RateLimitInfo | undefined>(err.rateLimit);
  } else if (err instanceof NotFoundError) {
    expectAssignable<'sign_record_not_found' | string>(err.code);
  } else if (err instanceof AuthenticationError) {
    // invalid_token, invalid_credentials, invalid_grant, missing_token …
    expectAssignable<string>(err.code);
  } else if (err instanceof PermissionError || err instanceof ConflictError || err instanceof InvalidRequestError || err instanceof ServerError) {
    expectAssignable<ApiError>(err);
  } else if (err instanceof ApiError) {
    type _status = Expect<Equal<typeof err.status, number>>;
  } else if (err instanceof UnexpectedResponseError) {
    expectAssignable<number | undefined>(err.status);
  } else if (err instanceof TimeoutError || err instanceof AbortError || err instanceof NetworkError) {
    // No answer came: no status.
    expectAssignable<GatewayError>(err);
  } else if (err instanceof ConfigurationError) {
    expectAssignable<string>(err.description);
  }
  if (err instanceof GatewayError) {
    expectAssignable<string>(err.code);
    expectAssignable<string>(err.description);
    expectAssignable<number | undefined>(err.status);
    expectAssignable<string | undefined>(err.requestId);
    expectAssignable<Error>(err);
  }
}

// The class hierarchy callers rely on.
type _api = Expect<Equal<RateLimitError extends ApiError ? true : false, true>>;
type _gw = Expect<Equal<ApiError extends GatewayError ? true : false, true>>;
type _net = Expect<Equal<NetworkError extends ApiError ? true : false, false>>;
const details: ApiErrorDetails = { code: 'rate_limited', description: 'slow down', status: 429, retryAfterMs: 1_000 };
const base: GatewayErrorDetails = details;
expectAssignable<RateLimitError>(new RateLimitError(details));
expectAssignable<GatewayError>(new TimeoutError({ code: 'timeout', description: 'too slow' }));
void base;
// @ts-expect-error an ApiError always has a status
new ApiError({ code: 'x', description: 'y' });
// @ts-expect-error status is a number
const statusText: string = new ApiError(details).status;
void statusText;

// The owner entry point shares the same error classes.
type _shared = Expect<Equal<typeof owner.GatewayError, typeof GatewayError>>;
expectAssignable<typeof owner.OwnerClient>(owner.OwnerClient);
