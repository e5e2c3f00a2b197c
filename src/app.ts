/**
 * The request listener: which path a request takes through the gateway, and in what order.
 *
 * A request for a configured route (proxy/) takes the proxied-route path, plain functions
 * without Koa, since it is the gateway's hot path and Koa's context and middleware chain were
 * a measurable share of its cost (bench/README.md):
 *
 *   request id → proxy (route's auth, then the backend) → error answer if it failed → access log
 *
 * Everything else is Koa's, which serves the gateway's own routes:
 *
 *   request id → access log → error boundary → ambiguous requests refused → path normalised
 *     → the gateway's own routes → 404/405
 *
 * (The access log sits outside the boundary so it sees every final status; the boundary sits
 * outside everything that can throw, so every answer, errors included, is the envelope.)
 *
 * A request is proxied only when its head passes the same checks (request-head.ts), its path
 * normalises (normalise-path.ts), and that path is not one the gateway answers itself under
 * any method; anything irregular goes to Koa, whose middleware refuses it in the envelope.
 * Both paths write the same error answers (errors/boundary.ts) and access-log lines.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import Koa from 'koa';
import type Router from '@koa/router';
import { errorAnswer, errorBoundary, reportFailure, toGatewayError } from './errors/boundary.js';
import { createAccessLog, finalStatus, logAccess, type AccessLog } from './http/middleware/access-log.js';
import { assignRequestId, requestIdOf } from './http/middleware/request-id.js';
import { normalisePath, normaliseUrl } from './http/middleware/normalise-path.js';
import { checkRequestHead, refuseAmbiguousRequests } from './http/middleware/request-head.js';
import { answerResponse } from './http/raw-response.js';
import { answerUnmatched, createRouter } from './http/router.js';
import type { RouteMatch } from './proxy/routes.js';
import type { Seen } from './proxy/proxy.js';
import type { Services } from './services.js';

export function createRequestListener(services: Services): RequestListener {
  const router = createRouter(services);
  const accessLog = createAccessLog(services.log);
  const koa = createApp(services, router, accessLog).callback();
  const proxied = createProxiedPath(services, router, accessLog);
  return (req, res) => {
    if (!proxied(req, res)) void koa(req, res);
  };
}

function createApp(services: Services, router: Router, accessLog: AccessLog): Koa {
  const app = new Koa();
  app.use(assignRequestId());
  app.use(logAccess(accessLog));
  app.use(errorBoundary({ log: services.log }));
  app.use(refuseAmbiguousRequests());
  app.use(normalisePath());
  app.use(router.routes());
  app.use(answerUnmatched());

  // Reached only for failures after the response started (the boundary answers the rest).
  app.on('error', (err: Error) => services.log.warn({ err: { name: err.name, message: err.message } }, 'response failed after it started'));
  return app;
}

/** Serves a request on a configured route and returns true; false leaves it to Koa. */
function createProxiedPath({ proxy, log }: Services, router: Router, accessLog: AccessLog) {
  /** A path the router knows under some method: the gateway's own, never proxied. */
  const isOwnPath = (path: string) => router.match(path, 'GET').path.some((layer) => layer.methods.length > 0);

  /** The route of a request and its normalised path, when it is proxied at all. */
  function routeOf(req: IncomingMessage): { match: RouteMatch; path: string } | undefined {
    let url: string;
    try {
      checkRequestHead(req);
      url = normaliseUrl(req.url ?? '');
    } catch {
      return undefined;
    }
    // The route first: most of the gateway's own requests match none, and skip the router.
    const match = proxy.match(url);
    if (match === undefined) return undefined;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (isOwnPath(path)) return undefined;
    req.url = url;
    return { match, path };
  }

  /** `path`: the normalised one, the one served (Koa's lines show the path as sent). */
  async function serve(req: IncomingMessage, res: ServerResponse, match: RouteMatch, path: string, started: number): Promise<void> {
    const requestId = requestIdOf(req);
    res.setHeader('X-Request-Id', requestId);
    const seen: Seen = {};
    let planned = 200;
    try {
      await proxy.serve(req, res, match, requestId, seen);
    } catch (thrown) {
      const error = toGatewayError(thrown);
      reportFailure(log, error, requestId);
      planned = error.status;
      // Too late for an envelope: the only honest signal left is to cut the connection.
      if (res.headersSent || !res.writable) req.socket.destroy();
      else answerResponse(res, errorAnswer(error, requestId, req.complete), requestId);
    } finally {
      accessLog({
        requestId, method: req.method, path, status: finalStatus(req, res, planned),
        route: match.route.name, started, accountId: seen.identity?.accountId,
      });
    }
  }

  // Without routes, nothing is proxied: the gateway's own requests skip the checks above.
  if (!proxy.hasRoutes) return () => false;
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    const started = performance.now();
    const routed = routeOf(req);
    if (routed === undefined) return false;
    void serve(req, res, routed.match, routed.path, started);
    return true;
  };
}
