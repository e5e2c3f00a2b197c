/**
 * Gives every request an id, echoed as X-Request-Id and written in every log line about it.
 * An incoming X-Request-Id is kept when it is short and plain (so a caller's or an upstream
 * proxy's id correlates), otherwise replaced: it ends up in logs and must not inject into them.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Context, Next } from 'koa';

const PLAIN_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Koa's, for the management listener only (app.ts): the main listener's requests take their id
 * from their exchange (http/exchange.ts).
 */
export function assignRequestId() {
  return async function assignRequestId(ctx: Context, next: Next): Promise<void> {
    const id = requestIdOf(ctx.req);
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    await next();
  };
}

/** The request's id: the caller's when plain, else a new one (also when there is no request: its head was refused unread). */
export function requestIdOf(req: IncomingMessage | undefined): string {
  const incoming = req?.headers['x-request-id'];
  return typeof incoming === 'string' && PLAIN_ID.test(incoming) ? incoming : randomUUID();
}
