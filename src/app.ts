/**
 * The gateway's listeners: which path a request takes through the gateway, and in what order.
 * Every request gets one exchange (http/exchange.ts) at the listener, as it arrives: its id, and
 * the one access line, request metric and span, written when it ends, whichever way it took.
 * The edge (http/edge.ts) then screens it once and decides, for requests and WebSocket
 * handshakes alike, whether it is proxied and on which route.
 *
 * A request for a configured route (proxy/) takes the proxied-route path, plain functions
 * without Koa, since it is the gateway's hot path and Koa's context and middleware chain were
 * a measurable share of its cost (bench/README.md):
 *
 *   exchange → edge checks and route → proxy (route's auth, then the backend)
 *     → error answer if it failed → exchange ended
 *
 * A WebSocket handshake routed to a WebSocket route is upgraded (proxy/websocket.ts) and
 * answered on its socket, its exchange ended with the 101 or the refusal. Everything else is
 * Koa's, which serves the gateway's own routes:
 *
 *   exchange (joined, ended) → error boundary → the screening's refusal thrown
 *     → the gateway's own routes → 404/405
 *
 * (The exchange sits outside the boundary so it sees every final status; the boundary sits
 * outside everything that can throw, so every answer, errors included, is the envelope.)
 * Requests Node refuses before any listener (server.ts) open and end an exchange there.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import Koa from 'koa';
import type Router from '@koa/router';
import { isTlsOn } from './config/schema.js';
import { dashboardHeaders } from './dashboard/serve.js';
import { errorBoundary } from './errors/boundary.js';
import { ok } from './errors/envelope.js';
import { NotFound } from './errors/errors.js';
import { corsAnswers, corsPreflights, PROXIED_METHODS, type Cors } from './http/cors.js';
import { createRouteRequest, isWebSocketHandshake, screenRequests, type Routed, type Screening } from './http/edge.js';
import { createExchanges, joinExchange, type Exchange, type Exchanges } from './http/exchange.js';
import { createAccessLog, finalStatus } from './http/middleware/access-log.js';
import { assignRequestId } from './http/middleware/request-id.js';
import type { StreamListener } from './http/http2-streams.js';
import { OWNER_TREE } from './http/owner/register.js';
import { failResponse, failSocket } from './http/raw-response.js';
import { createForwardAuthDecision, FORWARD_AUTH_PATH, isForwardAuthTarget } from './http/routes/forward-auth.js';
import { answerUnmatched, createManagementRouter, createRouter } from './http/router.js';
import type { RouteMatch } from './proxy/routes.js';
import type { Services } from './services.js';

export interface Listeners {
  /** The HTTP server's request listener. */
  request: RequestListener;
  /**
   * For HTTP/2 servers, ahead of the request listener (http/http2-streams.ts serveStreams): serves a
   * bodiless stream the edge routes to a configured route on the stream itself; declines (false)
   * every other, which then reaches `request` through Node's compatibility API.
   */
  stream: StreamListener;
  /** For the HTTP server's shouldUpgradeCallback: true for a handshake the edge routes to a WebSocket route. */
  shouldUpgrade(req: IncomingMessage): boolean;
  /** For the HTTP server's 'upgrade' event (only after shouldUpgrade said true). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** For requests the HTTP server refuses before any listener sees them (server.ts). */
  exchanges: Exchanges;
}

/** A handshake shouldUpgrade routed to a WebSocket route, for the 'upgrade' event of the same request. */
interface Handshake {
  exchange: Exchange;
  routed: Routed<RouteMatch>;
}

/**
 * The HSTS header of every answer on the main listener, own or proxied, with TLS on
 * (docs/tls.md); a backend's own Strict-Transport-Security replaces it on its answers.
 */
function strictTransportSecurity(config: Services['config']): string | undefined {
  const { tls } = config;
  if (!isTlsOn(config) || tls.hstsMaxAgeSeconds === 0) return undefined;
  return `max-age=${tls.hstsMaxAgeSeconds}${tls.hstsIncludeSubDomains ? '; includeSubDomains' : ''}`;
}

export function createListeners(services: Services): Listeners {
  const { proxy, log } = services;
  // The own-path check is built from the router, which asks it at request time only.
  const router = createRouter(services, (path) => isOwnPath(path));
  const isOwnPath = createOwnPathCheck(router, services.config.dashboard.enabled ? [OWNER_TREE, FORWARD_AUTH_PATH, services.config.dashboard.path] : [OWNER_TREE, FORWARD_AUTH_PATH]);
  const exchanges = createExchanges(createAccessLog(log, services.config.metrics.enabled ? services.metrics : undefined), services.tracing, services.usage?.answered);
  // The exchanges of requests left to Koa, which finds them by their request.
  const own = new WeakMap<IncomingMessage, Exchange>();
  const ownExchange = (req: IncomingMessage): Exchange => {
    let exchange = own.get(req);
    if (exchange === undefined) own.set(req, exchange = exchanges.open(req));
    return exchange;
  };
  const koa = createApp(services, router, ownExchange).callback();
  const routeRequest = createRouteRequest({
    // Asked per request: a reload may add the first route, or take the last away.
    hasRoutes: () => proxy.hasRoutes,
    match: proxy.match,
    // A path the router knows under some method: the gateway's own. Read as the route table
    // reads paths (without case, without `;` parameters; proxy/routes.ts), since backends do:
    // /HEALTHZ or /api;x/roles must not reach a catch-all that takes them for the gateway's.
    isOwnPath,
  });
  const serveProxied = createProxiedPath(services, services.cors);
  const serveDecision = createDecisionPath(services, isOwnPath);
  // Exchanges opened (and screened) by shouldUpgrade: to upgrade, or, declined, for the 'request' event.
  const handshakes = new WeakMap<IncomingMessage, Handshake>();
  const declined = new WeakMap<IncomingMessage, Exchange>();

  const hsts = strictTransportSecurity(services.config);

  return {
    request: (req, res) => {
      if (hsts !== undefined) res.setHeader('Strict-Transport-Security', hsts);
      const exchange = (req.headers.upgrade !== undefined ? declined.get(req) : undefined) ?? exchanges.open(req);
      const routed = routeRequest(req, exchange);
      if (routed !== undefined) return serveProxied(req, res, routed, exchange);
      if (exchange.url !== undefined && isForwardAuthTarget(exchange.url)) return serveDecision(req, res, exchange);
      own.set(req, exchange);
      void koa(req, res);
    },
    stream: (stream) => {
      // Routed on a screening of its own, so that a declined stream reaches `request` as it
      // came (req.url is the StreamRequest's, not the stream's): screened there again, as any
      // request for the gateway's own paths.
      const req = stream.asIncoming;
      const screening: Screening = { url: undefined, refusal: undefined };
      const routed = routeRequest(req, screening);
      if (routed === undefined) return false;
      const res = stream.answer().asServerResponse;
      if (hsts !== undefined) res.setHeader('Strict-Transport-Security', hsts);
      const exchange = exchanges.open(req);
      exchange.url = screening.url;
      serveProxied(req, res, routed, exchange);
      return true;
    },
    shouldUpgrade(req) {
      if (!isWebSocketHandshake(req) || !proxy.hasRoutes) return false;
      const exchange = exchanges.open(req);
      const routed = routeRequest(req, exchange);
      if (routed?.match.route.websocket !== true) {
        declined.set(req, exchange);
        return false;
      }
      handshakes.set(req, { exchange, routed });
      return true;
    },
    upgrade(req, socket, head) {
      const handshake = handshakes.get(req);
      // Not reachable while Node upgrades only what shouldUpgrade chose; never proxied unrouted.
      if (handshake === undefined) {
        const exchange = exchanges.open(req);
        exchange.end(failSocket(log, socket, new NotFound(), exchange.requestId).status);
        return;
      }
      const { exchange, routed: { match, path } } = handshake;
      exchange.routeTo(match.route.name, match.route.prefix, path);
      exchange.websocket = true;
      proxy.upgrade(req, socket, head, match, exchange);
    },
    exchanges,
  };
}

/**
 * The management listener's (server.ts, when `management.port` is set): /healthz, /readyz and
 * /metrics only, behind the same request id, error boundary and request screening; no exchange:
 * not logged per request (a scraper and a load balancer call it every few seconds), not counted
 * in the request metrics, not traced.
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

function createApp(services: Services, router: Router, exchangeOf: (req: IncomingMessage) => Exchange): Koa {
  const { cors } = services;
  const app = new Koa();
  app.use(joinExchange(exchangeOf));
  // Outside the boundary, so that error answers get the CORS headers too (http/cors.ts).
  if (cors !== undefined) app.use(corsAnswers(cors, OWNER_TREE));
  // Outside the boundary likewise: the dashboard's error answers carry its security headers.
  if (services.config.dashboard.enabled) app.use(dashboardHeaders(services.config.dashboard));
  app.use(errorBoundary({ log: services.log }));
  // The listener screened the request (http/edge.ts); a refusal is thrown here, inside the boundary.
  app.use(screenRequests(exchangeOf));
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
 * Serves a forward-auth decision (http/routes/forward-auth.ts) and ends its exchange, outside Koa
 * as proxied requests are: the decision is on the hot path of every request the proxy in front
 * forwards. The answer is the route's admission's (proxy/decision.ts): 200 with the identity
 * headers, or the refusal's envelope; counted under the route's name once one matched.
 */
function createDecisionPath({ proxy, log, isTrustedProxy }: Services, isOwnPath: (path: string) => boolean) {
  const decide = createForwardAuthDecision({ decide: proxy.decide, isTrustedProxy, isOwnPath });
  return function serveDecision(req: IncomingMessage, res: ServerResponse, exchange: Exchange): void {
    const { requestId } = exchange;
    res.setHeader('X-Request-Id', requestId);
    exchange.path = exchange.template = FORWARD_AUTH_PATH;
    const end = (planned: number) => exchange.end(finalStatus(req, res, planned));
    // Counted as the request decided on: under its route and its method, as if proxied.
    decide(req, requestId, (name, method) => { exchange.route = name; exchange.method = method; }).then((decision) => {
      exchange.accountId = decision.identity?.accountId;
      const body = JSON.stringify(ok({ route: decision.route }));
      res.writeHead(200, { ...decision.headers, 'cache-control': 'no-store', 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      end(200);
    }).catch((thrown: unknown) => end(failResponse(log, req, res, thrown, requestId).status));
  };
}

/**
 * Serves a request the edge routed to a configured route, and ends its exchange. With CORS on,
 * the same path behind a preflight answer and the CORS headers (http/cors.ts); off, exactly the
 * path without them.
 */
function createProxiedPath({ proxy, log }: Services, cors: Cors | undefined) {
  const serveProxied = function serveProxied(req: IncomingMessage, res: ServerResponse, { match, path }: Routed<RouteMatch>, exchange: Exchange): void {
    const { requestId } = exchange;
    res.setHeader('X-Request-Id', requestId);
    exchange.routeTo(match.route.name, match.route.prefix, path);
    proxy.serve(req, res, match, requestId, (thrown, identity, upstream) => {
      let planned = 200;
      try {
        if (thrown !== undefined) planned = failResponse(log, req, res, thrown, requestId).status;
      } finally {
        exchange.accountId = identity?.accountId;
        exchange.upstream = upstream;
        exchange.end(finalStatus(req, res, planned));
      }
    });
  };
  if (cors === undefined) return serveProxied;

  return function serveProxiedWithCors(req: IncomingMessage, res: ServerResponse, routed: Routed<RouteMatch>, exchange: Exchange): void {
    if (!cors.isPreflight(req)) {
      cors.decorate(res, cors.allowedOrigin(req));
      serveProxied(req, res, routed, exchange);
      return;
    }
    // A preflight is the gateway's to answer: no admission, no backend.
    const { requestId } = exchange;
    res.setHeader('X-Request-Id', requestId);
    const { route } = routed.match;
    exchange.routeTo(route.name, route.prefix, routed.path);
    let planned = 204;
    try {
      res.writeHead(204, cors.preflight(req, PROXIED_METHODS)).end();
    } catch (thrown) {
      planned = failResponse(log, req, res, thrown, requestId).status;
    } finally {
      exchange.end(finalStatus(req, res, planned));
    }
  };
}
