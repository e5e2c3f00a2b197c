/**
 * The span of each request the gateway answers itself (its own routes, 404s and refusals in
 * the envelope): started as the request arrives, ended with the status the access log writes.
 * Mounted only while tracing is on (telemetry/tracing.ts); proxied requests get theirs on the
 * proxied path (app.ts). Named like the access log's path: the own route's pattern, never the
 * path a caller typed.
 */
import type { Context, Next } from 'koa';
import type { Tracing } from '../../telemetry/tracing.js';
import { finalStatus, ownRouteOf, UNMATCHED_PATH } from './access-log.js';

export function traceRequests(tracing: Tracing) {
  return async function traceRequests(ctx: Context, next: Next): Promise<void> {
    const span = tracing.start(ctx.req);
    try {
      await next();
    } finally {
      const template = ownRouteOf(ctx);
      span.end({
        status: finalStatus(ctx.req, ctx.res, ctx.status),
        requestId: ctx.state.requestId as string | undefined,
        path: template ?? UNMATCHED_PATH,
        template,
      });
    }
  };
}
