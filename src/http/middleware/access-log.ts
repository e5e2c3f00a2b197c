/**
 * One log line per request with its final status. Only the path is written, never the query
 * string or headers: those may carry tokens or personal data. And only a path the gateway
 * routed, normalised: a proxied request's (its route's prefix and below, which its backend
 * reads too) or the pattern of the gateway's own route it matched (by any method). A request
 * that matched nothing (404) or was refused before matching (400, 501) logs UNMATCHED_PATH:
 * arbitrary caller text, a token pasted into a URL say, never lands in the log.
 *
 * Written by the request's exchange (http/exchange.ts) as it ends, for every kind of request,
 * WebSocket handshakes (`websocket: true`) and requests refused before the app included.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { Logger } from '../../telemetry/log.js';
import type { Metrics } from '../../telemetry/metrics.js';
import { upstreamSeconds, type Upstream } from '../../telemetry/upstream.js';

export interface AccessEntry {
  requestId: string | undefined;
  method: string | undefined;
  path: string;
  status: number;
  route: string | undefined;
  /** performance.now() when the request arrived. */
  started: number;
  accountId: string | undefined;
  /** A proxied request's backend side (its last attempt), when a backend was tried. */
  upstream?: Upstream | undefined;
  /** True for a WebSocket handshake (written only then). */
  websocket?: true | undefined;
}

export type AccessLog = (entry: AccessEntry) => void;

/** A path as log lines hold it: at most 256 characters, so no caller can make a line long. */
export function shortPath(path: string): string {
  return path.length > 256 ? `${path.slice(0, 256)}…` : path;
}

/** The path logged for a request that no route matched. */
export const UNMATCHED_PATH = '(unmatched)';

/**
 * The writer of access-log lines, called by every exchange as it ends (http/exchange.ts); with
 * `metrics`, each line's request is counted there too (the one place every request ends with
 * its final status). An own route is counted under its pattern, as the line logs it.
 */
export function createAccessLog(log: Logger, metrics?: Pick<Metrics, 'observeRequest'>): AccessLog {
  // These lines hold only the fields below, none of them secret, so they skip the redaction
  // pass: it costs ten times the line itself (bench/README.md).
  const lines = log.child({}, { redact: [] });
  return ({ requestId, method, path, status, route, started, accountId, upstream, websocket }) => {
    const ms = performance.now() - started;
    lines.info({
      requestId,
      method,
      path: shortPath(path),
      status,
      route,
      ms: Math.round(ms * 10) / 10,
      accountId,
      websocket,
    }, 'request');
    metrics?.observeRequest(route ?? path, method, status, ms / 1000, upstream?.target.origin, upstream === undefined ? undefined : upstreamSeconds(upstream), accountId);
  };
}

/**
 * The pattern of the gateway's own route the normalised path matched under some method, as
 * @koa/router recorded it (its `router.use` layers have no methods and match every path).
 */
export function ownRouteOf(ctx: Context): string | undefined {
  const matched = (ctx as Context & { matched?: { methods: string[]; path: string | RegExp }[] }).matched;
  const layer = matched?.find((l) => l.methods.length > 0);
  return typeof layer?.path === 'string' ? layer.path : undefined;
}

/**
 * The status the client got: what went out if anything did; 499, nginx's "client closed
 * request", for a client that left before any answer; otherwise `planned` (Koa's status).
 */
export function finalStatus(req: IncomingMessage, res: ServerResponse, planned: number): number {
  if (res.headersSent) return res.statusCode;
  return req.socket.destroyed ? 499 : planned;
}
