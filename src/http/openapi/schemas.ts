/**
 * Schemas shared by the whole OpenAPI document: the envelopes, the error statuses every
 * operation can answer, and the security schemes. The success and error envelopes are
 * written here once, as errors/envelope.ts and errors/boundary.ts make them.
 */
import { z } from 'zod';
import type { HttpMethod, Operation } from '../owner/operation.js';

export const ErrorMessage = z.object({
  code: z.string().regex(/^[a-z][a-z0-9_]*$/).meta({ description: 'Stable, machine-readable, snake_case.' }),
  description: z.string().meta({ description: 'One human sentence.' }),
  field: z.string().optional().meta({ description: 'The request field at fault ("name", "scopes.2"), on validation errors and conflicts.' }),
  requestId: z.string().optional().meta({ description: 'On 5xx answers: quote it to the operator.' }),
}).meta({ id: 'ErrorMessage' });

export const ErrorEnvelope = z.object({
  success: z.literal(false),
  message: ErrorMessage,
}).meta({ id: 'ErrorEnvelope' });

/** `{success: true, message}` around an operation's answer. */
export function successEnvelope(message: z.ZodType): z.ZodType {
  return z.object({ success: z.literal(true), message });
}

/** What each error status means, across the gateway (docs/api.md has the full table). */
export const ERROR_STATUS_TEXT: Record<number, string> = {
  400: 'invalid_request: a malformed body, query or path parameter, an unknown field (named in `field`), a malformed Authorization header.',
  401: 'missing_token, invalid_token, invalid_credentials, invalid_grant or session_required: the credentials are missing or not valid.',
  403: 'forbidden (an operator-only action), csrf_failed (a session change without X-CSRF-Token or from another origin), password_change_required, insufficient_scope.',
  404: 'not_found: no such object in this account (another account\'s, a deleted one or a made-up id all answer the same); sign_record_not_found.',
  409: 'conflict (a duplicate id, slug, email or address, the last owner; `field` names it) or read_only_store (this store is not written by the gateway).',
  413: 'payload_too_large: the body is larger than the limit.',
  415: 'unsupported_media_type: the body is not UTF-8 JSON.',
  429: 'rate_limited: over a rate limit or a sign-in lockout, with Retry-After.',
  502: 'bad_store_data: a store answered records the gateway cannot use.',
  503: 'store_unavailable: a store the gateway depends on is unavailable, with Retry-After; overloaded: too many password checks already wait (owner API), with Retry-After.',
  504: 'store_timeout: a store did not answer in time, with Retry-After.',
};

export function errorResponse(status: number) {
  return {
    description: ERROR_STATUS_TEXT[status] ?? 'An error.',
    content: { 'application/json': { schema: ErrorEnvelope } },
  };
}

const UNSAFE: ReadonlySet<HttpMethod> = new Set(['post', 'put', 'patch', 'delete']);

/**
 * Every status an owner operation documents: its success, its own `errors`, and the ones
 * operation.ts says every operation can answer (400, 401, 413, 415, 429, 503), narrowed by its
 * shape (no 415 without a body, ...), plus those the framework (http/owner/register.ts,
 * caller.ts) answers for it: 403 for the origin check and the initial-password gate, 404 for an
 * account that is not the caller's and for an operator on a session's own route.
 */
export function operationStatuses(op: Pick<Operation, 'method' | 'path' | 'auth' | 'params' | 'query' | 'body' | 'status' | 'errors'>): number[] {
  const statuses = new Set<number>([op.status ?? 200, ...op.errors]);
  if (op.params !== undefined || op.query !== undefined || op.body !== undefined) statuses.add(400);
  // Credentials are checked, and counted as sign-in attempts, by every operation: an admin
  // token or a session by the non-public ones, a password (or a passkey's answer) by the public
  // ones that take a body. A public one without (a passkey ceremony's start) is counted only.
  if (op.auth !== 'public' || op.body !== undefined) statuses.add(401);
  statuses.add(429);
  // The origin check is for every change; the initial-password gate for every caller operation.
  if (UNSAFE.has(op.method) || op.auth === 'caller') statuses.add(403);
  // Operators have no session; an account id that is not the caller's is not found.
  if (op.auth === 'session' || op.path.includes('{accountId}')) statuses.add(404);
  // Any body is read up to the limit, even one the operation does not take.
  if (op.method !== 'get') statuses.add(413);
  if (op.body !== undefined) statuses.add(415);
  statuses.add(503);
  return [...statuses].sort((a, b) => a - b);
}

export const SECURITY_SCHEMES = {
  accessToken: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT access token from /api/signin, or an API settings token (gwst_…)',
    description: 'A data-plane credential: an access token (JWT) or an API settings token (`gwst_` + 49 base62 characters).',
  },
  adminToken: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'gwadm_ + 43 base62 characters',
    description: 'An operator\'s admin token; its `sha256:` digest is in `owner.adminTokenDigests`. Not ambient, so it needs no CSRF token.',
  },
  sessionCookie: {
    type: 'apiKey',
    in: 'cookie',
    name: 'gw_session',
    description: 'An owner\'s session from POST /owner/v1/session (`__Host-gw_session` when the gateway is served over TLS). HttpOnly, SameSite=Strict.',
  },
  csrfToken: {
    type: 'apiKey',
    in: 'header',
    name: 'X-CSRF-Token',
    description: 'The session\'s `csrfToken`: required with the session cookie on every POST, PUT, PATCH and DELETE.',
  },
} as const;

/** Who may call an owner operation, as OpenAPI security requirements (any one of them). */
export function operationSecurity(op: Pick<Operation, 'method' | 'auth'>): Record<string, string[]>[] {
  if (op.auth === 'public') return [];
  const session: Record<string, string[]> = UNSAFE.has(op.method) ? { sessionCookie: [], csrfToken: [] } : { sessionCookie: [] };
  return op.auth === 'session' ? [session] : [session, { adminToken: [] }];
}
