/**
 * Hostile WebSocket peers against the frame relay (proxy/ws-frames.ts, proxy/websocket.ts):
 * raw TCP clients that write frames no library would (reserved opcodes, 64-bit lengths with the
 * top bit set, oversized or fragmented control frames, unmasked frames, data after close) and
 * clients that never close their side. Whatever they write, the gateway stays up, keeps
 * serving, and no connection outlives the close wait: the gateway's count of open WebSockets
 * returns to zero.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import { signIn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/proxy.js';
import { handshakeText, openClient, roundTrip, startWsBackend } from '../helpers/ws-backend.js';

/** A client frame: FIN set unless `fin` is false, masked with an all-zero key unless `masked` is false. */
function frame(opcode: number, payload: Buffer, { fin = true, masked = true, length }: { fin?: boolean; masked?: boolean; length?: Buffer } = {}): Buffer {
  const first = Buffer.from([(fin ? 0x80 : 0) | opcode]);
  let len: Buffer;
  if (length !== undefined) len = length;
  else if (payload.length < 126) len = Buffer.from([payload.length]);
  else if (payload.length < 65536) len = Buffer.concat([Buffer.from([126]), Buffer.from([payload.length >> 8, payload.length & 0xff])]);
  else {
    const l = Buffer.alloc(9);
    l[0] = 127;
    l.writeBigUInt64BE(BigInt(payload.length), 1);
    len = l;
  }
  len = Buffer.from(len);
  if (masked) len[0] = len[0]! | 0x80;
  return Buffer.concat([first, len, masked ? Buffer.alloc(4) : Buffer.alloc(0), payload]);
}

function closePayload(code: number, reason: Buffer | string = ''): Buffer {
  const out = Buffer.alloc(2);
  out.writeUInt16BE(code);
  return Buffer.concat([out, Buffer.from(reason)]);
}

/** A raw client switched through the gateway; it never ends or closes its side unless told. */
async function rawClient(t: TestContext, gw: TestGateway, path: string, token: string): Promise<{ socket: Socket; received: () => Buffer; ended: Promise<void> }> {
  const { hostname, port } = new URL(gw.url);
  const socket = connect(Number(port), hostname);
  // The hostile client half-closes nothing: it keeps its side open whatever the gateway does.
  t.after(() => socket.destroy());
  const chunks: Buffer[] = [];
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) => { socket.once('end', () => resolve()); socket.once('close', () => resolve()); });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  socket.setNoDelay(true);
  socket.write(handshakeText(gw.url, path, { headers: [['Authorization', `Bearer ${token}`]] }));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no 101 within 5 s')), 5000);
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      const text = Buffer.concat(chunks).toString('latin1');
      if (!text.includes('\r\n\r\n')) return;
      clearTimeout(timer);
      socket.off('data', onData);
      if (!text.startsWith('HTTP/1.1 101 ')) reject(new Error(`not switched: ${text.slice(0, 200)}`));
      else resolve();
    };
    socket.on('data', onData);
  });
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  return { socket, received: () => Buffer.concat(chunks), ended };
}

/** Generous: CLOSE_WAIT_MS (5 s) and a loaded machine. */
const CUT_WITHIN_MS = 15_000;

async function setUp(t: TestContext) {
  const backend = await startWsBackend(t);
  // No idle timeout: nothing but the close handling may end these connections.
  const gw = await startGateway(t, {
    overrides: { routes: [{ prefix: '/ws', targets: [backend.url], websocket: true, webSocketIdleTimeoutMs: 0 }] },
  });
  const token = (await signIn(gw)).accessToken;
  return { backend, gw, token };
}

test('a client that closes the handshake but never its TCP side is cut after the close wait', async (t) => {
  const { gw, token } = await setUp(t);
  const client = await rawClient(t, gw, '/ws/a', token);
  await eventually(() => gw.services.proxy.openWebSockets() === 1, 'the relay took the connection');
  client.socket.write(frame(0x8, closePayload(1000)));
  // The backend answers the close and ends its side; the gateway ends the client's; the client never does.
  await eventually(() => client.received().includes(Buffer.from([0x88, 0x02, 0x03, 0xe8])), 'the backend\'s close answer reached the client');
  await eventually(() => gw.services.proxy.openWebSockets() === 0, 'the half-closed connection was let go', CUT_WITHIN_MS);
  await client.ended;
});

test('a backend that closes while the client never answers: the client is cut after the close wait', async (t) => {
  const { backend, gw, token } = await setUp(t);
  const client = await rawClient(t, gw, '/ws/b', token);
  await eventually(() => backend.sockets.length === 1, 'the backend has the socket');
  // The backend closes and, not answered, gives up on its own (ws: 30 s); cut it sooner.
  backend.sockets[0]!.close(1000, 'bye');
  await eventually(() => client.received().includes(Buffer.from('bye')), 'the backend\'s close reached the client');
  backend.sockets[0]!.terminate();
  await eventually(() => gw.services.proxy.openWebSockets() === 0, 'the silent client was let go', CUT_WITHIN_MS);
});

const MALFORMED: [string, Buffer][] = [
  ['a reserved opcode', frame(0x3, Buffer.from('x'))],
  ['a 64-bit length with the top bit set', frame(0x2, Buffer.alloc(0), { length: Buffer.from([127, 0x80, 0, 0, 0, 0, 0, 0, 1]) })],
  ['a 64-bit length of 2^53 + 1', frame(0x2, Buffer.from('abc'), { length: Buffer.from([127, 0, 0x20, 0, 0, 0, 0, 0, 1]) })],
  ['a fragmented ping', frame(0x9, Buffer.from('p'), { fin: false })],
  ['a 200-byte ping', frame(0x9, Buffer.alloc(200, 0x61))],
  ['an unmasked text frame', frame(0x1, Buffer.from('hello'), { masked: false })],
  ['a close with code 1005', frame(0x8, closePayload(1005))],
  ['a close with invalid UTF-8', frame(0x8, closePayload(1000, Buffer.from([0xff, 0xfe])))],
  ['a close of one byte', frame(0x8, Buffer.from([0x03]))],
  ['data after a close', Buffer.concat([frame(0x8, closePayload(1000)), frame(0x1, Buffer.from('more')), frame(0x1, Buffer.alloc(70_000))])],
  ['RSV bits without an extension', Buffer.from([0xf1, 0x81, 0, 0, 0, 0, 0x61])],
];

for (const [what, bytes] of MALFORMED) {
  test(`a client sending ${what}: the gateway stays up and the connection ends`, async (t) => {
    const { backend, gw, token } = await setUp(t);
    const client = await rawClient(t, gw, '/ws/m', token);
    await eventually(() => gw.services.proxy.openWebSockets() === 1, 'the relay took the connection');
    client.socket.write(bytes);
    await eventually(() => gw.services.proxy.openWebSockets() === 0, `after ${what}, the connection ended`, CUT_WITHIN_MS);
    await client.ended;
    // And the gateway still relays for everyone else.
    const ws = await openClient(gw.url, '/ws/ok', { token });
    t.after(() => ws.terminate());
    assert.equal((await roundTrip(ws, 'still here')).data.toString(), 'still here');
    assert.ok(backend.handshakes.length >= 2);
  });
}

test('a client stalled in the middle of a huge frame does not hold the gateway\'s close past the close wait', async (t) => {
  const backend = await startWsBackend(t);
  const gw = await startGateway(undefined, {
    overrides: { server: { shutdownTimeoutMs: 1000 }, routes: [{ prefix: '/ws', targets: [backend.url], websocket: true, webSocketIdleTimeoutMs: 0 }] },
  });
  const token = (await signIn(gw)).accessToken;
  const client = await rawClient(t, gw, '/ws/stall', token);
  await eventually(() => gw.services.proxy.openWebSockets() === 1, 'the relay took the connection');
  // 1 GiB announced, 10 bytes sent: the relay never reaches a frame boundary to put its close at.
  client.socket.write(frame(0x2, Buffer.alloc(10), { length: Buffer.from([127, 0, 0, 0, 0, 0x40, 0, 0, 0]) }));
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<'pending'>((resolve) => { timer = setTimeout(() => resolve('pending'), CUT_WITHIN_MS); });
  const outcome = await Promise.race([gw.close().then(() => 'closed' as const), guard]).finally(() => clearTimeout(timer));
  assert.equal(outcome, 'closed', 'the gateway closed');
  await client.ended;
  assert.equal(gw.services.proxy.openWebSockets(), 0);
});

/** A backend that switches every handshake by hand, then never reads, answers or closes anything. */
async function startDeafBackend(t: TestContext, { read = true } = {}): Promise<{ url: string; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createTcpServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      const key = /\r\nsec-websocket-key: *([^\r]+)/i.exec(head)?.[1] ?? '';
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      // From here on: swallow everything (or read nothing at all), end nothing.
      if (read) socket.on('data', () => {});
      else socket.pause();
    };
    socket.on('data', onData);
  });
  // A half-closed socket stays open on this side until the test ends it.
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()); }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets };
}

for (const how of ['closes its socket', 'is cut', 'sends a close frame and closes']) {
  test(`a client that ${how}, in front of a backend that never closes: the backend side is cut after the close wait`, async (t) => {
    const backend = await startDeafBackend(t);
    const gw = await startGateway(t, {
      overrides: { routes: [{ prefix: '/ws', targets: [backend.url], websocket: true, webSocketIdleTimeoutMs: 0 }] },
    });
    const token = (await signIn(gw)).accessToken;
    const client = await rawClient(t, gw, '/ws/deaf', token);
    await eventually(() => gw.services.proxy.openWebSockets() === 1, 'the relay took the connection');
    if (how === 'is cut') client.socket.resetAndDestroy();
    else {
      if (how !== 'closes its socket') client.socket.write(frame(0x8, closePayload(1000)));
      client.socket.end();
    }
    await eventually(() => gw.services.proxy.openWebSockets() === 0, 'the connection to the deaf backend was let go', CUT_WITHIN_MS);
  });
}

test('a backend that stops reading and then resets its connection: the client side is let go too', async (t) => {
  const backend = await startDeafBackend(t, { read: false });
  const gw = await startGateway(t, {
    overrides: { routes: [{ prefix: '/ws', targets: [backend.url], websocket: true, webSocketIdleTimeoutMs: 0 }] },
  });
  const token = (await signIn(gw)).accessToken;
  const client = await rawClient(t, gw, '/ws/full', token);
  await eventually(() => gw.services.proxy.openWebSockets() === 1, 'the relay took the connection');
  // Frames until the backend's window and the gateway's buffers are full: the relay pauses the client.
  const big = frame(0x2, Buffer.alloc(1024 * 1024));
  for (let i = 0; i < 64 && client.socket.write(big); i++);
  for (let i = 0; i < 16; i++) client.socket.write(big);
  await new Promise((resolve) => setTimeout(resolve, 300));
  backend.sockets[0]!.resetAndDestroy();
  await eventually(() => gw.services.proxy.openWebSockets() === 0, 'the connection was let go', CUT_WITHIN_MS);
  await client.ended;
});
