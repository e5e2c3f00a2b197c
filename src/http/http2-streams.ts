/**
 * HTTP/2 streams answered without Node's compatibility API (docs/tls.md#http2): a bodiless
 * stream for a proxied route. The API's request and answer objects, a Readable and a Stream with
 * eleven listeners on the stream between them, cost about as much CPU as the rest of what
 * HTTP/2 costs over HTTP/1.1 (bench/README.md). Such a stream is answered on the stream itself
 * through `StreamRequest` and `StreamAnswer`, which give the proxied path the part of
 * IncomingMessage and ServerResponse it uses, and nothing else; every other stream goes through
 * the API (and http2.ts's `Http2Request` and `Http2Answer`) as before.
 */
import { EventEmitter } from 'node:events';
import type { Http2SecureServer, Http2Server, IncomingHttpHeaders, ServerHttp2Stream, ServerStreamResponseOptions } from 'node:http2';
import type { IncomingMessage, OutgoingHttpHeader, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { CONNECTION_SPECIFIC, cutError } from './http2.js';

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
