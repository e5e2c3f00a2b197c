/**
 * The configured routes: the steps assembled. The way through, for one request or WebSocket
 * handshake (which of them is proxied, and on which route, the request edge decides:
 * http/edge.ts):
 *
 *   admission (admission.ts: bearer check unless public, scope, quota) → headers and target
 *   (forward.ts, flight.ts) → node:http for a request, http-proxy-3 for a handshake (flight.ts)
 *   → the answer relayed (forward.ts) or the socket switched (websocket.ts); a failure before
 *   the backend's answer → 502/504 (flight.ts)
 *
 * Nothing reaches a backend before admission. Failures before the response head become the
 * envelope; after the head has gone out the only honest signal is to cut the connection. A
 * client that goes away releases the backend request (forward.ts destroys it when the response
 * closes unfinished, as http-proxy-3 does for a handshake).
 *
 * A reload replaces the route table whole (replaceRoutes): a request matched before it keeps
 * its RouteMatch, so it finishes on the route, targets and settings it started with.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { readBearerToken, type Identity } from '../auth/bearer.js';
import type { RouteConfig } from '../config/schema.js';
import { MethodNotAllowed, NotFound, SERVED_METHODS } from '../errors/errors.js';
import type { Exchange } from '../http/exchange.js';
import type { Upstream } from '../telemetry/upstream.js';
import { createAdmission } from './admission.js';
import { createDecide, type Decide } from './decision.js';
import { createFlights } from './flight.js';
import { createForward, createHeadersFor } from './forward.js';
import { createHeaderPolicy } from './headers.js';
import { RouteTable, type RouteMatch } from './routes.js';
import { Agents } from './targets.js';
import type { Admitted, ProxyDeps } from './types.js';
import { createWebSockets } from './websocket.js';

export interface Proxy {
  /** False while no route is configured: nothing is proxied. */
  readonly hasRoutes: boolean;
  /** Puts a reloaded route table in place for the requests that arrive from now on. */
  replaceRoutes(routes: readonly RouteConfig[]): void;
  /** The configured route for a normalised request target, if any (http/edge.ts decides whether it is proxied). */
  match(url: string): RouteMatch | undefined;
  /**
   * Admits and proxies one request on `match`, then calls `done` once: with what was thrown
   * (the GatewayError to answer) when it failed before the backend's answer started, otherwise
   * with undefined once the exchange is over (answered, cut, or the client gone); `identity`,
   * who was let through, for the log; `upstream`, the backend side (its last attempt) when a
   * backend was tried, for metrics and tracing.
   */
  serve(req: IncomingMessage, res: ServerResponse, match: RouteMatch, requestId: string, done: (thrown: unknown, identity: Identity | undefined, upstream: Upstream | undefined) => void): void;
  /**
   * For the HTTP server's 'upgrade' event, once the edge routed the handshake to `match` (a
   * WebSocket route). Answers on the socket, and ends `exchange` (the handshake's) with that answer.
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, match: RouteMatch, exchange: Exchange): void;
  /**
   * A forward-auth decision (decision.ts) on the route table in force: the admission a proxied
   * request on the original request's route passes, its identity headers, or the refusal thrown.
   */
  decide: Decide;
  /** Open WebSockets, for tests and metrics. */
  readonly openWebSockets: () => number;
  /**
   * Closes every open WebSocket with a close frame (1001), and any switched later, since they
   * never finish by themselves; resolves once those open now are closed (websocket.ts).
   */
  closeWebSockets(): Promise<void>;
  /** Cuts the WebSockets still open (the shutdown deadline). */
  cutWebSockets(): void;
  close(): void;
}

export function createProxy(deps: ProxyDeps): Proxy {
  const { config } = deps;
  const agents = new Agents(config.proxy.maxSocketsPerTarget);
  let routes = new RouteTable(config.routes, agents);
  const policy = createHeaderPolicy(config.proxy, deps.isTrustedProxy, deps.tracing);
  const admit = createAdmission(deps);
  const flights = createFlights(deps);
  const headersFor = createHeadersFor(policy);
  const forward = createForward(policy, headersFor, flights, deps.cors);
  const webSockets = createWebSockets({ ...deps, admit, headersFor, flights });

  /**
   * Refusals come as a rejection, never synchronously: answered within the request event,
   * before Node's parser has seen the request end, they would say Connection: close.
   */
  function admitRequest(req: IncomingMessage, match: RouteMatch, requestId: string): Promise<Admitted> {
    try {
      // TRACE echoes the request back, headers and all: with the identity headers the gateway
      // adds (and Authorization, where forwarded) that is a gift to cross-site tracing.
      if (req.method === 'TRACE') throw new MethodNotAllowed(SERVED_METHODS);
      // A decision-only route (no targets) is asked through /api/forward-auth and never proxied:
      // refused before admission, so nothing is counted for it either.
      if (match.route.pool.targets.length === 0) throw new NotFound();
      return admit(match.route, req, readBearerToken(req), requestId);
    } catch (thrown) {
      return Promise.reject(thrown);
    }
  }

  return {
    get hasRoutes() {
      return routes.routes.length > 0;
    },
    replaceRoutes(next) {
      routes = new RouteTable(next, agents, routes);
    },
    match: (url) => routes.match(url),
    decide: createDecide(admit, (url) => routes.match(url), () => config.proxy.identityHeaders),
    serve(req, res, match, requestId, done) {
      admitRequest(req, match, requestId).then((admitted) => {
        const { identity, limitHeaders } = admitted;
        // The client left while it was admitted (a key set or an introspection awaited, say):
        // its answer's 'close' has come and gone, so nothing would end the exchange, and the
        // backend would be asked for nobody. Over now (the exchange says 499).
        if (req.socket.destroyed || res.destroyed) return done(undefined, identity, undefined);
        try {
          if (limitHeaders !== undefined) for (const name in limitHeaders) res.setHeader(name, limitHeaders[name]!);
          forward(req, res, match, admitted, requestId, (error, upstream) => done(error, identity, upstream));
        } catch (thrown) {
          done(thrown, identity, undefined);
        }
      }, (thrown: unknown) => done(thrown, undefined, undefined));
    },
    upgrade: webSockets.upgrade,
    openWebSockets: webSockets.open,
    closeWebSockets: webSockets.closeAll,
    cutWebSockets: webSockets.cutAll,
    close() {
      webSockets.cutAll();
      agents.destroy();
    },
  };
}
