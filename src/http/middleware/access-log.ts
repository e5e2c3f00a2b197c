/**
 * One log line per request with its final status. Only the path is written, never the query
 * string or headers: those may carry tokens or personal data.
 */
import type { Context, Next } from 'koa';
import type { Logger } from '../../telemetry/log.js';

export function logAccess(log: Logger) {
  // These lines hold only the fields below, none of them secret, so they skip the redaction
  // pass: it costs ten times the line itself (bench/README.md).
  const lines = log.child({}, { redact: [] });
  return async function logAccess(ctx: Context, next: Next): Promise<void> {
    const started = performance.now();
    // Read now: a proxied request's URL becomes the backend's (a stripped prefix) on its way.
    const path = ctx.path;
    try {
      await next();
    } finally {
      lines.info({
        requestId: ctx.state.requestId,
        method: ctx.method,
        path: path.length > 256 ? `${path.slice(0, 256)}…` : path,
        status: statusOf(ctx),
        route: ctx.state.route,
        ms: Math.round((performance.now() - started) * 10) / 10,
        accountId: (ctx.state.identity as { accountId?: string } | undefined)?.accountId,
      }, 'request');
    }
  };
}

/**
 * A proxied response went out through res directly, so Koa's status never saw it; a client
 * that left before any answer is 499, nginx's "client closed request", not Koa's default 404.
 */
function statusOf(ctx: Context): number {
  if (ctx.res.headersSent) return ctx.res.statusCode;
  return ctx.req.socket.destroyed ? 499 : ctx.status;
}
