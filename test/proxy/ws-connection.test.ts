/**
 * One WebSocket connection (src/proxy/ws-connection.ts) driven directly: real TCP socket pairs
 * on 127.0.0.1 stand for the client's and the backend's connections (peers that write raw
 * frames), and a ManualClock holds its timers. Time moves only when a test advances it, so every
 * "not yet" is checked at the last millisecond before and every "now" at the one it is due:
 *
 *   - expiry → 4001 to both sides, idle → 4008 (traffic either way starts it again),
 *     reset → 4003, drain → 1001 (and no log line), the first reason wins;
 *   - a peer that does not answer the close is cut when the clock passes CLOSE_WAIT_MS, also
 *     when it stalls in the middle of a frame;
 *   - the state is closed once both sockets are, with no timer left, and
 *     gateway_websocket_closed_total counts the reason;
 *   - the set of connections drains the open ones and those opened after it.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import type { Identity } from '../../src/auth/bearer.js';
import { CLOSE_WAIT_MS, WebSocketConnection, WebSocketConnections, type ConnectionDeps } from '../../src/proxy/ws-connection.js';
import { createLogger } from '../../src/telemetry/log.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import { ManualClock } from '../helpers/clock.js';

const OPCODE_TEXT = 0x1;
const OPCODE_CLOSE = 0x8;

interface Frame { opcode: number; masked: boolean; payload: Buffer }

/** One frame, FIN set; masked (with a fixed key) as a client's must be. */
function frame(opcode: number, payload: Buffer, masked: boolean): Buffer {
  assert.ok(payload.length < 126);
  const key = Buffer.from([1, 2, 3, 4]);
  const body = masked ? Buffer.from(payload.map((b, i) => b ^ key[i % 4]!)) : payload;
  return Buffer.concat([Buffer.from([0x80 | opcode, (masked ? 0x80 : 0) | payload.length]), masked ? key : Buffer.alloc(0), body]);
}

function closePayload(code: number): Buffer {
  const out = Buffer.alloc(2);
  out.writeUInt16BE(code);
  return out;
}

/** The far end of one of the gateway's sockets: it reads the frames it gets and writes raw ones. */
class Peer {
  readonly socket: Socket;
  /** Whether the frames it sends are masked (a client's must be). */
  readonly masks: boolean;
  readonly frames: Frame[] = [];
  readonly closed: Promise<void>;
  /** Bytes received so far, frames whole or not. */
  #received = 0;
  #buffered = Buffer.alloc(0);
  #waiting: (() => void)[] = [];
  constructor(socket: Socket, masks: boolean) {
    this.socket = socket;
    this.masks = masks;
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
    // Not events.once: it would reject on an error (a cut peer may see ECONNRESET), unawaited.
    this.closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  }
  send(opcode: number, payload: Buffer): void {
    this.socket.write(frame(opcode, payload, this.masks));
  }
  /** The first frame with this opcode, received already or when it comes. */
  async next(opcode: number): Promise<Frame> {
    for (;;) {
      const found = this.frames.find((f) => f.opcode === opcode);
      if (found !== undefined) return found;
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }
  /** Resolves once `count` bytes have been received. */
  async bytes(count: number): Promise<void> {
    while (this.#received < count) await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }
  async closeCode(): Promise<{ code: number; reason: string; masked: boolean }> {
    const { payload, masked } = await this.next(OPCODE_CLOSE);
    return { code: payload.readUInt16BE(0), reason: payload.subarray(2).toString(), masked };
  }
  /** Answers the close as a peer does: its own close frame, then the end of its side. */
  answerClose(code: number): void {
    this.send(OPCODE_CLOSE, closePayload(code));
    this.socket.end();
  }
  #read(chunk: Buffer): void {
    this.#received += chunk.length;
    this.#buffered = Buffer.concat([this.#buffered, chunk]);
    for (;;) {
      const b = this.#buffered;
      if (b.length < 2) break;
      const masked = (b[1]! & 0x80) !== 0;
      const length = b[1]! & 0x7f;
      const start = 2 + (masked ? 4 : 0);
      if (b.length < start + length) break;
      const payload = Buffer.from(b.subarray(start, start + length));
      if (masked) for (let i = 0; i < length; i++) payload[i] = payload[i]! ^ b[2 + (i % 4)]!;
      this.frames.push({ opcode: b[0]! & 0x0f, masked, payload });
      this.#buffered = b.subarray(start + length);
    }
    for (const wake of this.#waiting.splice(0)) wake();
  }
}

/** A listener on 127.0.0.1 to make socket pairs with; closed in t.after. */
async function listen(t: TestContext): Promise<Server> {
  const server = createServer();
  const sockets: Socket[] = [];
  server.on('connection', (socket) => sockets.push(socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return server;
}

/** A connected pair: [the accepted socket, the dialled one]. */
async function socketPair(server: Server): Promise<[Socket, Socket]> {
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const dialled = connect((server.address() as AddressInfo).port, '127.0.0.1');
  await once(dialled, 'connect');
  const [socket] = await accepted;
  return [socket, dialled];
}

const START = Date.UTC(2026, 0, 1);

function identityFor(expiresInMs: number): Identity {
  return {
    accountId: 'acct_test', keyId: 'key_test', tokenId: 'tok_test',
    issuedAt: START / 1000, issuedAtMs: START, expiresAt: (START + expiresInMs) / 1000, scopes: [],
  };
}

interface Harness {
  clock: ManualClock;
  deps: ConnectionDeps & { metrics: Metrics };
  logs: Record<string, unknown>[];
  /** A connection between a fresh client peer (its frames masked) and a fresh backend peer. */
  open(options?: { idleMs?: number; expiresInMs?: number; route?: string }): Promise<{ connection: WebSocketConnection; client: Peer; backend: Peer }>;
}

async function harness(t: TestContext, open?: (sides: ConstructorParameters<typeof WebSocketConnection>[0]) => WebSocketConnection): Promise<Harness> {
  const server = await listen(t);
  const clock = new ManualClock(START);
  const logs: Record<string, unknown>[] = [];
  const log = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line)) });
  const deps = { clock, log, metrics: createMetrics({ processMetrics: false }) };
  return {
    clock,
    deps,
    logs,
    async open({ idleMs = 0, expiresInMs = 3_600_000, route = '/ws' } = {}) {
      const [clientSide, clientPeer] = await socketPair(server);
      const [backendPeer, backendSide] = await socketPair(server);
      const sides = { route: { name: route, webSocketIdleTimeoutMs: idleMs }, identity: identityFor(expiresInMs), client: clientSide, backend: backendSide };
      const connection = open?.(sides) ?? new WebSocketConnection(sides, deps);
      return { connection, client: new Peer(clientPeer, true), backend: new Peer(backendPeer, false) };
    },
  };
}

/** gateway_websocket_closed_total by reason, and the open gauge, for one route. */
async function counts(metrics: Metrics, route = '/ws'): Promise<{ closed: Record<string, number>; open: number }> {
  const closed: Record<string, number> = {};
  for (const v of (await metrics.registry.getSingleMetric('gateway_websocket_closed_total')!.get()).values) {
    if (v.labels.route === route) closed[String(v.labels.reason)] = v.value;
  }
  const open = (await metrics.registry.getSingleMetric('gateway_websocket_connections')!.get()).values.find((v) => v.labels.route === route)?.value ?? 0;
  return { closed, open };
}

const closedLines = (logs: Record<string, unknown>[]) => logs.filter((line) => line.msg === 'websocket closed by the gateway');

test('the token expires: 4001 to both sides, at the millisecond it is due; answered, the connection is closed and counted', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open({ expiresInMs: 10_000 });
  assert.deepEqual(await counts(h.deps.metrics), { closed: {}, open: 1 });

  h.clock.advance(9_999);
  assert.deepEqual(connection.state, { name: 'open' });
  h.clock.advance(1);
  assert.deepEqual(connection.state, { name: 'closing', why: 'expired' });
  assert.deepEqual(await client.closeCode(), { code: 4001, reason: 'token expired', masked: false });
  assert.deepEqual(await backend.closeCode(), { code: 4001, reason: 'token expired', masked: true }, 'towards a backend, masked as a client\'s');

  client.answerClose(4001);
  backend.answerClose(4001);
  await connection.finished;
  assert.deepEqual(connection.state, { name: 'closed', reason: 'expired' });
  assert.equal(h.clock.pendingTimers(), 0, 'no timer is left behind');
  assert.deepEqual(await counts(h.deps.metrics), { closed: { expired: 1 }, open: 0 });
  assert.deepEqual(closedLines(h.logs).map((l) => [l.reason, l.accountId, l.tokenId, l.route]), [['expired', 'acct_test', 'tok_test', '/ws']]);
  await Promise.all([client.closed, backend.closed]);
});

test('idle: 4008 after the idle time without a byte; a byte either way starts it again', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open({ idleMs: 1000 });

  h.clock.advance(600);
  client.send(OPCODE_TEXT, Buffer.from('to the backend'));
  assert.equal((await backend.next(OPCODE_TEXT)).payload.toString(), 'to the backend');
  h.clock.advance(600);
  assert.deepEqual(connection.state, { name: 'open' }, '1200 ms after it opened, 600 after the last byte');
  backend.send(OPCODE_TEXT, Buffer.from('to the client'));
  assert.equal((await client.next(OPCODE_TEXT)).payload.toString(), 'to the client');
  h.clock.advance(999);
  assert.deepEqual(connection.state, { name: 'open' }, 'a byte from the backend counts too');
  h.clock.advance(1);
  assert.deepEqual(connection.state, { name: 'closing', why: 'idle' });
  assert.deepEqual(await client.closeCode(), { code: 4008, reason: 'idle timeout', masked: false });
  assert.equal((await backend.closeCode()).code, 4008);

  // The idle and expiry timers are cancelled: the close wait is the one timer left.
  assert.equal(h.clock.pendingTimers(), 1);
  client.answerClose(4008);
  backend.answerClose(4008);
  await connection.finished;
  assert.deepEqual(connection.state, { name: 'closed', reason: 'idle' });
  assert.deepEqual(await counts(h.deps.metrics), { closed: { idle: 1 }, open: 0 });
});

test('reset: 4003; the first reason wins over a later shut and the expiry timer', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open({ idleMs: 500, expiresInMs: 2000 });
  connection.shut('reset');
  connection.shut('drain');
  h.clock.advance(2000);
  assert.deepEqual(connection.state, { name: 'closing', why: 'reset' });
  assert.deepEqual(await client.closeCode(), { code: 4003, reason: 'access reset', masked: false });
  assert.equal((await backend.closeCode()).code, 4003);

  client.answerClose(4003);
  backend.answerClose(4003);
  await connection.finished;
  assert.deepEqual([client.frames.length, backend.frames.length], [1, 1], 'one close frame each, nothing after');
  assert.deepEqual(connection.state, { name: 'closed', reason: 'reset' });
  assert.deepEqual(closedLines(h.logs).map((l) => l.reason), ['reset'], 'one log line, with the first reason');
  assert.deepEqual(await counts(h.deps.metrics), { closed: { reset: 1 }, open: 0 });
});

test('drain: 1001 to both sides, and no log line (the shutdown logs once for all)', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open();
  connection.shut('drain');
  assert.deepEqual(await client.closeCode(), { code: 1001, reason: 'gateway shutting down', masked: false });
  assert.equal((await backend.closeCode()).code, 1001);
  client.answerClose(1001);
  backend.answerClose(1001);
  await connection.finished;
  assert.deepEqual(connection.state, { name: 'closed', reason: 'drain' });
  assert.deepEqual(closedLines(h.logs), []);
  assert.deepEqual(await counts(h.deps.metrics), { closed: { drain: 1 }, open: 0 });
});

test('peers that do not answer the close are cut when the clock passes CLOSE_WAIT_MS', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open({ idleMs: 1000 });
  h.clock.advance(1000);
  await Promise.all([client.closeCode(), backend.closeCode()]);

  h.clock.advance(CLOSE_WAIT_MS - 1);
  assert.deepEqual([connection.client.destroyed, connection.backend.destroyed], [false, false]);
  h.clock.advance(1);
  assert.deepEqual([connection.client.destroyed, connection.backend.destroyed], [true, true], 'cut at the close wait');
  await Promise.all([connection.finished, client.closed, backend.closed]);
  assert.deepEqual(connection.state, { name: 'closed', reason: 'idle' });
  assert.deepEqual(await counts(h.deps.metrics), { closed: { idle: 1 }, open: 0 });
});

test('a client stalled in the middle of a frame: its backend gets no close frame (it would cut the frame), and both are cut at the close wait', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open();
  // 100 bytes announced, 10 sent: the relay towards the backend is never at a frame boundary.
  client.socket.write(Buffer.concat([Buffer.from([0x82, 0x80 | 100, 0, 0, 0, 0]), Buffer.alloc(10)]));
  await backend.bytes(16);
  connection.shut('drain');
  assert.equal((await client.closeCode()).code, 1001, 'towards the client, at once');
  client.answerClose(1001);
  h.clock.advance(CLOSE_WAIT_MS);
  await Promise.all([connection.finished, backend.closed]);
  assert.equal(backend.frames.some((f) => f.opcode === OPCODE_CLOSE), false);
  assert.deepEqual(connection.state, { name: 'closed', reason: 'drain' });
});

test('peers that close by themselves: relayed, both sides ended, closed as the client\'s, no timer left; a shut after changes nothing', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open({ idleMs: 1000, expiresInMs: 60_000 });
  const ended = Promise.all([once(client.socket, 'end'), once(backend.socket, 'end')]);
  client.send(OPCODE_CLOSE, closePayload(1000));
  assert.deepEqual(await backend.closeCode(), { code: 1000, reason: '', masked: true }, 'the client\'s own close frame, relayed');
  assert.deepEqual(connection.state, { name: 'open' }, 'the peers\' close handshake is theirs: the gateway relays it');
  backend.send(OPCODE_CLOSE, closePayload(1000));
  assert.equal((await client.closeCode()).code, 1000);
  // A close frame went each way on both sides: the gateway ends both TCP connections first.
  await ended;
  client.socket.end();
  backend.socket.end();
  await connection.finished;
  assert.deepEqual(connection.state, { name: 'closed', reason: 'client' });
  assert.equal(h.clock.pendingTimers(), 0, 'the idle and expiry timers are cancelled');

  connection.shut('reset');
  h.clock.advance(120_000);
  assert.deepEqual(connection.state, { name: 'closed', reason: 'client' });
  assert.deepEqual(closedLines(h.logs), []);
  assert.deepEqual(await counts(h.deps.metrics), { closed: { client: 1 }, open: 0 });
});

test('the backend going away first is counted as the backend\'s', async (t) => {
  const h = await harness(t);
  const { connection, client, backend } = await h.open();
  const clientEnded = once(client.socket, 'end');
  backend.socket.end();
  await clientEnded;
  client.socket.end();
  await connection.finished;
  assert.deepEqual(connection.state, { name: 'closed', reason: 'backend' });
  assert.deepEqual(await counts(h.deps.metrics), { closed: { backend: 1 }, open: 0 });
});

test('the set of connections: drain shuts the open ones with 1001 and those opened after it, and resolves once the first are closed', async (t) => {
  let connections!: WebSocketConnections;
  const h = await harness(t, (sides) => connections.open(sides));
  connections = new WebSocketConnections(h.deps);
  const first = await h.open();
  const second = await h.open({ route: '/other' });
  assert.equal(connections.size, 2);
  assert.deepEqual([...connections.ofAccount('acct_test')], [first.connection, second.connection]);

  let drained = false;
  const draining = connections.drain().then(() => { drained = true; });
  for (const { client, backend } of [first, second]) {
    assert.equal((await client.closeCode()).code, 1001);
    assert.equal((await backend.closeCode()).code, 1001);
  }
  const late = await h.open();
  assert.deepEqual(late.connection.state, { name: 'closing', why: 'drain' }, 'opened while draining: shut at once');
  assert.equal((await late.client.closeCode()).code, 1001);

  first.client.answerClose(1001);
  first.backend.answerClose(1001);
  await first.connection.finished;
  assert.equal(drained, false, 'one of the two is still open');
  h.clock.advance(CLOSE_WAIT_MS);
  await draining;
  assert.deepEqual(second.connection.state, { name: 'closed', reason: 'drain' });
  await late.connection.finished;
  assert.equal(connections.size, 0);
  assert.deepEqual([...connections.ofAccount('acct_test')], []);
  assert.deepEqual((await counts(h.deps.metrics)).closed, { drain: 2 });
  assert.deepEqual((await counts(h.deps.metrics, '/other')).closed, { drain: 1 });
});
