/**
 * The request edge: the steps a request passes before any route sees it, in one order, for
 * each of the gateway's ways in. The steps are plain functions; Koa's middleware wrap them.
 *
 *   1. request id        requestIdOf (middleware/request-id.ts)
 *   2. head check        checkRequestHead (middleware/request-head.ts): framing and Host
 *   3. path normalised   normaliseUrl (middleware/normalise-path.ts)
 *                        (2 and 3 always together, in this order: screenRequest, here)
 *   4. proxied or not    routeRequest (here): a configured route's path, unless the gateway
 *                        answers that path itself under some method: own paths are never
 *                        proxied, for requests and WebSocket handshakes alike
 *   …  any refusal       the envelope (errors/boundary.ts errorAnswer), written by Koa's error
 *                        boundary, or failResponse / failSocket (raw-response.ts) outside Koa
 *
 * Where each way in uses them:
 * - Koa (app.ts) serves the gateway's own routes and everything refused: assignRequestId
 *   (step 1), then the access log and error boundary, then screenRequests (2, 3, with
 *   req.url rewritten to the normalised target), then the router.
 * - The proxied-route path (app.ts): routeRequest makes steps 2–4 and, when any fails or the
 *   path is not proxied, leaves the request to Koa, whose middleware find the same fault and
 *   answer it; so a refusal is written in one place. Step 1 follows, then the proxy.
 * - A WebSocket handshake (server.ts): routeRequest decides in shouldUpgradeCallback; only a
 *   handshake it routes to a WebSocket route is upgraded. Anything else, an own path included,
 *   is an ordinary request for the two ways above, its Upgrade header ignored.
 * - Requests Node refuses before any of this (a malformed head, CONNECT, an unmet Expect;
 *   server.ts) get step 1 where there is a request to take it from, and the envelope.
 */
import type { IncomingMessage } from 'node:http';
import type { Context, Next } from 'koa';
import { checkRequestHead } from './middleware/request-head.js';
import { normaliseUrl } from './middleware/normalise-path.js';

/**
 * Steps 2 and 3, in their order, for every way in: the request target with its path
 * normalised, or the refusal thrown (400, 501) when the head or the path is irregular.
 */
export function screenRequest(req: IncomingMessage): string {
  checkRequestHead(req);
  return normaliseUrl(req.url ?? '');
}

/** Koa's wrapper of screenRequest: throws the refusal, or has req.url normalised for the router. */
export function screenRequests() {
  return async function screenRequests(ctx: Context, next: Next): Promise<void> {
    const url = screenRequest(ctx.req);
    if (url !== ctx.req.url) ctx.req.url = url;
    await next();
  };
}

/**
 * A request the edge hands to the proxy: its route (a proxy/routes.ts RouteMatch; generic
 * here because http/ sits below proxy/), and its normalised path (for the log).
 */
export interface Routed<Match> {
  match: Match;
  path: string;
}

/**
 * The one decision "is this request proxied, and on which route". Undefined leaves it to Koa;
 * otherwise req.url is now the normalised target.
 */
export type RouteRequest<Match> = (req: IncomingMessage) => Routed<Match> | undefined;

export interface RouteRequestDeps<Match> {
  /** False while no route is configured (a reload may add some): the gateway's own requests then skip the checks. */
  hasRoutes(): boolean;
  /** The configured route of a normalised target (proxy/routes.ts). */
  match(url: string): Match | undefined;
  /** True for a path the gateway answers itself under some method. */
  isOwnPath(path: string): boolean;
}

export function createRouteRequest<Match>({ hasRoutes, match, isOwnPath }: RouteRequestDeps<Match>): RouteRequest<Match> {
  return function routeRequest(req) {
    if (!hasRoutes()) return undefined;
    let url: string;
    try {
      url = screenRequest(req);
    } catch {
      // Koa's screenRequests finds the same fault and answers it.
      return undefined;
    }
    // The route first: most of the gateway's own requests match none, and skip the router.
    const matched = match(url);
    if (matched === undefined) return undefined;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (isOwnPath(path)) return undefined;
    req.url = url;
    return { match: matched, path };
  };
}

/** A WebSocket opening handshake (RFC 6455 §4.1): anything else with an Upgrade header is an ordinary request. */
export function isWebSocketHandshake(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return upgrade !== undefined && /^websocket$/i.test(upgrade);
}
