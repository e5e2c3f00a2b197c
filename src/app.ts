/**
 * The gateway's listeners: which path a request takes through the gateway, and in what order.
 * The edge (http/edge.ts) decides, once for requests and WebSocket handshakes alike, whether a
 * request is proxied and on which route.
 *
 * A request for a configured route (proxy/) takes the proxied-route path, plain functions
 * without Koa, since it is the gateway's hot path and Koa's context and middleware chain were
 * a measurable share of its cost (bench/README.md):
 *
 *   edge checks and route → request id → proxy (route's auth, then the backend)
 *     → error answer if it failed → access log
 *
 * A WebSocket handshake routed to a WebSocket route is upgraded (proxy/websocket.ts) and
 * answered on its socket. Everything else is Koa's, which serves the gateway's own routes:
 *
 *   request id → access log → error boundary → request screened (head checked, path
 *     normalised) → the gateway's own routes → 404/405
 *
 * (The access log sits outside the boundary so it sees every final status; the boundary sits
 * outside everything that can throw, so every answer, errors included, is the envelope.)
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import Koa from 'koa';
import type Router from '@koa/router';
import { dashboardHeaders } from './dashboard/serve.js';
import { errorBoundary } from './errors/boundary.js';
import { NotFound } from './errors/errors.js';
import { corsAnswers, corsPreflights, PROXIED_METHODS, type Cors } from './http/cors.js';
import { createRouteRequest, isWebSocketHandshake, screenRequests, type Routed } from './http/edge.js';
import { createAccessLog, finalStatus, logAccess, shortPath, type AccessLog } from './http/middleware/access-log.js';
import { assignRequestId, requestIdOf } from './http/middleware/request-id.js';
import { traceRequests } from './http/middleware/trace.js';
import { OWNER_TREE } from './http/owner/register.js';
import { failResponse, failSocket } from './http/raw-response.js';
import { answerUnmatched, createManagementRouter, createRouter } from './http/router.js';
import type { RouteMatch } from './proxy/routes.js';
import type { Services } from './services.js';

export interface Listeners {
  /** The HTTP server's request listener. */
  request: RequestListener;
  /** For the HTTP server's shouldUpgradeCallback: true for a handshake the edge routes to a WebSocket route. */
  shouldUpgrade(req: IncomingMessage): boolean;
  /** For the HTTP server's 'upgrade' event (only after shouldUpgrade said true). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export function createListeners(services: Services): Listeners {
  const { proxy, log } = services;
  const router = createRouter(services);
  const accessLog = createAccessLog(log, services.config.metrics.enabled ? services.metrics : undefined);
  const { cors } = services;
  const koa = createApp(services, router, accessLog, cors).callback();
  const routeRequest = createRouteRequest({
    // Asked per request: a reload may add the first route, or take the last away.
    hasRoutes: () => proxy.hasRoutes,
    match: proxy.match,
    // A path the router knows under some method: the gateway's own. Read as the route table
    // reads paths (without case, without `;` parameters; proxy/routes.ts), since backends do:
    // /HEALTHZ or /api;x/roles must not reach a catch-all that takes them for the gateway's.
    isOwnPath: createOwnPathCheck(router, services.config.dashboard.enabled ? [OWNER_TREE, services.config.dashboard.path] : [OWNER_TREE]),
  });
  const serveProxied = createProxiedPath(services, accessLog, cors);
  // The route shouldUpgrade found, for the 'upgrade' event of the same request.
  const handshakes = new WeakMap<IncomingMessage, Routed<RouteMatch>>();

  return {
    request: (req, res) => {
      // Without routes, nothing is proxied: the gateway's own requests go straight to Koa.
      if (!proxy.hasRoutes) return void koa(req, res);
      const started = performance.now();
      const routed = routeRequest(req);
      if (routed === undefined) void koa(req, res);
      else serveProxied(req, res, routed, started);
    },
    shouldUpgrade(req) {
      if (!isWebSocketHandshake(req)) return false;
      const routed = routeRequest(req);
      if (routed?.match.route.websocket !== true) return false;
      handshakes.set(req, routed);
      return true;
    },
    upgrade(req, socket, head) {
      const routed = handshakes.get(req);
      // Not reachable while Node upgrades only what shouldUpgrade chose; never proxied unrouted.
      if (routed === undefined) failSocket(log, socket, new NotFound(), requestIdOf(req));
      else proxy.upgrade(req, socket, head, routed.match, routed.path);
    },
  };
}

/**
 * The management listener's (server.ts, when `management.port` is set): /healthz, /readyz and
 * /metrics only, behind the same request id, error boundary and request screening; not logged per request (a
 * scraper and a load balancer call it every few seconds) nor counted in the request metrics.
 */
export function createManagementListener(services: Services): RequestListener {
  const app = new Koa();
  const router = createManagementRouter(services);
  app.use(assignRequestId());
  app.use(errorBoundary({ log: services.log }));
  // The edge's head and path checks, as on the main port: a target that is not origin-form
  // (`http://evil/metrics`) or a malformed head is refused here too.
  app.use(screenRequests());
  app.use(router.routes());
  app.use(answerUnmatched());
  return app.callback();
}

/**
 * Whether a path is the gateway's own, asked of every proxied request: while every own route is
 * a plain path (no parameters) or lies in one of the trees that are the gateway's whole (the
 * owner API and the dashboard: their catch-alls answer every path under them), one prefix test
 * per tree and one set lookup; otherwise the router itself decides.
 */
function createOwnPathCheck(router: Router, trees: readonly string[]): (path: string) => boolean {
  const layers = router.stack.filter((layer) => layer.methods.length > 0);
  const isPlain = (path: unknown) => typeof path === 'string' && /^[a-z0-9/._-]+$/.test(path);
  const inTree = (path: unknown) => typeof path === 'string' && trees.some((tree) => path === tree || path.startsWith(`${tree}/`));
  if (layers.every((layer) => isPlain(layer.path) || inTree(layer.path))) {
    const own = new Set(layers.filter((layer) => isPlain(layer.path)).map((layer) => layer.path as string));
    const served = trees.filter((tree) => layers.some((layer) => inTree(layer.path) && (layer.path === tree || (layer.path as string).startsWith(`${tree}/`))));
    return (path) => {
      const key = ownPathKey(path);
      if (served.some((tree) => key === tree || key.startsWith(`${tree}/`))) return true;
      // The router takes one trailing slash as the same path (normalising leaves at most one).
      return own.has(key.length > 1 && key.endsWith('/') ? key.slice(0, -1) : key);
    };
  }
  return (path) => router.match(ownPathKey(path), 'GET').path.some((layer) => layer.methods.length > 0);
}

/** A normalised path as a backend may read it; the own routes are all lower case. */
function ownPathKey(path: string): string {
  return (path.includes(';') ? path.replace(/;[^/]*/g, '') : path).toLowerCase();
}

function createApp(services: Services, router: Router, accessLog: AccessLog, cors: Cors | undefined): Koa {
  const app = new Koa();
  app.use(assignRequestId());
  app.use(logAccess(accessLog));
  // Beside the access log, so the span too ends with the final status.
  if (services.tracing !== undefined) app.use(traceRequests(services.tracing));
  // Outside the boundary, so that error answers get the CORS headers too (http/cors.ts).
  if (cors !== undefined) app.use(corsAnswers(cors, OWNER_TREE));
  // Outside the boundary likewise: the dashboard's error answers carry its security headers.
  if (services.config.dashboard.enabled) app.use(dashboardHeaders(services.config.dashboard));
  app.use(errorBoundary({ log: services.log }));
  app.use(screenRequests());
  if (cors !== undefined) app.use(corsPreflights(cors, OWNER_TREE, createMethodsOf(router)));
  app.use(router.routes());
  app.use(answerUnmatched());

  // Reached only for failures after the response started (the boundary answers the rest).
  app.on('error', (err: Error) => services.log.warn({ err: { name: err.name, message: err.message } }, 'response failed after it started'));
  return app;
}

/** The methods the router serves on a path (for a preflight's answer), or undefined when it serves none. */
function createMethodsOf(router: Router): (path: string) => string | undefined {
  return (path) => {
    const methods = new Set(router.match(path, 'OPTIONS').path.flatMap((layer) => layer.methods));
    methods.delete('OPTIONS');
    return methods.size === 0 ? undefined : [...methods].join(', ');
  };
}

/**
 * Serves a request the edge routed to a configured route. With CORS on, the same path behind
 * a preflight answer and the CORS headers (http/cors.ts); off, exactly the path without them.
 */
function createProxiedPath({ proxy, log, tracing }: Services, accessLog: AccessLog, cors: Cors | undefined) {
  const serveProxied = function serveProxied(req: IncomingMessage, res: ServerResponse, { match, path }: Routed<RouteMatch>, started: number): void {
    const requestId = requestIdOf(req);
    res.setHeader('X-Request-Id', requestId);
    // Before the proxy builds the backend's headers, which name this span as the parent.
    const span = tracing?.start(req);
    proxy.serve(req, res, match, requestId, (thrown, identity, upstream) => {
      let planned = 200;
      try {
        if (thrown !== undefined) planned = failResponse(log, req, res, thrown, requestId).status;
      } finally {
        const status = finalStatus(req, res, planned);
        const { route } = match;
        accessLog({ requestId, method: req.method, path, status, route: route.name, started, accountId: identity?.accountId, upstream });
        span?.end({ status, requestId, path: shortPath(path), template: route.prefix, route: route.name, upstream });
      }
    });
  };
  if (cors === undefined) return serveProxied;

  return function serveProxiedWithCors(req: IncomingMessage, res: ServerResponse, routed: Routed<RouteMatch>, started: number): void {
    if (!cors.isPreflight(req)) {
      cors.decorate(res, cors.allowedOrigin(req));
      serveProxied(req, res, routed, started);
      return;
    }
    // A preflight is the gateway's to answer: no admission, no backend.
    const requestId = requestIdOf(req);
    res.setHeader('X-Request-Id', requestId);
    const span = tracing?.start(req);
    let planned = 204;
    try {
      res.writeHead(204, cors.preflight(req, PROXIED_METHODS)).end();
    } catch (thrown) {
      planned = failResponse(log, req, res, thrown, requestId).status;
    } finally {
      const status = finalStatus(req, res, planned);
      const { route } = routed.match;
      accessLog({ requestId, method: req.method, path: routed.path, status, route: route.name, started, accountId: undefined });
      span?.end({ status, requestId, path: shortPath(routed.path), template: route.prefix, route: route.name });
    }
  };
}
