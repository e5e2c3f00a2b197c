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
 * - a bodiless stream for a proxied route skips the compatibility API (`serveStreams`): its
 *   request and answer objects, a Readable and a Stream with eleven listeners on the stream
 *   between them, cost about as much CPU as the rest of the HTTP/2 path that HTTP/1.1 does
 *   not pay (bench/README.md). It is answered on the stream through `StreamRequest` and
 *   `StreamAnswer`, which give the proxied path the part of IncomingMessage and
 *   ServerResponse it uses, and nothing else.
 *
 * WebSockets stay on HTTP/1.1 (no extended CONNECT): browsers fall back to it by themselves.
 */
import { EventEmitter } from 'node:events';
import { createServer, Http2ServerRequest, Http2ServerResponse, type Http2SecureServer, type Http2Server, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream, type ServerOptions, type ServerStreamResponseOptions } from 'node:http2';
import type { IncomingMessage, OutgoingHttpHeader, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import type { Config } from '../config/schema.js';

/** Header names HTTP/2 forbids in a message (RFC 9113 §8.2.2); `te` is handled apart. */
const CONNECTION_SPECIFIC: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

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
 * What decides a bodiless stream (app.ts): true when it took the stream and answers it on
 * `req.answer()`, false to leave it to the compatibility API (and so to the request listener),
 * untouched: nothing on the stream was read or changed.
 */
export type StreamListener = (req: StreamRequest) => boolean;

/**
 * Puts `direct` in front of Node's compatibility API on `server` (which must have its request
 * listener already: that is what adds the API's 'stream' listener). Only a stream whose request
 * is complete with its head goes to `direct`: END_STREAM on HEADERS, no body announced, not
 * HEAD (whose answer's body the API drops), not CONNECT, no Expect; every other stream, and
 * every one `direct` declines, gets the compatibility API exactly as before. Returns false, and
 * changes nothing, when the API's listener is not the one expected (a Node that works another
 * way: everything then goes through the API, as before).
 */
export function serveStreams(server: Http2Server | Http2SecureServer, direct: StreamListener): boolean {
  const listeners = server.listeners('stream');
  const compat = listeners[0] as ((...args: unknown[]) => void) | undefined;
  if (listeners.length !== 1 || compat?.name !== 'bound onServerStream') return false;
  server.removeListener('stream', compat);
  server.on('stream', function onStream(this: Http2Server, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) {
    if (stream.endAfterHeaders && isDirect(headers) && direct(new StreamRequest(stream, headers, rawHeaders))) return;
    compat.call(this, stream, headers, flags, rawHeaders);
  });
  return true;
}

function isDirect(headers: IncomingHttpHeaders): boolean {
  const method = headers[':method'];
  const length = headers['content-length'];
  return method !== 'HEAD' && method !== 'CONNECT' && headers.expect === undefined && (length === undefined || length === '0');
}

/**
 * The request of a bodiless stream (`serveStreams`), as the proxied path reads an
 * IncomingMessage: its method, target (`url`, which the edge rewrites once normalised),
 * headers (with Host from `:authority` when absent, as `Http2Request`), raw headers, and a
 * `socket` that names the connection's peer and ends only this stream. It is complete: the
 * client ended the stream with its head.
 */
export class StreamRequest {
  readonly stream: ServerHttp2Stream;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly method: string;
  url: string;
  #socket: StreamSocket | undefined;

  constructor(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, rawHeaders: string[]) {
    this.stream = stream;
    this.headers = headers;
    this.rawHeaders = rawHeaders;
    this.method = headers[':method'] ?? '';
    this.url = headers[':path'] ?? '';
    const authority = headers[':authority'];
    if (headers.host === undefined && authority !== undefined) headers.host = authority;
  }

  get complete(): boolean {
    return true;
  }

  get httpVersion(): string {
    return '2.0';
  }

  get httpVersionMajor(): number {
    return 2;
  }

  get httpVersionMinor(): number {
    return 0;
  }

  get socket(): StreamSocket {
    return this.#socket ??= new StreamSocket(this.stream);
  }

  /** Its answer, on the stream; the stream is the caller's from then on. */
  answer(): StreamAnswer {
    return new StreamAnswer(this.stream);
  }

  /** For the places typed with Node's request (the proxied path reads only what is above). */
  get asIncoming(): IncomingMessage {
    return this as unknown as IncomingMessage;
  }
}

/**
 * The connection as a stream's request sees it, as the compatibility API's socket proxy: the
 * peer's address, TLS state and certificate are the connection's; `destroyed` and `destroy`
 * are this stream's, so that ending one request never ends the others on the connection.
 */
export class StreamSocket {
  readonly #stream: ServerHttp2Stream;

  constructor(stream: ServerHttp2Stream) {
    this.#stream = stream;
  }

  get #connection(): Partial<TLSSocket> | undefined {
    return this.#stream.session?.socket as Partial<TLSSocket> | undefined;
  }

  get remoteAddress(): string | undefined {
    return this.#connection?.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.#connection?.remotePort;
  }

  get encrypted(): boolean {
    return this.#connection?.encrypted === true;
  }

  get authorized(): boolean {
    return this.#connection?.authorized === true;
  }

  getPeerCertificate(detailed?: boolean): PeerCertificate | object {
    const connection = this.#connection;
    return typeof connection?.getPeerCertificate === 'function' ? connection.getPeerCertificate(detailed as true) : {};
  }

  get destroyed(): boolean {
    return this.#stream.destroyed;
  }

  /** A cut, as a connection's end is on HTTP/1.1. */
  destroy(): void {
    this.#stream.destroy(cutError());
  }
}

/**
 * What a stream is destroyed with when the gateway cuts an answer (a backend that broke off):
 * with an error, Node resets the stream with INTERNAL_ERROR; without one, with NO_ERROR, which
 * clients (Node's among them) take for an answer that ended whole.
 */
function cutError(): Error {
  return new Error('answer cut');
}

/** The answer a stream carries, found by its stream's listeners (one shared function each, no closure). */
const ANSWER = Symbol('answer');
type AnsweredStream = ServerHttp2Stream & { [ANSWER]?: StreamAnswer };

/**
 * The answer to a `StreamRequest`, as the proxied path writes a ServerResponse: headers set
 * one by one or with the head, the head sent as one HEADERS frame (without the names HTTP/2
 * forbids, as `Http2Answer`), the body written with the stream's backpressure ('drain'), and
 * 'close' (after 'finish' when the answer went out whole) when the stream closes. It ends with
 * the body's last DATA frame: no trailers are awaited, as with `Http2Answer`. `destroy` resets
 * the stream with an error: a client sees a cut, never a short answer that looks complete. Header values are
 * not checked here: they are the gateway's own, or a backend's as Node's HTTP/1.1 parser read
 * them, which has no room for a line break; nghttp2 frames each value by its length anyway.
 */
export class StreamAnswer extends EventEmitter {
  statusCode = 200;
  /** Ignored: an HTTP/2 stream ends alone (the proxied path sets it for HTTP/1.1). */
  shouldKeepAlive = true;
  readonly stream: AnsweredStream;
  #headers: OutgoingHttpHeaders = Object.create(null) as OutgoingHttpHeaders;
  #ending = false;

  constructor(stream: ServerHttp2Stream) {
    super();
    this.stream = stream;
    (stream as AnsweredStream)[ANSWER] = this;
    stream.on('drain', onStreamDrain);
    stream.once('close', onStreamClose);
    // A stream error (a reset, a protocol error) closes the stream, which 'close' reports;
    // unheard, it would be thrown.
    stream.on('error', ignoreStreamError);
  }

  get headersSent(): boolean {
    return this.stream.headersSent;
  }

  get writable(): boolean {
    return !this.#ending && !this.stream.destroyed;
  }

  get writableEnded(): boolean {
    return this.#ending;
  }

  /** As `Http2Answer`'s: whole, not reset by the client. */
  get writableFinished(): boolean {
    return this.#ending && this.stream.writableFinished && !this.stream.aborted;
  }

  get destroyed(): boolean {
    return this.stream.destroyed;
  }

  setHeader(name: string, value: OutgoingHttpHeader): this {
    const lower = name.toLowerCase();
    if (!CONNECTION_SPECIFIC.has(lower)) this.#headers[lower] = value;
    return this;
  }

  getHeader(name: string): OutgoingHttpHeader | undefined {
    return this.#headers[name.toLowerCase()];
  }

  getHeaderNames(): string[] {
    return Object.keys(this.#headers);
  }

  hasHeader(name: string): boolean {
    return this.#headers[name.toLowerCase()] !== undefined;
  }

  removeHeader(name: string): void {
    delete this.#headers[name.toLowerCase()];
  }

  /** The head with `headers` over those set before; nothing once the stream is gone. */
  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): this {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return this;
    this.statusCode = statusCode;
    const head = this.#headers;
    if (headers !== undefined) for (const name in headers) this.setHeader(name, headers[name]!);
    head[':status'] = statusCode;
    stream.respond(head, RESPOND);
    return this;
  }

  write(chunk: string | Uint8Array): boolean {
    if (this.#ending || this.stream.destroyed) return false;
    if (!this.stream.headersSent) this.writeHead(this.statusCode);
    return this.stream.write(chunk);
  }

  end(chunk?: string | Uint8Array): this {
    if (this.#ending) return this;
    this.#ending = true;
    const stream = this.stream;
    if (!stream.headersSent) this.writeHead(this.statusCode);
    // A 204 or 304 was ended with its head (Node's respond), and a gone stream takes nothing.
    if (stream.destroyed || stream.writableEnded) return this;
    if (chunk === undefined) stream.end();
    else stream.end(chunk);
    return this;
  }

  destroy(err?: Error): void {
    this.stream.destroy(err ?? cutError());
  }

  /** For the places typed with Node's response (the proxied path uses only what is above). */
  get asServerResponse(): ServerResponse {
    return this as unknown as ServerResponse;
  }
}

/** Ends each stream with its body's last DATA frame: no trailers are ever sent. */
const RESPOND: ServerStreamResponseOptions = { waitForTrailers: false };

function onStreamDrain(this: AnsweredStream): void {
  this[ANSWER]?.emit('drain');
}

function onStreamClose(this: AnsweredStream): void {
  const answer = this[ANSWER];
  if (answer === undefined) return;
  this[ANSWER] = undefined;
  if (answer.writableFinished) answer.emit('finish');
  answer.emit('close');
}

function ignoreStreamError(): void {}
