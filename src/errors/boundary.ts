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
import { REALM, formatBearerChallenge, formatDpopChallenge } from './challenge.js';
import { GatewayError, InternalError, InvalidRequest } from './errors.js';
import { failure, type Envelope, type ErrorMessage } from './envelope.js';

export interface BoundaryOptions {
  log: Logger;
}

/** What the caller gets for an error: status, headers and the envelope. */
export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: Envelope<ErrorMessage>;
}

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
      // What was set for a success goes, except the request id and a counted quota's fields
      // (limits/): the call was counted whatever its answer.
      for (const name of ctx.res.getHeaderNames()) {
        if (name !== 'x-request-id' && name !== 'ratelimit' && name !== 'ratelimit-policy') ctx.res.removeHeader(name);
      }
      const answer = errorAnswer(error, requestId, ctx.req.complete);
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
export function errorAnswer(error: GatewayError, requestId: string | undefined, requestComplete: boolean): ErrorAnswer {
  const headers: Record<string, string> = { ...error.headers, 'Cache-Control': 'no-store' };
  if (!requestComplete) headers.Connection = 'close';
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
  return { status: error.status, headers, body };
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
