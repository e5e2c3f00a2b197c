/**
 * The only writer of error responses. Everything thrown below this middleware becomes a status,
 * the envelope and, for bearer-protected calls, a WWW-Authenticate challenge. Koa's own
 * ctx.onerror never answers a request: it would strip headers and answer in plain text.
 *
 * Third-party errors are normalised once, here: http-errors style objects with a 4xx `status`
 * and `expose` (koa, @koa/router) keep their status; anything else is an internal error whose
 * details go to the log only, while the caller gets a generic sentence and the request id.
 */
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { formatBearerChallenge } from './challenge.js';
import { GatewayError, InternalError, InvalidRequest } from './errors.js';
import { failure } from '../http/envelope.js';

export interface BoundaryOptions {
  realm: string;
  log: Logger;
}

export function errorBoundary({ realm, log }: BoundaryOptions) {
  return async function errorBoundary(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
    } catch (thrown) {
      const error = toGatewayError(thrown);
      const requestId = ctx.state.requestId as string | undefined;
      if (error.status >= 500 && error.expose) {
        // A known condition the caller is told about (a store or backend down, a transfer coding
        // we do not apply): one line, no stack.
        log.warn({ requestId, code: error.code, cause: error.cause instanceof Error ? error.cause.message : undefined }, 'request not served');
      } else if (error.status >= 500) {
        log.error({ err: error.cause ?? error, requestId }, 'request failed');
      }

      if (ctx.headerSent || !ctx.writable) {
        // Too late for an envelope: the only honest signal left is to cut the connection.
        ctx.req.socket.destroy();
        return;
      }
      for (const name of ctx.res.getHeaderNames()) {
        if (name !== 'x-request-id') ctx.res.removeHeader(name);
      }
      ctx.status = error.status;
      ctx.set(error.headers);
      ctx.set('Cache-Control', 'no-store');
      // An unread body (refused for its size or type) would otherwise be drained to keep the
      // connection: close it instead, so a refused upload costs no more bandwidth.
      if (!ctx.req.complete) ctx.set('Connection', 'close');
      if (error.challenge !== undefined) {
        ctx.set('WWW-Authenticate', formatBearerChallenge({ realm, ...error.challenge, description: error.message }));
      }
      ctx.body = failure({
        code: error.code,
        description: error.expose ? error.message : 'The gateway failed to answer this request.',
        ...(error.status >= 500 ? { requestId } : {}),
      });
    }
  };
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
