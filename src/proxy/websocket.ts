/**
 * WebSocket routes. The handshake arrives at the HTTP server's 'upgrade' event, where Koa
 * middleware never runs. By then the request edge (http/edge.ts) has made the same checks as
 * for any request, with the same functions and in the same order (request head, normalised
 * path, not one of the gateway's own paths, a WebSocket route); here follow the method, the
 * credential and admission (admission.ts) before http-proxy-3 opens anything towards the
 * backend. A refusal is the usual envelope, written to the socket, which closes.
 *
 * Credentials: `Authorization: Bearer <token>`, or, for browsers (which cannot set headers
 * on a WebSocket), the subprotocol list `bearer, bearer.<token>[, app protocols…]`. Both
 * entries are removed before the handshake goes on; when the backend then selects no
 * subprotocol, the gateway answers `bearer`, the one a browser requires to be selected.
 *
 * Once switched, the two sockets are relayed frame by frame (ws-frames.ts), so that the
 * gateway can end a WebSocket with a close frame of its own, to the client and to the backend,
 * instead of cutting TCP: code 4001 when the token expires, 4003 as soon as this instance learns
 * of a reset that covers it (after a gap in reset notices every open socket is checked again),
 * 4008 after the route's `webSocketIdleTimeoutMs` without a byte either way, 1001 when the
 * gateway shuts down (closeAll). Identity proxies usually check only at the handshake. A peer
 * that does not answer the close within CLOSE_WAIT_MS is cut. Each switched WebSocket is a
 * connection object with states (ws-connection.ts); here it is joined and told of resets. The
 * codes are documented in docs/proxying.md; test/proxy/websocket.test.ts and
 * test/ops/drain.test.ts hold them.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { readBearerToken, type Identity } from '../auth/bearer.js';
import { InvalidRequest, MethodNotAllowed } from '../errors/errors.js';
import type { Exchange } from '../http/exchange.js';
import { answerSocket, failSocket } from '../http/raw-response.js';
import type { Upstream } from '../telemetry/upstream.js';
import type { Admit } from './admission.js';
import type { Flights } from './flight.js';
import type { HeadersFor } from './forward.js';
import type { Route, RouteMatch } from './routes.js';
import type { FlightOptions, ProxyDeps } from './types.js';
import { WebSocketConnections } from './ws-connection.js';

const MARKER = 'bearer';
const TOKEN_PREFIX = 'bearer.';

export interface WebSockets {
  /** `match`: the WebSocket route the edge chose; `exchange`: the handshake's, ended with its answer. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, match: RouteMatch, exchange: Exchange): void;
  open(): number;
  /**
   * Closes every open WebSocket with 1001, and those switched from now on as soon as they
   * are; resolves once the ones open now are closed (answered, or cut after CLOSE_WAIT_MS).
   */
  closeAll(): Promise<void>;
  /** Cuts whatever is still open (the shutdown deadline). */
  cutAll(): void;
}

interface Switched {
  route: Route;
  identity: Identity | undefined;
  client: Duplex;
}

interface WebSocketDeps extends Pick<ProxyDeps, 'revocations' | 'denied' | 'clock' | 'log' | 'metrics'> {
  admit: Admit;
  headersFor: HeadersFor;
  flights: Flights;
}

/** How a handshake was answered, and the backend attempt behind the answer (undefined when none was made). */
interface Answered {
  status: number;
  upstream: Upstream | undefined;
}

export function createWebSockets({ admit, headersFor, flights, revocations, denied, clock, log, metrics }: WebSocketDeps): WebSockets {
  const { server, start, failed } = flights;
  const connections = new WebSocketConnections({ clock, log, metrics });
  /** Handshakes the backend switched, by its socket, until http-proxy-3 has joined the two. */
  const switched = new WeakMap<Duplex, Switched>();
  closeOnReset(revocations, connections);
  // A revoked access token (POST /api/revoke) ends its open sockets as a reset does (4003).
  // (Asked again for every open one: revocations are rare, and a family's names no jti.)
  denied?.watch(() => {
    for (const open of connections.withIdentity()) {
      const { identity } = open;
      if (identity.issuer === undefined && !identity.durable && denied.isDenied(identity.tokenId, identity.claims?.sid as string | undefined)) open.shut('reset');
    }
  });
  joinWhenOpen(server, switched, connections);

  async function handshake(req: IncomingMessage, socket: Duplex, head: Buffer, match: RouteMatch, exchange: Exchange): Promise<Answered> {
    const { requestId } = exchange;
    if (req.method !== 'GET') throw new MethodNotAllowed('GET');
    const { route } = match;
    const offered = readProtocols(req);
    const headerToken = readBearerToken(req);
    if (headerToken !== undefined && offered.token !== undefined) throw new InvalidRequest('Send the access token once: in Authorization or in the subprotocol list, not both.');

    const admitted = await admit(route, req, headerToken ?? offered.token, requestId);
    exchange.accountId = admitted.identity?.accountId;
    // The client left while it was admitted: no backend is asked to open a socket for nobody.
    if (socket.destroyed) return { status: 499, upstream: undefined };
    const headers = headersFor(req, route, admitted, requestId, offered.rest.length > 0 ? offered.rest.join(', ') : null);
    req.url = match.upstreamUrl;
    const flight = start(route, headers);
    const { target } = flight;

    return new Promise<Answered>((resolve) => {
      // The backend refused the handshake with an ordinary answer, which http-proxy-3 relays.
      flight.onResponse = (proxyRes) => {
        route.pool.succeeded(target);
        resolve({ status: proxyRes.statusCode ?? 0, upstream: flight });
      };
      flight.onUpgrade = (proxyRes, proxySocket) => {
        // A browser that offered subprotocols fails the handshake unless one is selected;
        // when the backend selects none, select the marker offered beside the token.
        if (offered.marker) proxyRes.headers['sec-websocket-protocol'] ??= MARKER;
        route.pool.succeeded(target);
        switched.set(proxySocket, { route, identity: admitted.identity, client: socket });
        resolve({ status: 101, upstream: flight });
      };
      const options: FlightOptions = { target: target.url, connectTimeout: route.connectTimeoutMs, flight };
      server.ws(req, socket, head, options, (err) => {
        if (flight.responded) {
          socket.destroy();
          return;
        }
        const error = failed(flight, err, requestId);
        answerSocket(socket, error, requestId);
        resolve({ status: error.status, upstream: flight });
      });
    });
  }

  return {
    upgrade(req, socket, head, match, exchange) {
      // Until http-proxy-3 takes the socket, an error on it must not be unhandled.
      socket.on('error', () => {});
      // The exchange (its line, metric and span) ends with the handshake's answer, not the socket.
      handshake(req, socket, head, match, exchange).then(({ status, upstream }: Answered) => {
        exchange.upstream = upstream;
        exchange.end(status);
      }, (err: unknown) => {
        exchange.end(failSocket(log, socket, err, exchange.requestId).status);
      });
    },

    open() {
      return connections.size;
    },

    closeAll() {
      return connections.drain();
    },

    cutAll() {
      connections.cutAll();
    },
  };
}

/**
 * 4003 as soon as this instance learns of a reset that covers an open socket's token; after a
 * gap in reset notices, every open socket is checked again.
 */
function closeOnReset(revocations: ProxyDeps['revocations'], connections: WebSocketConnections): void {
  revocations.watch({
    onReset(scope, at) {
      for (const open of connections.ofAccount(scope.accountId)) {
        if ((scope.keyId === undefined || scope.keyId === open.identity!.keyId) && open.identity!.issuedAtMs <= at) open.shut('reset');
      }
    },
    onGap() {
      for (const open of connections.withIdentity()) {
        const { identity } = open;
        void Promise.resolve(revocations.isRevoked(identity, { durable: identity.durable })).then((revoked) => revoked && open.shut('reset'), () => {});
      }
    },
  });
}

/**
 * http-proxy-3 pipes the two sockets, then says so: the pipes are undone at once (before a
 * byte has flowed: flowing starts on a later tick) and the connection's relays take over.
 */
function joinWhenOpen(server: Flights['server'], switched: WeakMap<Duplex, Switched>, connections: WebSocketConnections): void {
  server.on('open', (backend: Duplex) => {
    const handshake = switched.get(backend);
    if (handshake === undefined) return;
    switched.delete(backend);
    backend.unpipe(handshake.client);
    handshake.client.unpipe(backend);
    connections.open({ ...handshake, backend });
  });
}

/** The subprotocols offered, split into the browser credential and the rest. */
function readProtocols(req: IncomingMessage): { token: string | undefined; marker: boolean; rest: string[] } {
  const header = req.headers['sec-websocket-protocol'];
  const offered = header === undefined ? [] : header.split(',').map((p) => p.trim()).filter((p) => p !== '');
  const tokens = offered.filter((p) => p.startsWith(TOKEN_PREFIX));
  if (tokens.length > 1) throw new InvalidRequest('Offer at most one "bearer.<token>" subprotocol.');
  return {
    token: tokens[0]?.slice(TOKEN_PREFIX.length),
    marker: offered.includes(MARKER),
    rest: offered.filter((p) => p !== MARKER && !p.startsWith(TOKEN_PREFIX)),
  };
}
