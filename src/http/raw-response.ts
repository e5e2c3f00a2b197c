/**
 * An error envelope written straight to a socket that Koa never saw (a request Node's parser
 * refused, CONNECT, a WebSocket upgrade), after which the connection closes. Same status,
 * envelope, headers and challenge as the error boundary writes for everything else.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { REALM, formatBearerChallenge } from '../errors/challenge.js';
import type { GatewayError } from '../errors/errors.js';
import { failure } from './envelope.js';

export function answerSocket(socket: Duplex, error: GatewayError, requestId: string = randomUUID()): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const description = error.expose ? error.message : 'The gateway failed to answer this request.';
  const body = JSON.stringify(failure({ code: error.code, description, ...(error.status >= 500 ? { requestId } : {}) }));
  const headers: Record<string, string | number> = {
    'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': requestId,
    'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store', Connection: 'close', ...error.headers,
  };
  if (error.challenge !== undefined) headers['WWW-Authenticate'] = formatBearerChallenge({ realm: REALM, ...error.challenge, description: error.message });
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  socket.end(`HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n${head}\r\n${body}`);
}
