/**
 * Forwarding an admitted request to its route's backend, and the headers an admitted request
 * or handshake is sent with.
 *
 * The response is written here (`selfHandleResponse`), not by http-proxy-3's outgoing passes,
 * which would copy hop-by-hop headers and add their own `Connection`. Bodies stream both ways
 * with backpressure (pipes, never buffers). A bodiless request whose target could not be
 * connected to is tried once more on another target; a bodiless GET, HEAD or OPTIONS that met a
 * kept-alive connection the backend had just closed, once more on a new connection to the same
 * target. Nothing else is retried.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { GatewayError } from '../errors/errors.js';
import type { Cors } from '../http/cors.js';
import type { Upstream } from '../telemetry/upstream.js';
import type { createHeaderPolicy } from './headers.js';
import { isNotConnected, isStaleConnection, type Flights, type Sent } from './flight.js';
import type { Route, RouteMatch } from './routes.js';
import type { Target } from './targets.js';
import type { Admitted, Flight } from './types.js';

type HeaderPolicy = ReturnType<typeof createHeaderPolicy>;

/** Methods a retry cannot repeat the effect of (RFC 9110 §9.2.1). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** `webSocketProtocol`: given (a list, or null for none) only for a WebSocket handshake. */
export type HeadersFor = (req: IncomingMessage, route: Route, admitted: Admitted, requestId: string, webSocketProtocol?: string | null) => OutgoingHttpHeaders;

/**
 * Calls `done` once: without an error when the exchange is over (answered, cut, or the client
 * gone), or with the GatewayError to answer when the backend failed before its answer started;
 * `upstream`, the last attempt (for metrics and tracing). A callback, not a promise: the
 * gateway's hot path (no promise, no closure it does not need).
 */
export type Forward = (req: IncomingMessage, res: ServerResponse, match: RouteMatch, admitted: Admitted, requestId: string, done: (error: GatewayError | undefined, upstream: Upstream | undefined) => void) => void;

/** The headers the backend gets (the Host of a `target` route is set per attempt, by Flights.start). */
export function createHeadersFor(policy: HeaderPolicy): HeadersFor {
  return function headersFor(req, route, { identity, assertion, certificate }, requestId, webSocketProtocol) {
    return policy.upstream(req, {
      certificate,
      identity: identity === undefined ? route.sends.anonymous : route.sends.caller,
      caller: identity,
      requestId,
      assertion,
      forwardAuthorization: route.forwardAuthorization,
      host: route.host === 'preserve' ? req.headers.host ?? '' : '',
      websocket: webSocketProtocol !== undefined,
      webSocketProtocol: webSocketProtocol ?? undefined,
      claimHeaders: route.claimHeaders,
      claims: identity?.claims,
    });
  };
}

/**
 * `cors`: given while CORS is on, when the gateway owns it on every answer (http/cors.ts): a
 * backend's own Access-Control-* headers go (two Allow-Origin values make a browser refuse the
 * answer). Off, the backend's headers are read exactly as before, at no cost.
 */
export function createForward(policy: HeaderPolicy, headersFor: HeadersFor, { start, send, failed }: Flights, cors?: Pick<Cors, 'takeOverBackend'>): Forward {
  const downstream: HeaderPolicy['downstream'] = cors === undefined ? policy.downstream
    : (connection, rawHeaders) => cors.takeOverBackend(policy.downstream(connection, rawHeaders));
  return function forward(req, res, match, admitted, requestId, done) {
    const { route } = match;
    const headers = headersFor(req, route, admitted, requestId);
    req.url = match.upstreamUrl;
    const bodiless = req.headers['transfer-encoding'] === undefined && (req.headers['content-length'] ?? '0') === '0';
    let settled = false;
    let last: Flight | undefined;
    const settle = (error?: GatewayError) => {
      if (settled) return;
      settled = true;
      done(error, last);
    };
    let attempts = 0;
    let proxyReq: Sent | undefined;

    // `again`: the same target once more, on a new connection (a stale kept-alive one failed).
    const attempt = (exclude?: Target, again?: Target) => {
      attempts++;
      const flight = start(route, headers, exclude, again);
      last = flight;
      const { target } = flight;
      // The answer's head, from either client (flight.ts): its body follows, written by the
      // undici relay or piped below.
      flight.onHead = (status, rawHeaders, connection) => {
        route.pool.succeeded(target);
        // The backend answered before the whole body arrived (413 and close, say): the
        // rest of the upload has nowhere to go, so this connection ends with the answer.
        if (!req.complete) res.shouldKeepAlive = false;
        const head = downstream(connection, rawHeaders);
        // The gateway's quota is the one the client meets first: its fields replace a backend's.
        if (admitted.limitHeaders !== undefined) {
          delete head['ratelimit'];
          delete head['ratelimit-policy'];
        }
        res.writeHead(status, head);
      };
      flight.onResponse = (proxyRes) => {
        flight.onHead!(proxyRes.statusCode ?? 502, proxyRes.rawHeaders, proxyRes.headers.connection);
        // A backend that breaks off mid-body (an error, or closed short): the client sees a
        // cut, never a short body that looks complete. (The other way round, a client that
        // leaves, the backend request is destroyed below.) Not stream.pipeline: it builds an
        // AbortController and a DOMException per call, 6 % of a proxied request's CPU.
        proxyRes.on('close', () => {
          if (!proxyRes.complete) res.destroy();
        });
        proxyRes.pipe(res);
      };
      const sent = send(req, res, flight, bodiless, (err) => {
        // After the answer's head, the response pipeline ends or cuts the connection itself;
        // a failure on the request side (the backend stopped reading an upload it already
        // answered) must not cut an answer that is still arriving whole.
        if (flight.responded) return;
        // The client went away first: not the backend's fault.
        if (res.destroyed || req.socket.destroyed) return settle();
        // The backend closed an idle connection as it was reused: no fault of the target, and
        // a safe method without a body changes nothing if it did arrive.
        if (again === undefined && bodiless && SAFE_METHODS.has(req.method ?? '') && isStaleConnection(sent, err)) return attempt(undefined, target);
        const error = failed(flight, err, requestId);
        if (isNotConnected(err) && bodiless && attempts < 2 && route.pool.targets.length > 1) return attempt(target);
        settle(error);
      }, again !== undefined);
      proxyReq = sent;
    };
    res.on('close', () => {
      // The client left before the whole answer: the backend request goes too.
      if (!res.writableFinished) proxyReq?.destroy();
      settle();
    });
    attempt();
  };
}
