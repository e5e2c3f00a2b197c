/**
 * One log line per request with its final status. Only the path is written, never the query
 * string or headers: those may carry tokens or personal data.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context, Next } from 'koa';
import type { Logger } from '../../telemetry/log.js';

export interface AccessEntry {
  requestId: string | undefined;
  method: string | undefined;
  path: string;
  status: number;
  route: string | undefined;
  /** performance.now() when the request arrived. */
  started: number;
  accountId: string | undefined;
}

export type AccessLog = (entry: AccessEntry) => void;

/** The writer of access-log lines, shared by the Koa middleware and the proxied-route path. */
export function createAccessLog(log: Logger): AccessLog {
  // These lines hold only the fields below, none of them secret, so they skip the redaction
  // pass: it costs ten times the line itself (bench/README.md).
  const lines = log.child({}, { redact: [] });
  return ({ requestId, method, path, status, route, started, accountId }) => {
    lines.info({
      requestId,
      method,
      path: path.length > 256 ? `${path.slice(0, 256)}…` : path,
      status,
      route,
      ms: Math.round((performance.now() - started) * 10) / 10,
      accountId,
    }, 'request');
  };
}

export function logAccess(write: AccessLog) {
  return async function logAccess(ctx: Context, next: Next): Promise<void> {
    const started = performance.now();
    // Read now: a later middleware may rewrite the URL.
    const path = ctx.path;
    try {
      await next();
    } finally {
      write({
        requestId: ctx.state.requestId as string | undefined,
        method: ctx.method,
        path,
        status: finalStatus(ctx.req, ctx.res, ctx.status),
        route: ctx.state.route as string | undefined,
        started,
        accountId: (ctx.state.identity as { accountId?: string } | undefined)?.accountId,
      });
    }
  };
}

/**
 * The status the client got: what went out if anything did; 499, nginx's "client closed
 * request", for a client that left before any answer; otherwise `planned` (Koa's status).
 */
export function finalStatus(req: IncomingMessage, res: ServerResponse, planned: number): number {
  if (res.headersSent) return res.statusCode;
  return req.socket.destroyed ? 499 : planned;
}
