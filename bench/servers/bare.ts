/**
 * A bare Node proxy: node:http's server (node:https's with TLS_CERT_FILE and TLS_KEY_FILE),
 * `http.request` over a keep-alive agent to BACKEND, and `pipe` both ways. No routing, no
 * auth, no headers added or removed, no logging, no limits: what a proxied request costs in
 * Node at the least, the peer the performance targets are stated against.
 *
 *   PORT=<port> BACKEND=http://127.0.0.1:<port> [TLS_CERT_FILE=… TLS_KEY_FILE=…] node bench/servers/bare.ts
 */
import { readFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
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

const server = certFile === undefined || keyFile === undefined
  ? createServer({ keepAliveTimeout: 60_000 }, proxy)
  : createSecureServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), keepAliveTimeout: 60_000 }, proxy);
server.listen(port, '127.0.0.1');
