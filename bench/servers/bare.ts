/**
 * A bare Node proxy: node:http's server (node:https's with TLS_CERT_FILE and TLS_KEY_FILE),
 * `http.request` over a keep-alive agent to BACKEND, and `pipe` both ways. No routing, no
 * auth, no headers added or removed, no logging, no limits: what a proxied request costs in
 * Node at the least, the peer the performance targets are stated against.
 *
 * With HTTP2=true (and the TLS files): node:http2's secure server, each stream answered on the
 * stream API (`respond`, then the backend's answer piped into the stream), Node's cheapest way
 * to serve HTTP/2: what HTTP/2 costs Node itself, beside what it costs the gateway (bench:tls).
 *
 *   PORT=<port> BACKEND=http://127.0.0.1:<port> [TLS_CERT_FILE=… TLS_KEY_FILE=… [HTTP2=true]] node bench/servers/bare.ts
 */
import { readFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { createSecureServer as createHttp2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { createServer as createSecureServer } from 'node:https';

const port = Number(process.env.PORT);
const backend = new URL(process.env.BACKEND ?? '');
const certFile = process.env.TLS_CERT_FILE;
const keyFile = process.env.TLS_KEY_FILE;
if (!Number.isInteger(port) || port <= 0) throw new Error('PORT and BACKEND must be set');

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

function proxy(req: IncomingMessage, res: ServerResponse): void {
  const upstream = request({ host: backend.hostname, port: backend.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', () => {
    res.statusCode = 502;
    res.end();
  });
  req.pipe(upstream);
}

/** Names an HTTP/1.1 answer may carry that HTTP/2 forbids (RFC 9113 §8.2.2). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

function proxyStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  const forwarded: IncomingHttpHeaders = { host: headers[':authority'] };
  for (const name in headers) if (name[0] !== ':') forwarded[name] = headers[name];
  stream.on('error', () => {});
  const upstream = request({ host: backend.hostname, port: backend.port, method: headers[':method'], path: headers[':path'], headers: forwarded, agent }, (answer) => {
    const head: IncomingHttpHeaders = { ':status': String(answer.statusCode ?? 502) };
    for (const name in answer.headers) if (!HOP.has(name)) head[name] = answer.headers[name];
    if (stream.destroyed) return void answer.resume();
    stream.respond(head, { waitForTrailers: false });
    answer.pipe(stream);
  });
  upstream.on('error', () => stream.destroyed || stream.close());
  stream.pipe(upstream);
}

if (process.env.HTTP2 === 'true' && certFile !== undefined && keyFile !== undefined) {
  createHttp2Server({ cert: readFileSync(certFile), key: readFileSync(keyFile) }).on('stream', proxyStream).listen(port, '127.0.0.1');
} else {
  const server = certFile === undefined || keyFile === undefined
    ? createServer({ keepAliveTimeout: 60_000 }, proxy)
    : createSecureServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), keepAliveTimeout: 60_000 }, proxy);
  server.listen(port, '127.0.0.1');
}
