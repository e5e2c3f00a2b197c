/**
 * One log line per request with its final status. Only the path is written, never the query
 * string or headers: those may carry tokens or personal data.
 */
import type { Context, Next } from 'koa';
import type { Logger } from '../../telemetry/log.js';

export function logAccess(log: Logger) {
  return async function logAccess(ctx: Context, next: Next): Promise<void> {
    const started = performance.now();
    // Read now: a proxied request's URL becomes the backend's (a stripped prefix) on its way.
    const path = ctx.path;
    try {
      await next();
    } finally {
      log.info({
        requestId: ctx.state.requestId,
        method: ctx.method,
        path: path.length > 256 ? `${path.slice(0, 256)}…` : path,
        // A proxied response went out through res directly; Koa's status never saw it.
        status: ctx.res.headersSent ? ctx.res.statusCode : ctx.status,
        route: ctx.state.route,
        ms: Math.round((performance.now() - started) * 10) / 10,
        accountId: (ctx.state.identity as { accountId?: string } | undefined)?.accountId,
      }, 'request');
    }
  };
}
