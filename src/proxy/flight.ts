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
 *
 * A bodiless request to a cleartext backend (a GET, the hot path) goes through undici's Pool
 * instead (`Relay`): its client has no ClientRequest, agent queue or IncomingMessage per
 * request, and the answer's body is written to the client as it comes, without a pipe (issue
 * 32, bench/README.md). Its failures are named with node:http's codes (`undiciCode`), so the
 * rest reads them alike. Requests with a body stay on node:http: undici destroys a streamed
 * body it did not finish sending, which for a client's request is the client's connection, and
 * a backend that answers an upload early must still have its answer reach the client. So do
 * https backends (their agent's TLS settings) and a retry on a fresh connection.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type RequestOptions, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ProxyServer } from 'http-proxy-3';
import type { Dispatcher } from 'undici';
import { BadGateway, GatewayTimeout, type GatewayError } from '../errors/errors.js';
import { setupConnectTimeout, urlJoin } from './outgoing.js';
import type { Route } from './routes.js';
import type { Target } from './targets.js';
import type { Flight, FlightOptions, ProxyDeps } from './types.js';

/** A request on its way to the backend, by either client. */
export interface Sent {
  /** Ends it: the client left first. */
  destroy(): void;
  /** It went out on a kept-alive connection (for undici, which does not say: assumed). */
  readonly reusedSocket: boolean;
}

export interface Flights {
  /** The http-proxy-3 server, for WebSocket handshakes (`ws`); options carry the flight. */
  readonly server: ProxyServer;
  /**
   * Sends `req` (its URL the backend's path, its body piped unless `bodiless`) on `flight`
   * with the flight's headers. The answer's head goes to flight.onResponse (node:http), or to
   * flight.onHead with its body then written to `res` here (undici). `onError`: the backend
   * request failed (it may be called after the head too, and more than once). Returns the
   * backend request, to destroy when the client leaves first.
   */
  send(req: IncomingMessage, res: ServerResponse, flight: Flight, bodiless: boolean, onError: (err: Error) => void, fresh?: boolean): Sent;
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
    send(req, res, flight, bodiless, onError, fresh = false) {
      const { target, route } = flight;
      if (bodiless && !fresh && target.pools !== undefined) {
        const relay = new Relay(flight, res, onError);
        // undici's own head and body timeouts are off: it keeps them on a coarse clock (a tick
        // of about half a second), which would let a 200 ms responseTimeoutMs run to a second.
        target.pools.pool(target.url.origin, route.connectTimeoutMs).dispatch({
          method: req.method as Dispatcher.HttpMethod, path: urlJoin(target.path, req.url ?? ''), headers: flight.headers as Record<string, string>,
          headersTimeout: 0, bodyTimeout: 0,
        }, relay);
        return relay;
      }
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
      return { route, target, headers, responded: false, timedOut: false, sentAt: performance.now(), respondedAt: 0, onResponse: undefined, onHead: undefined, onUpgrade: undefined };
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
export function isStaleConnection(proxyReq: Sent, err: Error): boolean {
  const code = codeOf(err);
  return proxyReq.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE');
}

/** The failure happened before a byte reached the backend. */
export function isNotConnected(err: Error): boolean {
  return NOT_CONNECTED.has(codeOf(err));
}

/**
 * One undici request and its answer: the head to flight.onHead, the body written to the client
 * with undici's own backpressure (paused while the client's socket is full). Its handler
 * methods are undici's callbacks, so no closure is made per request but the drain listener of
 * a paused answer. The backend's silence is timed as on node:http's path: responseTimeoutMs
 * from when the request is written on a connection (undici's onConnect: a request waiting for
 * one of the pool's connections is not timed, as on node:http's agent) until the head, then
 * idleTimeoutMs between pieces of the body (a native timer, refreshed),
 * that one set only when the body did not end in the read that brought the head (most answers
 * do: a timer made and cleared per request was 2–4 % of its CPU, bench/README.md).
 */
class Relay implements Dispatcher.DispatchHandler, Sent {
  /**
   * undici does not say which connection a request took. A connection it saw close has its
   * byte counts on the error: one that had read nothing was new. A reset (a system error)
   * carries none, and counts as reused: the stale connection's usual way to fail.
   */
  reusedSocket = true;
  #abort: ((err?: Error) => void) | undefined;
  #resume: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #done = false;
  /** The client left before the request was written: it is aborted as it is. */
  #left = false;
  readonly #flight: Flight;
  readonly #res: ServerResponse;
  readonly #onError: (err: Error) => void;

  constructor(flight: Flight, res: ServerResponse, onError: (err: Error) => void) {
    this.#flight = flight;
    this.#res = res;
    this.#onError = onError;
  }

  destroy(): void {
    if (this.#abort === undefined) this.#left = true;
    else this.#abort(clientLeft());
  }

  /** The backend stayed silent past its timeout: as node:http's path, the request is destroyed. */
  expire(): void {
    const { responded } = this.#flight;
    this.#flight.timedOut = !responded;
    this.#abort?.(Object.assign(new Error(responded ? 'backend idle' : 'backend silent'), { code: 'ERESPONSE_TIMEOUT' }));
  }

  onConnect(abort: (err?: Error) => void): void {
    this.#abort = abort;
    if (this.#left) return abort(clientLeft());
    clearTimeout(this.#timer);
    this.#timer = setTimeout(expire, this.#flight.route.responseTimeoutMs, this);
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void): boolean {
    // An interim answer (100, 103): node:http's client drops them too.
    if (statusCode < 200) return true;
    const flight = this.#flight;
    clearTimeout(this.#timer);
    // The idle timer only for a body still coming after this read: most answers end in it.
    this.#timer = undefined;
    process.nextTick(armIdle, this);
    flight.responded = true;
    flight.respondedAt = performance.now();
    this.#resume = resume;
    const raw: string[] = new Array<string>(headers.length);
    let connection: string | undefined;
    for (let i = 0; i < headers.length; i += 2) {
      const name = raw[i] = headers[i]!.toString('latin1');
      const value = raw[i + 1] = headers[i + 1]!.toString('latin1');
      if (name.length === 10 && name.toLowerCase() === 'connection') connection = connection === undefined ? value : `${connection}, ${value}`;
    }
    flight.onHead!(statusCode, raw, connection);
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.#timer?.refresh();
    if (this.#res.write(chunk)) return true;
    this.#res.once('drain', this.#resume!);
    return false;
  }

  /** After the read that brought the head: the body is still coming, so its silence is timed. */
  armIdle(): void {
    if (!this.#done) this.#timer = setTimeout(expire, this.#flight.route.idleTimeoutMs, this);
  }

  onComplete(): void {
    this.#done = true;
    clearTimeout(this.#timer);
    this.#res.end();
  }

  onError(err: Error): void {
    this.#done = true;
    clearTimeout(this.#timer);
    // After the head, the client sees a cut, never a short body that looks complete.
    if (this.#flight.responded) {
      this.#res.destroy();
      return;
    }
    const code = undiciCode(err);
    const socket = (err as { socket?: { bytesRead?: number } }).socket;
    if (socket?.bytesRead !== undefined) this.reusedSocket = socket.bytesRead > 0;
    this.#onError(code === undefined ? err : Object.assign(new Error(err.message, { cause: err }), { code }));
  }
}

function clientLeft(): Error {
  return Object.assign(new Error('client left'), { code: 'ECONNRESET' });
}

function armIdle(relay: Relay): void {
  relay.armIdle();
}

function expire(relay: Relay): void {
  relay.expire();
}

/** node:http's name for an undici failure (undefined: the error has a system code already, or none to give). */
function undiciCode(err: Error): string | undefined {
  switch ((err as NodeJS.ErrnoException).code) {
    case 'UND_ERR_CONNECT_TIMEOUT': return 'ECONNECT_TIMEOUT';
    // The socket closed or broke before the answer: a bad upgrade is a 101 nobody asked for.
    case 'UND_ERR_SOCKET': return err.message === 'bad upgrade' ? 'EUNEXPECTED_UPGRADE' : 'ECONNRESET';
    case 'UND_ERR_ABORTED': return 'ECONNRESET';
    default: return undefined;
  }
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
