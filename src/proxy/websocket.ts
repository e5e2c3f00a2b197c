/**
 * WebSocket routes. The handshake arrives at the HTTP server's 'upgrade' event, where Koa
 * middleware never runs, so the same checks are made here, in the same order, before
 * http-proxy-3 opens anything towards the backend: request head, normalised path, route,
 * bearer token, scope. A refusal is the usual envelope, written to the socket, which closes.
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
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ProxyServer } from 'http-proxy-3';
import { readBearerToken, type Identity } from '../auth/bearer.js';
import { toGatewayError } from '../errors/boundary.js';
import { InvalidRequest, MethodNotAllowed, NotFound } from '../errors/errors.js';
import { checkRequestHead } from '../http/middleware/request-head.js';
import { normaliseUrl } from '../http/middleware/normalise-path.js';
import { requestIdOf } from '../http/middleware/request-id.js';
import { answerSocket } from '../http/raw-response.js';
import type { Admit, Failed, Flight, HeadersFor, ProxyDeps } from './proxy.js';
import type { RouteMatch, RouteTable } from './routes.js';

const MARKER = 'bearer';
const TOKEN_PREFIX = 'bearer.';
/** setTimeout's ceiling; tokens never live this long, but a bad clock must not overflow it. */
const MAX_DELAY_MS = 2_147_483_647;

export interface WebSockets {
  wantsUpgrade(req: IncomingMessage): boolean;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  open(): number;
  closeAll(): void;
}

interface OpenSocket {
  identity: Identity;
  socket: Duplex;
  timer: NodeJS.Timeout;
}

interface WebSocketDeps extends Pick<ProxyDeps, 'revocations' | 'clock' | 'log'> {
  routes: RouteTable;
  server: ProxyServer;
  admit: Admit;
  headersFor: HeadersFor;
  failed: Failed;
}

export function createWebSockets({ routes, server, admit, headersFor, failed, revocations, clock, log }: WebSocketDeps): WebSockets {
  const byAccount = new Map<string, Set<OpenSocket>>();
  // The route wantsUpgrade found, for the 'upgrade' event of the same request.
  const matched = new WeakMap<IncomingMessage, RouteMatch>();
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
          void Promise.resolve(revocations.isRevoked(open.identity)).then((revoked) => revoked && end(open, 'reset'), () => {});
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

  async function handshake(req: IncomingMessage, socket: Duplex, head: Buffer, requestId: string): Promise<number> {
    checkRequestHead(req);
    const match = matched.get(req);
    if (match === undefined) throw new NotFound();
    if (req.method !== 'GET') throw new MethodNotAllowed('GET');
    const { route } = match;
    const offered = readProtocols(req);
    const headerToken = readBearerToken(req);
    if (headerToken !== undefined && offered.token !== undefined) throw new InvalidRequest('Send the access token once: in Authorization or in the subprotocol list, not both.');

    const admitted = await admit(route, req, headerToken ?? offered.token, requestId);
    const headers = headersFor(req, route, admitted, requestId, offered.rest.length > 0 ? offered.rest.join(', ') : null);
    req.url = match.upstreamUrl;
    const target = route.pool.pick(clock.now());
    if (route.host === 'target') headers.host = target.url.host;

    return new Promise<number>((resolve) => {
      const flight: Flight = {
        route, target, headers, responded: false, timedOut: false,
        // The backend refused the handshake with an ordinary answer, which http-proxy-3 relays.
        onResponse(proxyRes) {
          route.pool.succeeded(target);
          resolve(proxyRes.statusCode ?? 0);
        },
        onUpgrade(proxyRes) {
          // A browser that offered subprotocols fails the handshake unless one is selected;
          // when the backend selects none, select the marker offered beside the token.
          if (offered.marker) proxyRes.headers['sec-websocket-protocol'] ??= MARKER;
          route.pool.succeeded(target);
          track(admitted.identity, socket);
          resolve(101);
        },
      };
      server.ws(req, socket, head, { target: target.url, connectTimeout: route.connectTimeoutMs, flight } as never, (err) => {
        if (flight.responded) {
          socket.destroy();
          return;
        }
        const error = failed(flight, err, requestId);
        answerSocket(socket, error, requestId);
        resolve(error.status);
      });
    });
  }

  return {
    wantsUpgrade(req) {
      if (!/^websocket$/i.test(req.headers.upgrade ?? '')) return false;
      try {
        const match = routes.match(normaliseUrl(req.url ?? ''));
        if (match?.route.websocket !== true) return false;
        matched.set(req, match);
        return true;
      } catch {
        // Not a path we can route: Koa answers it (400) like any other request.
        return false;
      }
    },

    upgrade(req, socket, head) {
      const requestId = requestIdOf(req);
      const started = performance.now();
      const path = pathOf(req);
      // Until http-proxy-3 takes the socket, an error on it must not be unhandled.
      socket.on('error', () => {});
      handshake(req, socket, head, requestId).then(
        (status) => log.info({ requestId, method: req.method, path, status, ms: Math.round(performance.now() - started) }, 'upgrade'),
        (err: unknown) => {
          const error = toGatewayError(err);
          log.info({ requestId, method: req.method, path, status: error.status, ms: Math.round(performance.now() - started) }, 'upgrade');
          answerSocket(socket, error, requestId);
        },
      );
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

/** The path for the log line: never the query, which may hold anything. */
function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  return path.length > 256 ? `${path.slice(0, 256)}…` : path;
}
