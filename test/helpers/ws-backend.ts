/**
 * WebSocket helpers for the proxy tests: a real backend on 127.0.0.1 (a node:http server with
 * ws's WebSocketServer attached) that records every handshake request that reached it, and
 * clients (ws's WebSocket, and raw TCP for the answers ws would hide). Closed in t.after.
 *
 * The backend's `answer` says what it does with a handshake:
 *   echo       upgrade, then send every message back as it came (text stays text);
 *   forbidden  answer a plain `403` with a small JSON body, no upgrade;
 *   silent     keep the connection open and never answer.
 * Plain HTTP requests (no Upgrade) are recorded apart and answered 200 "plain".
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { WebSocket, WebSocketServer, type RawData } from 'ws';

export interface Handshake {
  method: string;
  url: string;
  /** Lower-case name → every value, in arrival order. */
  headers: Record<string, string[]>;
}

export interface WsBackend {
  url: string;
  port: number;
  server: Server;
  /** Every WebSocket handshake request that reached the backend. */
  handshakes: Handshake[];
  /** Every plain HTTP request (no upgrade) that reached it. */
  requests: Handshake[];
  /** The backend's side of every upgraded connection, in order. */
  sockets: WebSocket[];
  /** Upgraded connections the backend still has open. */
  open(): number;
  close(): Promise<void>;
}

export interface WsBackendOptions {
  answer?: 'echo' | 'forbidden' | 'silent';
  /** ws's handleProtocols: which offered subprotocol the backend selects (default: the first). */
  handleProtocols?: (protocols: Set<string>, req: IncomingMessage) => string | false;
}

function record(req: IncomingMessage): Handshake {
  const headers: Record<string, string[]> = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) (headers[req.rawHeaders[i]!.toLowerCase()] ??= []).push(req.rawHeaders[i + 1]!);
  return { method: req.method ?? '', url: req.url ?? '', headers };
}

export async function startWsBackend(t: TestContext | undefined, { answer = 'echo', handleProtocols }: WsBackendOptions = {}): Promise<WsBackend> {
  const handshakes: Handshake[] = [];
  const requests: Handshake[] = [];
  const sockets: WebSocket[] = [];
  const connections = new Set<Socket>();
  const wss = new WebSocketServer({ noServer: true, maxPayload: 8 * 1024 * 1024, ...(handleProtocols ? { handleProtocols } : {}) });
  const server = createServer((req, res) => {
    requests.push(record(req));
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 5 }).end('plain'));
  });
  server.on('connection', (socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    handshakes.push(record(req));
    socket.on('error', () => {});
    if (answer === 'silent') return;
    if (answer === 'forbidden') {
      const body = '{"backend":"forbidden"}';
      socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nX-Backend: ws\r\nConnection: close\r\n\r\n${body}`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.push(ws);
      ws.on('error', () => {});
      ws.on('message', (data: RawData, isBinary: boolean) => ws.send(data as Buffer, { binary: isBinary }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  assert.ok(port > 0, 'the WebSocket backend listens');
  const backend: WsBackend = {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    handshakes,
    requests,
    sockets,
    open: () => sockets.filter((ws) => ws.readyState !== WebSocket.CLOSED).length,
    close: () => new Promise<void>((resolve) => {
      for (const ws of sockets) ws.terminate();
      for (const socket of connections) socket.destroy();
      wss.close();
      server.close(() => resolve());
    }),
  };
  t?.after(() => backend.close());
  return backend;
}

export interface ClientOptions {
  token?: string;
  protocols?: string[];
  headers?: Record<string, string>;
}

/** ws:// URL of a gateway path. */
export function wsUrl(base: string, path: string): string {
  return base.replace(/^http/, 'ws') + path;
}

/**
 * Opens a client WebSocket through the gateway and resolves once it is open; an HTTP answer
 * other than 101 or an error rejects (with the status in the message).
 */
export function openClient(base: string, path: string, { token, protocols = [], headers = {} }: ClientOptions = {}): Promise<WebSocket> {
  const ws = new WebSocket(wsUrl(base, path), protocols, {
    headers: { ...headers, ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}) },
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error('the WebSocket did not open within 5 s'));
    }, 5000);
    ws.once('open', () => {
      clearTimeout(timer);
      resolve(ws);
    });
    ws.once('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      ws.terminate();
      reject(new Error(`the handshake was answered ${res.statusCode}`));
    });
    ws.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** Sends `data` and resolves with the next message back. */
export function roundTrip(ws: WebSocket, data: string | Buffer): Promise<{ data: Buffer; isBinary: boolean }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no echo within 5 s')), 5000);
    ws.once('message', (message: RawData, isBinary: boolean) => {
      clearTimeout(timer);
      resolve({ data: Buffer.isBuffer(message) ? message : Buffer.concat(message as Buffer[]), isBinary });
    });
    ws.send(data, { binary: typeof data !== 'string' });
  });
}

export interface Closed {
  code: number;
  reason: string;
  /** Date.now() when the client saw the close. */
  at: number;
}

/** Resolves when the client WebSocket closes; fails after `limitMs`. Call before the close can happen. */
export function whenClosed(ws: WebSocket, limitMs = 5000): Promise<Closed> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve({ code: -1, reason: 'already closed', at: Date.now() });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the WebSocket was still open after ${limitMs} ms`)), limitMs);
    ws.once('close', (code: number, reason: Buffer) => {
      clearTimeout(timer);
      resolve({ code, reason: reason.toString(), at: Date.now() });
    });
  });
}

export interface RawAnswer {
  /** Everything the gateway wrote, latin1. */
  raw: string;
  /** The gateway closed the connection (false: we stopped reading once a whole response was in). */
  closed: boolean;
}

/** A WebSocket handshake request as raw text. */
export function handshakeText(base: string, path: string, { method = 'GET', headers = [] as [string, string][] } = {}): string {
  const { host } = new URL(base);
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${host}`, 'Connection: Upgrade', 'Upgrade: websocket',
    'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', ...headers.map(([n, v]) => `${n}: ${v}`)];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/**
 * Writes `payload` over a fresh TCP connection and collects the answer until the server closes
 * the connection; with `untilComplete`, stops as soon as one whole response (head and
 * Content-Length body) is in. Fails after `limitMs` (hang guard).
 */
export function rawExchange(base: string, payload: string, { untilComplete = false, limitMs = 5000 } = {}): Promise<RawAnswer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const text = () => Buffer.concat(chunks).toString('latin1');
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer within ${limitMs} ms; got: ${JSON.stringify(text())}`));
    }, limitMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (!untilComplete) return;
      const raw = text();
      const end = raw.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(raw.slice(0, end))?.[1] ?? 0);
      if (raw.length >= end + 4 + length) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ raw, closed: false });
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ raw: text(), closed: true });
    });
    socket.write(payload);
  });
}
