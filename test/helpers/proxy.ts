/**
 * Fixtures for the proxy tests (test/proxy/): a gateway with routes in front of real backends,
 * a data file with keys of chosen scopes, free ports where nothing listens, raw TCP backends
 * and small waiting helpers that fail with a message instead of hanging.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { Backend } from './backend.js';
import { startGateway, storedDigest, type TestGateway } from './gateway.js';
import { tempDir } from './process.js';

export type RouteInput = Record<string, unknown> & { prefix: string; targets: string[] };

/**
 * A gateway with these routes (and `proxy` settings, and any other overrides). Its memory
 * token store is kept small: a million-entry store takes a good part of a second to allocate,
 * and these tests start many gateways.
 */
export function startProxy(t: TestContext, routes: RouteInput[], overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  return startGateway(t, { overrides: { tokens: { memoryStoreMaxTokens: 10_000 }, ...overrides, routes } });
}

/** The one request a backend received, failing the test when it received another number. */
export function onlyRequest(backend: Backend): Backend['received'][number] {
  assert.equal(backend.received.length, 1, `backend received ${backend.received.length} requests: ${JSON.stringify(backend.received.map((r) => `${r.method} ${r.url}`))}`);
  return backend.received[0]!;
}

/** A TCP port of 127.0.0.1 where nothing listens (bound, then closed). */
export async function closedPort(): Promise<number> {
  const server = createHttpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(port > 0);
  return port;
}

export interface TcpBackend {
  url: string;
  server: TcpServer;
  /** Connections accepted so far. */
  connections(): number;
  /** Every byte received, per connection, in arrival order. */
  data: Buffer[][];
}

/** A raw TCP server: `onConnection` gets each socket (the bytes are also recorded). Closed in t.after. */
export async function startTcpBackend(t: TestContext, onConnection: (socket: Socket, index: number) => void): Promise<TcpBackend> {
  const sockets = new Set<Socket>();
  const data: Buffer[][] = [];
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const received: Buffer[] = [];
    data.push(received);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    onConnection(socket, data.length - 1);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  assert.ok(port > 0, 'the TCP backend listens');
  t.after(() => new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  }));
  return { url: `http://127.0.0.1:${port}`, server, connections: () => data.length, data };
}

export interface KeyFixture {
  id: string;
  apiKey: string;
  secret: string;
  accountId: string;
  scopes?: string[];
}

/** A fresh API key (random secret) of `accountId`. */
export function newKey(id: string, accountId: string, scopes?: string[]): KeyFixture {
  return { id, apiKey: `ak_test_${id}`, secret: `sk_${randomBytes(16).toString('hex')}`, accountId, ...(scopes === undefined ? {} : { scopes }) };
}

/** Writes a data file holding these keys (grouped into their accounts); removed when the test ends. */
export function writeDataFile(t: TestContext, keys: KeyFixture[]): string {
  const dir = tempDir(t, 'gateway-proxy-');
  const accounts = new Map<string, unknown[]>();
  for (const key of keys) {
    const list = accounts.get(key.accountId) ?? [];
    list.push({ id: key.id, apiKey: key.apiKey, secretDigest: storedDigest(key.secret), ...(key.scopes === undefined ? {} : { scopes: key.scopes }) });
    accounts.set(key.accountId, list);
  }
  const file = join(dir, 'data.json');
  writeFileSync(file, JSON.stringify({ accounts: [...accounts].map(([id, apiKeys]) => ({ id, apiKeys })) }));
  return file;
}

/** Resolves when `promise` does; fails with `what` if it takes longer than `limitMs` (a hang guard). */
export async function within<T>(promise: Promise<T>, limitMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${limitMs} ms`)), limitMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise with its resolve function, for lock-step tests. */
export function signal<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

/** Resolves once `check()` is true; fails after `limitMs` (a hang guard, not a timing claim). */
export async function eventually(check: () => boolean, what: string, limitMs = 5000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`${what}: still not the case after ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export type { TestGateway };

/**
 * A backend speaking HTTP by hand, for answers node:http would refuse to write (a Trailer
 * header on a sized body, hop-by-hop headers of any kind): every bodiless request head that
 * arrives on a connection is answered with `respond(head)`, written as it is.
 */
export function startRawHttpBackend(t: TestContext, respond: (head: string) => string | Buffer): Promise<TcpBackend> {
  return startTcpBackend(t, (socket) => {
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end !== -1; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        socket.write(respond(head));
      }
    });
  });
}
