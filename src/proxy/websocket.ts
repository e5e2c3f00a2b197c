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
 * An open socket is closed (TCP, so the client sees 1006) when its token expires, and as soon
 * as this instance learns of a reset that covers the token; after a gap in reset notices every
 * open socket is checked again. Identity proxies usually check only at the handshake.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { readBearerToken, type Identity } from '../auth/bearer.js';
import { InvalidRequest, MethodNotAllowed } from '../errors/errors.js';
import { shortPath } from '../http/middleware/access-log.js';
import { requestIdOf } from '../http/middleware/request-id.js';
import { answerSocket, failSocket } from '../http/raw-response.js';
import type { Upstream } from '../telemetry/upstream.js';
import type { Admit } from './admission.js';
import type { Flights } from './flight.js';
import type { HeadersFor } from './forward.js';
import type { RouteMatch } from './routes.js';
import type { FlightOptions, ProxyDeps } from './types.js';

const MARKER = 'bearer';
const TOKEN_PREFIX = 'bearer.';
/** setTimeout's ceiling; tokens never live this long, but a bad clock must not overflow it. */
const MAX_DELAY_MS = 2_147_483_647;

export interface WebSockets {
  /** `match`: the WebSocket route the edge chose; `path`: the normalised path, for the log. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, match: RouteMatch, path: string): void;
  open(): number;
  closeAll(): void;
}

interface OpenSocket {
  identity: Identity;
  socket: Duplex;
  timer: NodeJS.Timeout;
}

interface WebSocketDeps extends Pick<ProxyDeps, 'revocations' | 'clock' | 'log' | 'tracing'> {
  admit: Admit;
  headersFor: HeadersFor;
  flights: Flights;
}

/** How a handshake was answered, and the backend attempt behind the answer (undefined when none was made). */
interface Answered {
  status: number;
  upstream: Upstream | undefined;
}

export function createWebSockets({ admit, headersFor, flights, revocations, clock, log, tracing }: WebSocketDeps): WebSockets {
  const { server, start, failed } = flights;
  const byAccount = new Map<string, Set<OpenSocket>>();
  const unauthenticated = new Set<Duplex>();

  function end(open: OpenSocket, reason: 'expired' | 'reset'): void {
    // One reset can be heard twice (this instance's own, then its echo through the store).
    if (open.socket.destroyed) return;
    log.info({ accountId: open.identity.accountId, tokenId: open.identity.tokenId, reason }, 'websocket closed by the gateway');
    open.socket.destroy();
  }

  revocations.watch({
    onReset(scope, at) {
      for (const open of byAccount.get(scope.accountId) ?? []) {
        if ((scope.keyId === undefined || scope.keyId === open.identity.keyId) && open.identity.issuedAtMs <= at) end(open, 'reset');
      }
    },
    onGap() {
      for (const sockets of byAccount.values()) {
        for (const open of sockets) {
          void Promise.resolve(revocations.isRevoked(open.identity, { durable: open.identity.durable })).then((revoked) => revoked && end(open, 'reset'), () => {});
        }
      }
    },
  });

  function track(identity: Identity | undefined, socket: Duplex): void {
    if (identity === undefined) {
      unauthenticated.add(socket);
      socket.once('close', () => unauthenticated.delete(socket));
      return;
    }
    const delay = Math.min(MAX_DELAY_MS, Math.max(0, identity.expiresAt * 1000 - clock.now()));
    const open: OpenSocket = { identity, socket, timer: setTimeout(() => end(open, 'expired'), delay) };
    const sockets = byAccount.get(identity.accountId) ?? new Set<OpenSocket>();
    sockets.add(open);
    byAccount.set(identity.accountId, sockets);
    socket.once('close', () => {
      clearTimeout(open.timer);
      sockets.delete(open);
      if (sockets.size === 0 && byAccount.get(identity.accountId) === sockets) byAccount.delete(identity.accountId);
    });
  }

  async function handshake(req: IncomingMessage, socket: Duplex, head: Buffer, match: RouteMatch, requestId: string): Promise<Answered> {
    if (req.method !== 'GET') throw new MethodNotAllowed('GET');
    const { route } = match;
    const offered = readProtocols(req);
    const headerToken = readBearerToken(req);
    if (headerToken !== undefined && offered.token !== undefined) throw new InvalidRequest('Send the access token once: in Authorization or in the subprotocol list, not both.');

    const admitted = await admit(route, req, headerToken ?? offered.token, requestId);
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
      flight.onUpgrade = (proxyRes) => {
        // A browser that offered subprotocols fails the handshake unless one is selected;
        // when the backend selects none, select the marker offered beside the token.
        if (offered.marker) proxyRes.headers['sec-websocket-protocol'] ??= MARKER;
        route.pool.succeeded(target);
        track(admitted.identity, socket);
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
    upgrade(req, socket, head, match, path) {
      const requestId = requestIdOf(req);
      const started = performance.now();
      // The handshake's span (the backend gets it as its parent) ends with its answer, not the socket.
      const span = tracing?.start(req);
      // Until http-proxy-3 takes the socket, an error on it must not be unhandled.
      socket.on('error', () => {});
      const logged = shortPath(path);
      const answered = ({ status, upstream }: Answered) => {
        log.info({ requestId, method: req.method, path: logged, status, ms: Math.round(performance.now() - started) }, 'upgrade');
        span?.end({ status, requestId, path: logged, template: match.route.prefix, route: match.route.name, upstream });
      };
      handshake(req, socket, head, match, requestId).then(answered, (err: unknown) => {
        answered({ status: failSocket(log, socket, err, requestId).status, upstream: undefined });
      });
    },

    open() {
      let n = unauthenticated.size;
      for (const sockets of byAccount.values()) n += sockets.size;
      return n;
    },

    closeAll() {
      for (const socket of unauthenticated) socket.destroy();
      for (const sockets of byAccount.values()) for (const open of sockets) open.socket.destroy();
    },
  };
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
