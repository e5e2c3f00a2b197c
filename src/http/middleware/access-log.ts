/**
 * One log line per request with its final status. Only the path is written, never the query
 * string or headers: those may carry tokens or personal data.
 */
import type { Context, Next } from 'koa';
import type { Logger } from '../../telemetry/log.js';

export function logAccess(log: Logger) {
  return async function logAccess(ctx: Context, next: Next): Promise<void> {
    const started = performance.now();
    try {
      await next();
    } finally {
      log.info({
        requestId: ctx.state.requestId,
        method: ctx.method,
        path: ctx.path.length > 256 ? `${ctx.path.slice(0, 256)}…` : ctx.path,
        status: ctx.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
        accountId: (ctx.state.identity as { accountId?: string } | undefined)?.accountId,
      }, 'request');
    }
  };
}
