/**
 * Where every error answer is made (errorAnswer): a status, the envelope and, for
 * bearer-protected calls, a WWW-Authenticate challenge. Koa's middleware (errorBoundary), the
 * proxied-route path (app.ts) and raw sockets (http/raw-response.ts) only write it. Koa's own
 * ctx.onerror never answers a request: it would strip headers and answer in plain text.
 *
 * Third-party errors are normalised once, here: http-errors style objects with a 4xx `status`
 * and `expose` (koa, @koa/router) keep their status; anything else is an internal error whose
 * details go to the log only, while the caller gets a generic sentence and the request id.
 */
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { REALM, formatBasicChallenge, formatBearerChallenge, formatDpopChallenge, oauthDescription } from './challenge.js';
import { GatewayError, InternalError, InvalidRequest } from './errors.js';
import { failure, type Envelope, type ErrorMessage } from './envelope.js';
import { OAuthError, type OAuthErrorBody } from './oauth.js';

export interface BoundaryOptions {
  log: Logger;
}

/**
 * What the caller gets for an error: status, headers and the envelope; RFC 6749's object alone
 * for an OAuthError (the token endpoint, whose clients are OAuth libraries), and the envelope
 * with RFC 6749's members beside it where a route asks so (OAUTH_ERRORS: revocation).
 */
export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: Envelope<ErrorMessage> | (Envelope<ErrorMessage> & OAuthErrorFields) | OAuthErrorBody;
}

/** RFC 6749 §5.2's members, which OAuth libraries read (RFC 7009 §2.2.1 answers with them too). */
export interface OAuthErrorFields {
  error: string;
  error_description: string;
}

/**
 * Set on ctx.state by a route an OAuth library calls (POST /api/revoke): its error answers carry
 * RFC 6749 §5.2's `error` and `error_description` beside the envelope, as the JWKS carries
 * `keys` beside it, so both kinds of reader find what they look for.
 */
export const OAUTH_ERRORS = 'oauthErrors';

/** The headers set before a failure that its answer keeps (lower case, as Node names them). */
const KEPT_ON_ERRORS: ReadonlySet<string> = new Set(['x-request-id', 'ratelimit', 'ratelimit-policy', 'strict-transport-security']);

export function errorBoundary({ log }: BoundaryOptions) {
  return async function errorBoundary(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
    } catch (thrown) {
      const error = toGatewayError(thrown);
      const requestId = ctx.state.requestId as string | undefined;
      reportFailure(log, error, requestId);
      if (ctx.headerSent || !ctx.writable) {
        // Too late for an envelope: the only honest signal left is to cut the connection.
        ctx.req.socket.destroy();
        return;
      }
      // What was set for a success goes, except what holds for any answer: the request id, a
      // counted quota's fields (limits/: the call was counted whatever its answer), and HSTS
      // (RFC 6797 §8.1: a browser takes it from any answer over HTTPS, errors included).
      for (const name of ctx.res.getHeaderNames()) {
        if (!KEPT_ON_ERRORS.has(name)) ctx.res.removeHeader(name);
      }
      const answer = errorAnswer(error, requestId, ctx.req.complete, ctx.state[OAUTH_ERRORS] === true);
      ctx.status = answer.status;
      ctx.set(answer.headers);
      ctx.body = answer.body;
    }
  };
}

/** The log line for a failure the gateway is answerable for (5xx); 4xx are the caller's and go unlogged. */
export function reportFailure(log: Logger, error: GatewayError, requestId: string | undefined): void {
  if (error.status >= 500 && error.expose) {
    // A known condition the caller is told about (a store or backend down, a transfer coding
    // we do not apply): one line, no stack.
    log.warn({ requestId, code: error.code, cause: error.cause instanceof Error ? error.cause.message : undefined }, 'request not served');
  } else if (error.status >= 500) {
    log.error({ err: error.cause ?? error, requestId }, 'request failed');
  }
}

/**
 * The answer to `error`, written the same way wherever it is written (Koa, the proxied-route
 * path, a raw socket). `requestComplete`: false when the request body was not read, in which
 * case the connection closes rather than draining a refused upload.
 */
export function errorAnswer(error: GatewayError, requestId: string | undefined, requestComplete: boolean, oauth = false): ErrorAnswer {
  const headers: Record<string, string> = { ...error.headers, 'Cache-Control': 'no-store' };
  if (!requestComplete) headers.Connection = 'close';
  if (error instanceof OAuthError) return oauthAnswer(error, headers, requestId);
  if (error.challenge !== undefined) {
    const { scheme, algs, ...challenge } = error.challenge;
    headers['WWW-Authenticate'] = scheme === 'DPoP'
      ? formatDpopChallenge({ ...challenge, description: error.message, algs })
      : formatBearerChallenge({ realm: REALM, ...challenge, description: error.message });
  }
  const body = failure({
    code: error.code,
    description: error.expose ? error.message : 'The gateway failed to answer this request.',
    ...(error.field !== undefined && error.expose ? { field: error.field } : {}),
    ...(error.status >= 500 ? { requestId } : {}),
  });
  if (oauth) return { status: error.status, headers, body: { ...body, error: oauthErrorCode(error), error_description: body.message.description } };
  return { status: error.status, headers, body };
}

/** RFC 6749 §5.2: `{error, error_description}`, and a Basic challenge where the client tried the header. */
function oauthAnswer(error: OAuthError, headers: Record<string, string>, requestId: string | undefined): ErrorAnswer {
  if (error.basicChallenge) headers['WWW-Authenticate'] = formatBasicChallenge(REALM);
  // RFC 6749's object has no member for the request id: a 5xx names it in its sentence.
  const description = oauthDescription(error.expose ? error.message : `The token endpoint failed to answer this request (request id ${requestId ?? 'unknown'}).`);
  return { status: error.status, headers, body: { error: error.error, ...(description === '' ? {} : { error_description: description }) } };
}

/** RFC 6749 §5.2 and RFC 7009 §2.2.1 words; the gateway's other codes as the nearest of them. */
const OAUTH_CODES: ReadonlySet<string> = new Set(['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope', 'unsupported_token_type', 'temporarily_unavailable']);

function oauthErrorCode(error: GatewayError): string {
  if (OAUTH_CODES.has(error.code)) return error.code;
  if (error.status === 429 || error.status === 503) return 'temporarily_unavailable';
  return error.status >= 500 ? 'server_error' : 'invalid_request';
}

export function toGatewayError(thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError) return thrown;
  if (thrown instanceof URIError) return new InvalidRequest('The request path or query is not valid percent-encoding.', { cause: thrown });
  const httpError = thrown as { status?: unknown; expose?: unknown; message?: unknown };
  if (typeof httpError?.status === 'number' && httpError.status >= 400 && httpError.status < 500 && httpError.expose === true) {
    return new GatewayError(httpError.status, httpError.status === 400 ? 'invalid_request' : `http_${httpError.status}`, String(httpError.message), { cause: thrown });
  }
  return new InternalError(thrown);
}
