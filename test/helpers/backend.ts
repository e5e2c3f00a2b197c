/**
 * Real backend HTTP servers on 127.0.0.1 for the proxy tests: each records what reached it
 * (method, URL, raw headers, body size) so a test can prove what was and was not forwarded,
 * and answers with whatever the test's handler does. Closed in t.after.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TestContext } from 'node:test';

export interface Received {
  method: string;
  url: string;
  /** Lower-case name → every value, in arrival order. */
  headers: Record<string, string[]>;
  rawHeaders: string[];
  bodyBytes: number;
}

export interface Backend {
  url: string;
  port: number;
  server: Server;
  received: Received[];
  /** Connections the backend has accepted so far (keep-alive reuse shows as fewer). */
  connections(): number;
  close(): Promise<void>;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, received: Received) => void;

/** Answers 200 with a JSON echo of what arrived, once the body has been read. */
export const echo: Handler = (_req, res, received) => {
  const body = JSON.stringify(received);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

export async function startBackend(t: TestContext | undefined, handler: Handler = echo, { readBody = true } = {}): Promise<Backend> {
  const received: Received[] = [];
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((req, res) => {
    const record: Received = { method: req.method ?? '', url: req.url ?? '', headers: {}, rawHeaders: req.rawHeaders, bodyBytes: 0 };
    for (let i = 0; i < req.rawHeaders.length; i += 2) (record.headers[req.rawHeaders[i]!.toLowerCase()] ??= []).push(req.rawHeaders[i + 1]!);
    received.push(record);
    if (!readBody) return handler(req, res, record);
    req.on('data', (chunk: Buffer) => { record.bodyBytes += chunk.length; });
    req.on('end', () => handler(req, res, record));
  });
  server.on('connection', (socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  assert.ok(port > 0, 'the backend listens');
  const backend: Backend = {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    received,
    connections: () => accepted,
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
  t?.after(() => backend.close());
  return backend;
}
