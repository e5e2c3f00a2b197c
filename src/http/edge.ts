/**
 * The request edge: the steps a request passes before any route sees it, in one order, for
 * each of the gateway's ways in. The steps are plain functions; Koa's middleware wrap them.
 *
 *   1. request id        requestIdOf (middleware/request-id.ts)
 *   2. head check        checkRequestHead (middleware/request-head.ts): framing and Host
 *   3. path normalised   normaliseUrl (middleware/normalise-path.ts), written back to req.url
 *   4. proxied or not    routeRequest (here): a configured route's path, unless the gateway
 *                        answers that path itself under some method: own paths are never
 *                        proxied, for requests and WebSocket handshakes alike
 *   …  any refusal       the envelope (errors/boundary.ts errorAnswer), written by Koa's error
 *                        boundary, or failResponse / failSocket (raw-response.ts) outside Koa
 *
 * Where each way in uses them:
 * - Koa (app.ts) serves the gateway's own routes and everything refused: its middleware run
 *   steps 1–3 in this order, then the router.
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
import type { RouteMatch } from '../proxy/routes.js';
import { checkRequestHead } from './middleware/request-head.js';
import { normaliseUrl } from './middleware/normalise-path.js';

/** A request the edge hands to the proxy: its route, and its normalised path (for the log). */
export interface Routed {
  match: RouteMatch;
  path: string;
}

/**
 * The one decision "is this request proxied, and on which route". Undefined leaves it to Koa;
 * otherwise req.url is now the normalised target.
 */
export type RouteRequest = (req: IncomingMessage) => Routed | undefined;

export interface RouteRequestDeps {
  /** False when no route is configured: the gateway's own requests then skip the checks. */
  hasRoutes: boolean;
  /** The configured route of a normalised target (proxy/routes.ts). */
  match(url: string): RouteMatch | undefined;
  /** True for a path the gateway answers itself under some method. */
  isOwnPath(path: string): boolean;
}

export function createRouteRequest({ hasRoutes, match, isOwnPath }: RouteRequestDeps): RouteRequest {
  if (!hasRoutes) return () => undefined;
  return function routeRequest(req) {
    let url: string;
    try {
      checkRequestHead(req);
      url = normaliseUrl(req.url ?? '');
    } catch {
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
