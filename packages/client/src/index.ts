/**
 * The official client of the authenticating gateway. `GatewayClient` calls the public API
 * with tokens renewed inside; the owner API is the separate entry point
 * `@auth-gateway/client/owner`.
 */
export { GatewayClient } from './client.js';
export {
  AbortError, ApiError, AuthenticationError, ConfigurationError, ConflictError, GatewayError, InvalidRequestError,
  NetworkError, NotFoundError, PermissionError, RateLimitError, ServerError, TimeoutError, UnexpectedResponseError,
} from './errors.js';
export type { ApiErrorDetails, GatewayErrorDetails } from './errors.js';
export type { DpopCryptoKey, DpopKeyObject, DpopKeyPair, DpopOption, Jwk } from './dpop-types.js';
export type {
  CallOptions, ClientOptions, Credentials, GatewayRequestInit, RateLimitInfo, RateLimitItem, ResetResult, RetryOptions, Role,
  RolesPage, RolesQuery, SignRecord, TokenPair, TokenStorage,
} from './types.js';
