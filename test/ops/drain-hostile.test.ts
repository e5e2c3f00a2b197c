/**
 * Clients that would hold a draining gateway process (SIGTERM) open: keep-alive connections
 * that go on sending requests during the drain delay (each answer from then on says
 * `Connection: close`, for the gateway's own routes and proxied ones alike, and the connection
 * is closed), and slow-loris clients (a head trickled byte by byte; a body trickled after a
 * complete head; a response never read) that must not keep the process past
 * SHUTDOWN_TIMEOUT_MS. Nothing is timed: the exit is awaited under a generous hang guard.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { exitWithin, startGatewayProcess, waitForLog } from '../helpers/process.js';
import { within } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-http.js';

const DRAINING = 'draining: /readyz answers 503, still serving';

test('during the drain delay, requests on kept-alive connections are answered with Connection: close', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGatewayProcess(t, {
    DRAIN_DELAY_MS: '4000', SHUTDOWN_TIMEOUT_MS: '2000', LOG_LEVEL: 'info',
    ROUTES: JSON.stringify([{ name: 'things', prefix: '/things', targets: [backend.url], auth: 'public' }]),
  });
  const paths = ['/things/x', '/healthz', '/.well-known/jwks.json', '/nowhere'];
  const connections = await Promise.all(paths.map(() => RawConnection.open(gw.url)));
  t.after(() => { for (const c of connections) c.destroy(); });
  for (const [i, c] of connections.entries()) {
    c.write(`GET ${paths[i]} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const res = await c.response();
    assert.equal(res.status, [200, 200, 200, 404][i], paths[i]);
    assert.notEqual(res.get('connection')?.toLowerCase(), 'close', `${paths[i]} before the drain keeps the connection`);
  }
  gw.child.process.kill('SIGTERM');
  await waitForLog(gw.child, (line) => line.msg === DRAINING);
  for (const [i, c] of connections.entries()) {
    c.write(`GET ${paths[i]} HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`);
    const res = await c.response();
    assert.equal(res.status, [200, 200, 200, 404][i], `${paths[i]} during the drain`);
    assert.equal(res.get('connection')?.toLowerCase(), 'close', `${paths[i]} during the drain`);
    await c.closed;
  }
  const exit = await exitWithin(gw.child, 60_000);
  assert.equal(exit.code, 0);
});

test('slow-loris clients do not hold the exit past the shutdown deadline', async (t) => {
  let fileRequested!: () => void;
  const fileAnswering = new Promise<void>((resolve) => { fileRequested = resolve; });
  const backend = await startBackend(t, (req, res) => {
    // Only the reader's request gets here (the upload's body never ends), but the upload's head
    // may reach the backend first: the wait below is for this request, not for any.
    if (req.url === '/big/file') fileRequested();
    // A response larger than any socket buffer, for the client that never reads.
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 64 * 1024 * 1024 });
    const chunk = Buffer.alloc(1024 * 1024);
    let sent = 0;
    const pump = () => {
      while (sent < 64 && res.write(chunk)) sent++;
      if (sent < 64) res.once('drain', () => { sent++; pump(); });
      else res.end();
    };
    pump();
  });
  const gw = await startGatewayProcess(t, {
    DRAIN_DELAY_MS: '500', SHUTDOWN_TIMEOUT_MS: '1500', LOG_LEVEL: 'info',
    ROUTES: JSON.stringify([{ name: 'big', prefix: '/big', targets: [backend.url], auth: 'public' }]),
  });
  const head = await RawConnection.open(gw.url);
  const body = await RawConnection.open(gw.url);
  const reader = await RawConnection.open(gw.url);
  t.after(() => { head.destroy(); body.destroy(); reader.destroy(); });
  for (const c of [head, body, reader]) c.socket.on('error', () => {});
  body.write('POST /big/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n');
  reader.write('GET /big/file HTTP/1.1\r\nHost: x\r\n\r\n');
  reader.socket.pause();
  const headText = 'GET /big/x HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(1000);
  let i = 0;
  const trickle = setInterval(() => {
    if (!head.socket.destroyed) head.write(headText[i++ % headText.length]!);
    if (!body.socket.destroyed) body.write('b');
  }, 100);
  t.after(() => clearInterval(trickle));
  // The reader's request reached the backend, which is writing to it, before the stop.
  await within(fileAnswering, 30_000, 'the reader\'s request reaching the backend');
  assert.ok(backend.received.some((r) => r.url === '/big/file'), 'the unread response is in flight');
  gw.child.process.kill('SIGTERM');
  // Drain delay 0.5 s and deadline 1.5 s: the exit is due within seconds; the guard is far beyond.
  const exit = await exitWithin(gw.child, 30_000);
  clearInterval(trickle);
  assert.equal(exit.code, 0, `exit ${exit.code}`);
});
