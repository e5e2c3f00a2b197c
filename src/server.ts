/**
 * The HTTP server around the request listener (app.ts). Requests Node's parser refuses never reach Koa
 * (malformed request line, both Content-Length and Transfer-Encoding, oversized headers): they
 * are answered here, still in the envelope, and the connection is closed.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { createRequestListener } from './app.js';
import { GatewayError, InvalidRequest } from './errors/errors.js';
import { failure } from './errors/envelope.js';
import { answerSocket } from './http/raw-response.js';
import type { Services } from './services.js';
import type { Logger } from './telemetry/log.js';

export interface RunningServer {
  server: Server;
  /** e.g. http://127.0.0.1:8080 */
  url: string;
  /** Stops accepting, lets open requests finish up to the timeout, then closes the services. */
  close(): Promise<void>;
}

export async function startServer(services: Services): Promise<RunningServer> {
  const { host, port, shutdownTimeoutMs, requestTimeoutMs } = services.config.server;
  const server = createServer({
    // Slow-loris bounds: headers within 10 s, the whole request within requestTimeoutMs.
    headersTimeout: Math.min(10_000, requestTimeoutMs),
    requestTimeout: requestTimeoutMs,
    // How often Node checks those two timeouts (its default, 30 s, would let them overrun).
    connectionsCheckingInterval: 1000,
    maxHeaderSize: 16_384,
    // Checked by the app (http/middleware/request-head.ts), so that the answer is the envelope.
    requireHostHeader: false,
    // Only a WebSocket handshake on a WebSocket route becomes an 'upgrade' event; any other
    // Upgrade header is ignored and the request served (or refused) by the app as usual.
    shouldUpgradeCallback: (req: IncomingMessage) => services.proxy.wantsUpgrade(req),
  }, createRequestListener(services));
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => services.proxy.upgrade(req, socket, head));
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket, services.log));
  // Without these listeners Node answers an unknown Expect with a bare 417 and drops CONNECT
  // without a word; both get the envelope instead.
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const body = JSON.stringify(failure({ code: 'expectation_failed', description: 'The only expectation supported is 100-continue.' }));
    const requestId = randomUUID();
    services.log.info({ requestId, status: 417 }, 'refused a request before the app');
    res.writeHead(417, {
      'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body),
      'X-Request-Id': requestId, 'Cache-Control': 'no-store', Connection: 'close',
    });
    res.end(body);
  });
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    refuseBeforeApp(socket, new GatewayError(405, 'method_not_allowed', 'CONNECT is not served here.'), services.log, 'CONNECT');
  });

  await services.warmUp();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;

  let closing: Promise<void> | undefined;
  return {
    server,
    url,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        // Upgraded connections are not the HTTP server's to close, and would hold it open.
        services.proxy.closeWebSockets();
        const timer = setTimeout(() => server.closeAllConnections(), shutdownTimeoutMs);
        await closed;
        clearTimeout(timer);
        await services.close();
      })();
      return closing;
    },
  };
}

function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, log: Logger): void {
  // Never interleave with a response that has started on this connection (the request's body
  // turned out malformed after its headers were answered): cut the connection instead.
  const inProgress = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  // HPE_INVALID_EOF_STATE: the client closed mid-request; there is no one left to answer.
  if (err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE' || !socket.writable || inProgress?.headersSent === true) {
    socket.destroy();
    return;
  }
  const error = err.code === 'HPE_HEADER_OVERFLOW' ? new GatewayError(431, 'headers_too_large', 'The request headers are too large.')
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? new GatewayError(408, 'request_timeout', 'The request took too long to arrive.')
      : new InvalidRequest('The request is not valid HTTP/1.1.');
  refuseBeforeApp(socket, error, log, err.code);
}

function refuseBeforeApp(socket: Duplex, error: GatewayError, log: Logger, reason: string | undefined): void {
  const requestId = randomUUID();
  log.info({ requestId, status: error.status, reason }, 'refused a request before the app');
  answerSocket(socket, error, requestId);
}
