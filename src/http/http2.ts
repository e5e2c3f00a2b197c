/**
 * HTTP/2 on the main listener (docs/tls.md#http2): by ALPN over TLS (`h2`, with `http/1.1` for
 * clients without it), and with prior knowledge in cleartext (h2c, `http2.cleartext`) beside
 * HTTP/1.1 on the same port. Node's compatibility API hands each stream to the same request
 * listener as an HTTP/1.1 request, so Koa, the proxied path and the exchange serve both alike;
 * what differs is here:
 *
 * - the limits a peer could otherwise spend the process with (`http2Options`): concurrent
 *   streams, the header list, SETTINGS entries, session memory; Node's nghttp2 also closes a
 *   connection that resets streams faster than it may (CVE-2023-44487, "rapid reset") or sends
 *   endless CONTINUATION frames (CVE-2024-27983), and only that connection;
 * - the answer (`Http2Answer`) drops the connection-specific headers HTTP/2 forbids (RFC 9113
 *   §8.2.2), such as the envelope's `Connection: close`: a refused stream ends alone;
 * - sessions are closed with GOAWAY at shutdown (`trackSessions`), as HTTP/1.1's idle
 *   connections are;
 * - cleartext: the first bytes of a connection tell HTTP/2's preface from an HTTP/1.1 request
 *   (`dispatchPriorKnowledge`);
 * - a bodiless stream for a proxied route skips the compatibility API (http2-streams.ts).
 *
 * WebSockets stay on HTTP/1.1 (no extended CONNECT): browsers fall back to it by themselves.
 */
import { createServer, Http2ServerRequest, Http2ServerResponse, type Http2Server, type Http2Session, type ServerHttp2Stream, type ServerOptions, type ServerStreamResponseOptions } from 'node:http2';
import type { IncomingMessage, OutgoingHttpHeaders, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Config } from '../config/schema.js';

/** Header names HTTP/2 forbids in a message (RFC 9113 §8.2.2); `te` is handled apart. */
export const CONNECTION_SPECIFIC: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** The HTTP/2 connection preface (RFC 9113 §3.4): what a prior-knowledge client sends first. */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/** The header list a peer may send, as HTTP/1.1's head (server.ts, maxHeaderSize). */
export const MAX_HEADER_LIST_BYTES = 16_384;

/**
 * A stream's answer that leaves out what HTTP/2 has no place for, instead of Node's warning:
 * `Connection: close` on a refused request (the stream ends, the connection goes on), and the
 * hop-by-hop names a caller might set.
 */
export class Http2Answer extends Http2ServerResponse {
  constructor(stream: ServerHttp2Stream) {
    super(stream);
    // The compatibility API answers every stream with `waitForTrailers`, then ends it with an
    // empty DATA frame one tick after the body (trailers or none): an extra frame, and most
    // often an extra TLS record and write, per answer. The gateway sends no trailers (it does
    // not forward a backend's, on HTTP/1.1 either), so the body's last frame ends the stream.
    stream.respond = respondWithoutTrailers;
  }

  /** A cut: the stream is reset with an error, never ended as if the answer were whole (`cutError`). */
  override destroy(err?: Error): this {
    return super.destroy(err ?? cutError());
  }

  override setHeader(name: string, value: number | string | readonly string[]): void {
    if (!CONNECTION_SPECIFIC.has(name.toLowerCase())) super.setHeader(name, value);
  }

  override writeHead(statusCode: number, ...rest: unknown[]): this {
    const headers = rest.at(-1);
    if (headers !== null && typeof headers === 'object' && !Array.isArray(headers)) {
      for (const name of Object.keys(headers)) if (CONNECTION_SPECIFIC.has(name.toLowerCase())) delete (headers as OutgoingHttpHeaders)[name];
    }
    return (super.writeHead as (status: number, ...args: unknown[]) => this)(statusCode, ...rest);
  }
}

/**
 * Finished only when the answer went out whole: Node's stream says finished too once a client
 * reset it (RST_STREAM), which would make a client that left look answered, and its backend
 * request go on until its timeout. (A getter on Node's prototype, which the types call a field.)
 */
Object.defineProperty(Http2Answer.prototype, 'writableFinished', {
  get(this: Http2Answer): boolean {
    return this.writableEnded && this.stream.writableFinished && !this.stream.aborted;
  },
});

/** ServerHttp2Stream's own `respond`, found on the first stream (the class is not exported). */
let respondOfStreams: ServerHttp2Stream['respond'] | undefined;

function respondWithoutTrailers(this: ServerHttp2Stream, headers?: OutgoingHttpHeaders, options?: ServerStreamResponseOptions): void {
  respondOfStreams ??= (Object.getPrototypeOf(this) as ServerHttp2Stream).respond;
  respondOfStreams.call(this, headers, { ...options, waitForTrailers: false });
}

/**
 * The request of a stream, said in HTTP/1.1's terms where the gateway reads those, so that the
 * checks and the forwarding written for them hold:
 * - `Host` from `:authority` when the client sent none (as RFC 9113 §8.3.1 lets it);
 * - a body without Content-Length (DATA frames until END_STREAM) as `Transfer-Encoding:
 *   chunked`, which is what it becomes on the way to an HTTP/1.1 backend. A client cannot send
 *   that header itself: nghttp2 refuses a stream that carries it (RFC 9113 §8.2.2).
 */
export class Http2Request extends Http2ServerRequest {
  constructor(...args: ConstructorParameters<typeof Http2ServerRequest>) {
    super(...args);
    const headers = this.headers;
    const authority = headers[':authority'];
    if (headers.host === undefined && typeof authority === 'string') headers.host = authority;
    if (!this.stream.endAfterHeaders && headers['content-length'] === undefined) headers['transfer-encoding'] = 'chunked';
  }
}

/** The HTTP/2 settings and bounds of the main listener, for http2.createSecureServer or createServer. */
export function http2Options(settings: Config['http2']): ServerOptions {
  return {
    settings: { maxConcurrentStreams: settings.maxConcurrentStreams, maxHeaderListSize: MAX_HEADER_LIST_BYTES },
    // nghttp2's own bound on what a peer makes it keep (header tables, queued frames): past
    // it, new streams are refused (Node's default, 10 MB, said here for the docs).
    maxSessionMemory: 10,
    // Entries in one SETTINGS frame, and header fields in one request.
    maxSettings: 32,
    maxHeaderListPairs: 128,
    // A peer that makes the session refuse or reject this many streams, or sends this many
    // invalid frames, is cut: its connection only.
    maxSessionRejectedStreams: 100,
    maxSessionInvalidFrames: 1000,
    Http2ServerRequest: Http2Request,
    Http2ServerResponse: Http2Answer,
  } as ServerOptions;
}

export interface Sessions {
  /** GOAWAY to every open session: its streams finish, no new one starts, then it closes. */
  closeAll(): void;
  /** Cuts every session still open (the shutdown deadline). */
  destroyAll(): void;
}

/** Keeps the HTTP/2 sessions of `server`, to close them at shutdown. */
export function trackSessions(server: Http2Server | NodeJS.EventEmitter): Sessions {
  const open = new Set<Http2Session>();
  server.on('session', (session: Http2Session) => {
    open.add(session);
    session.once('close', () => open.delete(session));
  });
  return {
    closeAll() {
      for (const session of open) session.close();
    },
    destroyAll() {
      for (const session of open) session.destroy();
    },
  };
}

/**
 * h2c with prior knowledge beside HTTP/1.1 on the plain listener `http1`: each new connection's
 * first bytes are read and put back, then it goes to HTTP/2 (`h2`) when they are the preface,
 * else to HTTP/1.1 as before. A connection that has not shown which within `waitMs` (HTTP/1.1's
 * headers timeout) is closed.
 */
export function dispatchPriorKnowledge(http1: Server, h2: Http2Server, waitMs: number): void {
  const serveHttp1 = http1.listeners('connection') as Array<(socket: Socket) => void>;
  http1.removeAllListeners('connection');
  http1.on('connection', (socket: Socket) => {
    let seen = Buffer.alloc(0);
    const wait = setTimeout(() => socket.destroy(), waitMs);
    const decide = (isHttp2: boolean) => {
      clearTimeout(wait);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.pause();
      socket.unshift(seen);
      if (isHttp2) {
        // The session takes the bytes put back from the socket's buffer (on its next tick)
        // and reads the handle itself from then on. The HTTP/1.1 server accepted the socket
        // half-open, which HTTP/2's sessions never are: without this, a client's close would
        // go unseen and its streams would stay open.
        socket.allowHalfOpen = false;
        h2.emit('connection', socket);
        return;
      }
      for (const listener of serveHttp1) listener.call(http1, socket);
      // HTTP/1.1's parser reads the handle directly from now on; the bytes put back reach it
      // through the 'data' listener it added, once the socket flows again.
      socket.resume();
    };
    const onData = (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, PREFACE.length);
      if (!seen.subarray(0, n).equals(PREFACE.subarray(0, n))) decide(false);
      else if (n === PREFACE.length) decide(true);
    };
    const onError = () => {
      clearTimeout(wait);
      socket.destroy();
    };
    socket.on('data', onData);
    socket.on('error', onError);
  });
}

/** A plain HTTP/2 server (no listener of its own) for `dispatchPriorKnowledge`. */
export function createCleartextHttp2(settings: Config['http2'], listener: (req: IncomingMessage, res: never) => void): Http2Server {
  return createServer(http2Options(settings), listener as never);
}

/**
 * What a stream is destroyed with when the gateway cuts an answer (a backend that broke off):
 * with an error, Node resets the stream with INTERNAL_ERROR; without one, with NO_ERROR, which
 * clients (Node's among them) take for an answer that ended whole.
 */
export function cutError(): Error {
  return new Error('answer cut');
}
