/**
 * The in-flight request: one attempt at one backend. Here, once for requests and WebSocket
 * handshakes: which target an attempt goes to (round-robin over the healthy ones) and the Host
 * it names, the backend's silence (responseTimeoutMs until its answer's head, idleTimeoutMs
 * after), and what a failure before its answer means to the client: 504 when it stayed silent
 * past the timeout, 502 otherwise.
 *
 * WebSocket handshakes go through http-proxy-3 (`server.ws`). Requests are sent with node:http
 * directly (`send`), as http-proxy-3's web pass would send them with our options (the same
 * outgoing request: method, target path joined by its urlJoin (outgoing.ts), our headers, the target's agent,
 * its connect timeout; the backend request destroyed when the client leaves first), without the
 * rest of that pass: its per-request options copy, header copy, URL parse of the target, events
 * nobody listens to, and the request body piped even when there is none. Without them a
 * request with a cached token costs 0.8× the CPU (bench/README.md); http-proxy-3's fetch path
 * costs several times its node:http path.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ProxyServer } from 'http-proxy-3';
import { BadGateway, GatewayTimeout, type GatewayError } from '../errors/errors.js';
import { setupConnectTimeout, urlJoin } from './outgoing.js';
import type { Route } from './routes.js';
import type { Target } from './targets.js';
import type { Flight, FlightOptions, ProxyDeps } from './types.js';

export interface Flights {
  /** The http-proxy-3 server, for WebSocket handshakes (`ws`); options carry the flight. */
  readonly server: ProxyServer;
  /**
   * Sends `req` (its URL the backend's path, its body piped unless `bodiless`) on `flight`
   * with the flight's headers; the answer's head goes to flight.onResponse. `onError`: the
   * backend request failed (it may be called after the head too, and more than once). Returns
   * the backend request, to destroy when the client leaves first.
   */
  send(req: IncomingMessage, flight: Flight, bodiless: boolean, onError: (err: Error) => void, fresh?: boolean): ClientRequest;
  /**
   * An attempt at the route's next healthy target other than `exclude` (or at `target` itself,
   * when given); a `target` route's Host names it.
   */
  start(route: Route, headers: OutgoingHttpHeaders, exclude?: Target, target?: Target): Flight;
  /** A backend failure before its answer: counted against the target, logged, and classified. */
  failed(flight: Flight, err: Error, requestId: string): GatewayError;
}

/** Codes of failures that happened before a byte reached the backend: safe to try another target. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ECONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN']);
const TIMEOUT_CODES = new Set(['ECONNECT_TIMEOUT', 'ERESPONSE_TIMEOUT']);

export function createFlights({ log, clock, metrics }: Pick<ProxyDeps, 'log' | 'clock' | 'metrics'>): Flights {
  // toProxy: the request target goes on as the gateway normalised it, byte for byte (without
  // it http-proxy-3 re-serialises it through WHATWG URL, which re-encodes `'` in queries and
  // so breaks signed URLs).
  const server = new ProxyServer({ xfwd: false, selfHandleResponse: true, prependPath: true, toProxy: true });

  // Our header policy, applied as the last step before http-proxy-3 sends the request: it
  // overrides whatever the earlier passes did to req.headers (deleteLength's CL.TE rewrite).
  const applyHeaders = (req: IncomingMessage, _res: unknown, options: unknown) => {
    req.headers = (options as FlightOptions).flight.headers as IncomingMessage['headers'];
  };
  server.before('ws', 'stream', applyHeaders);

  server.on('proxyReqWs', (proxyReq, _req, _socket, options) => {
    const flight = (options as FlightOptions).flight;
    watch(proxyReq, flight);
    // Registered before http-proxy-3's own listener, so the 101 it relays can still be edited.
    proxyReq.once('upgrade', (proxyRes, proxySocket: Duplex) => {
      flight.responded = true;
      flight.respondedAt = performance.now();
      proxyReq.setTimeout(0);
      flight.onUpgrade?.(proxyRes, proxySocket);
    });
  });
  // http-proxy-3 also reports client-socket errors here; each request's own callback handles
  // the rest. Without a listener it would throw.
  server.on('error', (err) => log.debug({ err: { code: (err as NodeJS.ErrnoException).code, message: err.message } }, 'proxy socket error'));

  // One 'timeout' listener for both timeouts, and 'on' for events that come once anyway: no
  // once() wrappers on the hot path.
  function watch(proxyReq: ClientRequest, flight: Flight): void {
    proxyReq.on('timeout', () => {
      flight.timedOut = !flight.responded;
      proxyReq.destroy(Object.assign(new Error(flight.responded ? 'backend idle' : 'backend silent'), { code: 'ERESPONSE_TIMEOUT' }));
    });
    proxyReq.setTimeout(flight.route.responseTimeoutMs);
    proxyReq.on('response', (proxyRes) => {
      flight.responded = true;
      flight.respondedAt = performance.now();
      proxyReq.setTimeout(flight.route.idleTimeoutMs);
      flight.onResponse?.(proxyRes);
    });
  }

  return {
    server,
    send(req, flight, bodiless, onError, fresh = false) {
      const { target, route } = flight;
      const options: RequestOptions = {
        hostname: target.hostname, port: target.port, method: req.method, path: urlJoin(target.path, req.url ?? ''),
        // fresh: a connection of its own, closed after (the pool's other idle ones may be as stale).
        headers: flight.headers, agent: fresh ? false : target.agent,
      };
      const proxyReq = target.url.protocol === 'https:' ? httpsRequest({ ...options, rejectUnauthorized: true }) : httpRequest(options);
      // The socket: a pooled one, or a new connection under the route's connect timeout.
      proxyReq.on('socket', (socket: Socket) => {
        watch(proxyReq, flight);
        setupConnectTimeout(socket, route.connectTimeoutMs);
      });
      proxyReq.on('upgrade', unaskedUpgrade);
      // As http-proxy-3: a reset caused by the client leaving only ends the backend request.
      const failed = (err: NodeJS.ErrnoException) => {
        if (req.socket.destroyed && err.code === 'ECONNRESET') proxyReq.destroy();
        else onError(err);
      };
      proxyReq.on('error', failed);
      if (bodiless) {
        // Nothing to stream: the request is complete (Node's parser saw its end with its head).
        proxyReq.end();
      } else {
        req.on('error', failed);
        req.pipe(proxyReq);
      }
      return proxyReq;
    },
    start(route, headers, exclude, chosen) {
      const target = chosen ?? route.pool.pick(clock.now(), exclude);
      if (route.host === 'target') headers.host = target.url.host;
      return { route, target, headers, responded: false, timedOut: false, sentAt: performance.now(), respondedAt: 0, onResponse: undefined, onUpgrade: undefined };
    },
    failed(flight, err, requestId) {
      const code = codeOf(err);
      const ejected = flight.route.pool.failed(flight.target, clock.now());
      log.warn({ requestId, route: flight.route.name, target: flight.target.origin, code, ejected }, 'backend failed');
      const timedOut = flight.timedOut || TIMEOUT_CODES.has(code);
      metrics?.upstreamFailed(flight.target.origin, timedOut ? 'timeout' : NOT_CONNECTED.has(code) ? 'connect' : code === 'ECONNRESET' || code === 'EPIPE' ? 'reset' : 'other', ejected);
      return timedOut ? new GatewayTimeout(err) : new BadGateway(err);
    },
  };
}

/**
 * A kept-alive connection the backend had closed (its idle timeout racing the pool's reuse):
 * the request went out on a reused socket and met a reset or a broken pipe, with no answer.
 */
export function isStaleConnection(proxyReq: ClientRequest, err: Error): boolean {
  const code = codeOf(err);
  return proxyReq.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE');
}

/** The failure happened before a byte reached the backend. */
export function isNotConnected(err: Error): boolean {
  return NOT_CONNECTED.has(codeOf(err));
}

function codeOf(err: Error): string {
  return (err as NodeJS.ErrnoException).code ?? '';
}

/**
 * A plain request never asks to switch protocols (the header policy drops Upgrade), so a 101 is
 * a broken backend. Without a listener Node's client drops the socket with neither an error nor a
 * response, and nothing would ever answer the client: a failure (502) instead.
 */
function unaskedUpgrade(this: ClientRequest, _proxyRes: IncomingMessage, socket: Duplex): void {
  socket.destroy();
  this.emit('error', Object.assign(new Error('backend switched protocols unasked'), { code: 'EUNEXPECTED_UPGRADE' }));
}
