/**
 * Error answers written outside Koa: straight to a socket that no HTTP response owns (a
 * request Node's parser refused, CONNECT, a WebSocket upgrade), after which the connection
 * closes; or to a Node response (the proxied-route path, an unmet Expect). Same status,
 * envelope, headers and challenge as the error boundary writes for everything else
 * (errorAnswer), and the same failure log (reportFailure).
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorAnswer, reportFailure, toGatewayError, type ErrorAnswer } from '../errors/boundary.js';
import type { GatewayError } from '../errors/errors.js';
import type { Logger } from '../telemetry/log.js';

/**
 * Answers `thrown` on a Node response, as errorBoundary does in Koa: the envelope while
 * nothing was sent, else the connection cut (the only honest signal left). Returns the error.
 */
export function failResponse(log: Logger, req: IncomingMessage, res: ServerResponse, thrown: unknown, requestId: string): GatewayError {
  const error = toGatewayError(thrown);
  reportFailure(log, error, requestId);
  if (res.headersSent || !res.writable) req.socket.destroy();
  else answerResponse(res, errorAnswer(error, requestId, req.complete), requestId);
  return error;
}

/** Answers `thrown` on a raw socket, which then closes. Returns the error. */
export function failSocket(log: Logger, socket: Duplex, thrown: unknown, requestId: string): GatewayError {
  const error = toGatewayError(thrown);
  reportFailure(log, error, requestId);
  answerSocket(socket, error, requestId);
  return error;
}

export function answerSocket(socket: Duplex, error: GatewayError, requestId: string = randomUUID()): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // As for a request whose body was not read: the answer says Connection: close.
  const { status, headers, body } = withBody(errorAnswer(error, requestId, false), requestId);
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${body}`);
}

/** Writes `answer` as the whole response (the caller checked that nothing was sent yet). */
export function answerResponse(res: ServerResponse, answer: ErrorAnswer, requestId: string): void {
  const { status, headers, body } = withBody(answer, requestId);
  res.writeHead(status, headers);
  res.end(body);
}

function withBody({ status, headers, body }: ErrorAnswer, requestId: string) {
  const text = JSON.stringify(body);
  return {
    status,
    body: text,
    headers: { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(text)), 'X-Request-Id': requestId, ...headers },
  };
}
