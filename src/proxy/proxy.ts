/**
 * The configured routes, proxied with http-proxy-3. The way through, for one request:
 *
 *   route match (normalised path) → bearer check (unless public) → scope → target (round-robin,
 *   healthy) → header policy → http-proxy-3 → response head filtered, body streamed
 *
 * Nothing reaches a backend before the token is verified. Bodies stream both ways with
 * backpressure (pipes, never buffers). Failures before the response head become the envelope:
 * 502 when the backend refused, reset or broke the exchange, 504 when it stayed silent past
 * the route's timeout; after the head has gone out the only honest signal is to cut the
 * connection. A client that goes away releases the backend request (http-proxy-3 destroys it
 * when the response closes unfinished).
 *
 * The response is written here (`selfHandleResponse`), not by http-proxy-3's outgoing passes,
 * which would copy hop-by-hop headers and add their own `Connection`.
 */
import type { ClientRequest, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ProxyServer, type ServerOptions } from 'http-proxy-3';
import { readBearerToken, type Authenticate, type Identity } from '../auth/bearer.js';
import type { Revocations } from '../auth/revocation.js';
import type { Signer } from '../auth/signer.js';
import type { Config } from '../config/schema.js';
import type { LimitHeaders, RateLimits } from '../limits/rate-limits.js';
import { BadGateway, GatewayTimeout, InsufficientScope, MethodNotAllowed, type GatewayError } from '../errors/errors.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import { createHeaderPolicy } from './headers.js';
import { RouteTable, type Route, type RouteMatch } from './routes.js';
import { Agents, type Target } from './targets.js';
import { createWebSockets, type WebSockets } from './websocket.js';

/** One attempt at one backend, handed to our http-proxy-3 hooks through its options. */
export interface Flight {
  route: Route;
  target: Target;
  headers: OutgoingHttpHeaders;
  /** The backend's response head arrived (or, for a WebSocket, its 101). */
  responded: boolean;
  /** The route's response timeout fired before that. */
  timedOut: boolean;
  /** Called with the backend's response head (for a WebSocket: an answer other than 101). */
  onResponse?: (proxyRes: IncomingMessage) => void;
  /** Called once the backend switched protocols, before its 101 is relayed (WebSocket only). */
  onUpgrade?: (proxyRes: IncomingMessage) => void;
}

type FlightOptions = ServerOptions & { flight: Flight };

/** Who a route let through (undefined on a public route), the assertion it sends, and its quota's headers. */
export interface Admitted {
  identity: Identity | undefined;
  assertion: string | undefined;
  limitHeaders: LimitHeaders;
}

export type Admit = (route: Route, req: IncomingMessage, token: string | undefined, requestId: string) => Promise<Admitted>;
export type Failed = (flight: Flight, err: Error, requestId: string) => GatewayError;
/** `webSocketProtocol`: given (a list, or null for none) only for a WebSocket handshake. */
export type HeadersFor = (req: IncomingMessage, route: Route, admitted: Admitted, requestId: string, webSocketProtocol?: string | null) => OutgoingHttpHeaders;

/** Who was let through, for the access log (set as soon as the token is verified). */
export interface Seen {
  identity?: Identity | undefined;
}

export interface Proxy {
  /** False when no route is configured: nothing is ever proxied. */
  readonly hasRoutes: boolean;
  /** The configured route for a normalised request target, if any. */
  match(url: string): RouteMatch | undefined;
  /**
   * Authenticates and proxies one request on `match`. Rejects with the GatewayError to answer
   * when it fails before the backend's answer started; resolves once the exchange is over
   * (answered, cut, or the client gone).
   */
  serve(req: IncomingMessage, res: ServerResponse, match: RouteMatch, requestId: string, seen: Seen): Promise<void>;
  /** For the HTTP server's shouldUpgradeCallback: true for a WebSocket handshake on a WebSocket route. */
  wantsUpgrade(req: IncomingMessage): boolean;
  /** For the HTTP server's 'upgrade' event. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Open WebSockets, for tests and metrics. */
  readonly openWebSockets: () => number;
  /** Ends every open WebSocket: they never finish by themselves, so shutdown cannot wait for them. */
  closeWebSockets(): void;
  close(): void;
}

export interface ProxyDeps {
  config: Config;
  log: Logger;
  clock: Clock;
  signer: Signer;
  authenticate: Authenticate;
  revocations: Revocations;
  limits: RateLimits;
}

/** Codes of failures that happened before a byte reached the backend: safe to try another target. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ECONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN']);
const TIMEOUT_CODES = new Set(['ECONNECT_TIMEOUT', 'ERESPONSE_TIMEOUT']);

export function createProxy(deps: ProxyDeps): Proxy {
  const { config, log, clock, signer, authenticate, limits } = deps;
  const agents = new Agents(config.proxy.maxSocketsPerTarget);
  const routes = new RouteTable(config.routes, agents);
  const policy = createHeaderPolicy(config.proxy);
  // toProxy: the request target goes on as the gateway normalised it, byte for byte (without
  // it http-proxy-3 re-serialises it through WHATWG URL, which re-encodes `'` in queries and
  // so breaks signed URLs).
  const server = new ProxyServer({ xfwd: false, selfHandleResponse: true, prependPath: true, toProxy: true });

  // Our header policy, applied as the last step before http-proxy-3 sends the request: it
  // overrides whatever the earlier passes did to req.headers (deleteLength's CL.TE rewrite).
  const applyHeaders = (req: IncomingMessage, _res: unknown, options: unknown) => {
    req.headers = (options as FlightOptions).flight.headers as IncomingMessage['headers'];
  };
  server.before('web', 'stream', applyHeaders);
  server.before('ws', 'stream', applyHeaders);

  // Emitted once the backend request has a socket (never with an Expect header, which the
  // policy always removes).
  server.on('proxyReq', (proxyReq, _req, _res, options) => watch(proxyReq, (options as FlightOptions).flight));
  server.on('proxyReqWs', (proxyReq, _req, _socket, options) => {
    const flight = (options as FlightOptions).flight;
    watch(proxyReq, flight);
    // Registered before http-proxy-3's own listener, so the 101 it relays can still be edited.
    proxyReq.once('upgrade', (proxyRes) => {
      flight.responded = true;
      proxyReq.setTimeout(0);
      flight.onUpgrade?.(proxyRes);
    });
  });
  // http-proxy-3 also reports client-socket errors here; each request's own callback handles
  // the rest. Without a listener it would throw.
  server.on('error', (err) => log.debug({ err: { code: (err as NodeJS.ErrnoException).code, message: err.message } }, 'proxy socket error'));

  /** Silence from the backend: responseTimeoutMs until its answer's head, idleTimeoutMs after. */
  function watch(proxyReq: ClientRequest, flight: Flight): void {
    proxyReq.setTimeout(flight.route.responseTimeoutMs, () => {
      flight.timedOut = !flight.responded;
      proxyReq.destroy(Object.assign(new Error(flight.responded ? 'backend idle' : 'backend silent'), { code: 'ERESPONSE_TIMEOUT' }));
    });
    proxyReq.once('response', (proxyRes) => {
      flight.responded = true;
      proxyReq.setTimeout(flight.route.idleTimeoutMs);
      flight.onResponse?.(proxyRes);
    });
  }

  /**
   * The caller a route lets through, checked the same way for requests and WebSocket
   * handshakes: none on a public route; otherwise a valid token within the route's scope,
   * and the signed assertion if the route sends one. Then the route's quota for that caller
   * (or, on a public route, its address): only callers who passed are counted.
   */
  async function admit(route: Route, req: IncomingMessage, token: string | undefined, requestId: string): Promise<Admitted> {
    if (route.auth === 'public') return { identity: undefined, assertion: undefined, limitHeaders: await limits.route(route, undefined, req) };
    const identity = await authenticate(token);
    if (route.requiredScope !== undefined && !identity.scopes.includes(route.requiredScope)) throw new InsufficientScope(route.requiredScope);
    const limitHeaders = await limits.route(route, identity, req);
    const assertion = route.assertion ? await signer.issueAssertion({ ...identity, audience: route.name, requestId }) : undefined;
    return { identity, assertion, limitHeaders };
  }

  /** The headers the backend gets (the Host of a `target` route is set per attempt). */
  function headersFor(req: IncomingMessage, route: Route, { identity, assertion }: Admitted, requestId: string, webSocketProtocol?: string | null): OutgoingHttpHeaders {
    return policy.upstream(req, {
      identity: identity === undefined ? route.sends.anonymous : route.sends.caller,
      caller: identity,
      requestId,
      assertion,
      forwardAuthorization: route.forwardAuthorization,
      host: route.host === 'preserve' ? req.headers.host ?? '' : '',
      websocket: webSocketProtocol !== undefined,
      webSocketProtocol: webSocketProtocol ?? undefined,
    });
  }

  /** A backend failure before its answer: counted against the target, logged, and classified. */
  function failed(flight: Flight, err: Error, requestId: string): GatewayError {
    const code = codeOf(err);
    const ejected = flight.route.pool.failed(flight.target, clock.now());
    log.warn({ requestId, route: flight.route.name, target: flight.target.origin, code, ejected }, 'backend failed');
    return flight.timedOut || TIMEOUT_CODES.has(code) ? new GatewayTimeout(err) : new BadGateway(err);
  }

  const webSockets: WebSockets = createWebSockets({ ...deps, routes, server, admit, headersFor, failed });

  function forward(req: IncomingMessage, res: ServerResponse, match: RouteMatch, admitted: Admitted, requestId: string): Promise<void> {
    const { route } = match;
    const headers = headersFor(req, route, admitted, requestId);
    req.url = match.upstreamUrl;
    const bodiless = req.headers['transfer-encoding'] === undefined && (req.headers['content-length'] ?? '0') === '0';

    return new Promise<void>((resolve, reject) => {
      let attempts = 0;
      const attempt = (exclude?: Target) => {
        attempts++;
        const target = route.pool.pick(clock.now(), exclude);
        if (route.host === 'target') headers.host = target.url.host;
        const flight: Flight = {
          route, target, headers, responded: false, timedOut: false,
          onResponse(proxyRes) {
            route.pool.succeeded(target);
            // The backend answered before the whole body arrived (413 and close, say): the
            // rest of the upload has nowhere to go, so this connection ends with the answer.
            if (!req.complete) res.shouldKeepAlive = false;
            const head = policy.downstream(proxyRes.headers, proxyRes.rawHeaders);
            // The gateway's quota is the one the client meets first: its fields replace a backend's.
            if (admitted.limitHeaders !== undefined) {
              delete head['ratelimit'];
              delete head['ratelimit-policy'];
            }
            res.writeHead(proxyRes.statusCode ?? 502, head);
            // A backend that breaks off mid-body: the client sees a cut, never a short body that
            // looks complete. (The other way round, a client that leaves, http-proxy-3 destroys
            // the backend request.) Not stream.pipeline: it builds an AbortController and a
            // DOMException per call, 6 % of a proxied request's CPU.
            proxyRes.once('error', () => res.destroy());
            proxyRes.once('aborted', () => res.destroy());
            proxyRes.pipe(res);
          },
        };
        const options: FlightOptions = { target: target.url, agent: target.agent, connectTimeout: route.connectTimeoutMs, flight };
        server.web(req, res, options, (err) => {
          // After the answer's head, the response pipeline ends or cuts the connection itself;
          // a failure on the request side (the backend stopped reading an upload it already
          // answered) must not cut an answer that is still arriving whole.
          if (flight.responded) return;
          // The client went away first: not the backend's fault.
          if (res.destroyed || req.socket.destroyed) return resolve();
          const error = failed(flight, err, requestId);
          if (NOT_CONNECTED.has(codeOf(err)) && bodiless && attempts < 2 && route.pool.targets.length > 1) return attempt(target);
          reject(error);
        });
      };
      res.once('close', () => resolve());
      attempt();
    });
  }

  return {
    hasRoutes: config.routes.length > 0,
    match: (url) => routes.match(url),
    async serve(req, res, match, requestId, seen) {
      // TRACE echoes the request back, headers and all: with the identity headers the gateway
      // adds (and Authorization, where forwarded) that is a gift to cross-site tracing.
      if (req.method === 'TRACE') throw new MethodNotAllowed('GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
      const admitted = await admit(match.route, req, readBearerToken(req), requestId);
      seen.identity = admitted.identity;
      if (admitted.limitHeaders !== undefined) for (const [name, value] of Object.entries(admitted.limitHeaders)) res.setHeader(name, value);
      await forward(req, res, match, admitted, requestId);
    },
    wantsUpgrade: webSockets.wantsUpgrade,
    upgrade: webSockets.upgrade,
    openWebSockets: webSockets.open,
    closeWebSockets: webSockets.closeAll,
    close() {
      webSockets.closeAll();
      agents.destroy();
    },
  };
}

function codeOf(err: Error): string {
  return (err as NodeJS.ErrnoException).code ?? '';
}
