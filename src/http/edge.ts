/**
 * The request edge: the steps a request passes before any route sees it, in one order, for
 * each of the gateway's ways in. The steps are plain functions; Koa's middleware wrap them.
 *
 *   0. exchange          opened at the listener (exchange.ts): the request's id (step 1),
 *                        arrival, access line, metric and span, for every way below
 *   1. request id        requestIdOf (middleware/request-id.ts)
 *   2. head check        checkRequestHead (middleware/request-head.ts): framing and Host
 *   3. path normalised   normaliseUrl (middleware/normalise-path.ts)
 *                        (2 and 3 always together, in this order, once per request:
 *                        screenOnce, here, records the result on the exchange)
 *   4. proxied or not    routeRequest (here): a configured route's path, unless the gateway
 *                        answers that path itself under some method: own paths are never
 *                        proxied, for requests and WebSocket handshakes alike
 *   …  any refusal       the envelope (errors/boundary.ts errorAnswer), written by Koa's error
 *                        boundary, or failResponse / failSocket (raw-response.ts) outside Koa
 *
 * Where each way in uses them (app.ts):
 * - Every request: the listener opens its exchange and routeRequest screens it (steps 2, 3;
 *   req.url becomes the normalised target) and routes it (4).
 * - Koa serves the gateway's own routes and everything refused: joinExchange (the exchange's
 *   id, and its end), then the error boundary, then screenRequests, which throws the refusal
 *   the screening recorded (so that it is answered inside the boundary), then the router.
 * - The proxied-route path: the routed request goes to the proxy, its exchange ended with the
 *   answer.
 * - A WebSocket handshake: routeRequest decides in shouldUpgradeCallback, on the exchange
 *   opened there; only a handshake it routes to a WebSocket route is upgraded. Anything else,
 *   an own path included, is an ordinary request for the two ways above (with the same,
 *   already screened exchange), its Upgrade header ignored.
 * - Requests Node refuses before any of this (a malformed head, CONNECT, an unmet Expect;
 *   server.ts) get an exchange of their own, with step 1 where there is a request to take it
 *   from, and the envelope.
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

/** Where a request's screening is recorded (its exchange): the normalised target, or the refusal. */
export interface Screening {
  url: string | undefined;
  refusal: unknown;
}

/**
 * screenRequest, once per request: the first call records its outcome on `screening` and has
 * req.url normalised; later ones read it. The normalised target, or undefined when refused.
 */
export function screenOnce(req: IncomingMessage, screening: Screening): string | undefined {
  if (screening.url !== undefined || screening.refusal !== undefined) return screening.url;
  try {
    const url = screenRequest(req);
    if (url !== req.url) req.url = url;
    screening.url = url;
    return url;
  } catch (refusal) {
    screening.refusal = refusal;
    return undefined;
  }
}

/**
 * Koa's side, inside the error boundary: throws the refusal the request's screening recorded
 * (`screeningOf`, its exchange; screened here when it has none: the management listener).
 */
export function screenRequests(screeningOf?: (req: IncomingMessage) => Screening) {
  return async function screenRequests(ctx: Context, next: Next): Promise<void> {
    const screening = screeningOf?.(ctx.req) ?? { url: undefined, refusal: undefined };
    if (screenOnce(ctx.req, screening) === undefined) throw screening.refusal;
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
 * The one decision "is this request proxied, and on which route", after screening it once
 * (recorded on `screening`, its exchange). Undefined leaves it to Koa.
 */
export type RouteRequest<Match> = (req: IncomingMessage, screening: Screening) => Routed<Match> | undefined;

export interface RouteRequestDeps<Match> {
  /** False while no route is configured (a reload may add some): nothing is proxied. */
  hasRoutes(): boolean;
  /** The configured route of a normalised target (proxy/routes.ts). */
  match(url: string): Match | undefined;
  /** True for a path the gateway answers itself under some method. */
  isOwnPath(path: string): boolean;
}

export function createRouteRequest<Match>({ hasRoutes, match, isOwnPath }: RouteRequestDeps<Match>): RouteRequest<Match> {
  return function routeRequest(req, screening) {
    const url = screenOnce(req, screening);
    // A refusal is Koa's to answer (screenRequests throws it).
    if (url === undefined || !hasRoutes()) return undefined;
    // The route first: most of the gateway's own requests match none, and skip the router.
    const matched = match(url);
    if (matched === undefined) return undefined;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (isOwnPath(path)) return undefined;
    return { match: matched, path };
  };
}

/** A WebSocket opening handshake (RFC 6455 §4.1): anything else with an Upgrade header is an ordinary request. */
export function isWebSocketHandshake(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return upgrade !== undefined && /^websocket$/i.test(upgrade);
}
