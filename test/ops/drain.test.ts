/**
 * Stopping a real gateway process (`node --import tsx src/main.ts`) with work in flight: a
 * slow request, a streaming response and a WebSocket, to real backends in this process.
 *
 *   1. SIGTERM: /readyz answers 503 `draining` at once while new requests are still served
 *      (with Connection: close) and the WebSocket still echoes; after DRAIN_DELAY_MS the
 *      listener closes (new connections refused), the WebSocket gets a close frame 1001 on
 *      both sides, the slow request and the stream finish whole, and the process exits 0;
 *   2. a second signal exits at once (128 + its number), the delay notwithstanding;
 *   3. the same with WORKERS=2: the primary passes the stop on, every worker drains (once,
 *      also when it got the signal itself, as from Ctrl-C), and a second signal ends the
 *      primary and its workers at once;
 *   4. (in-process) what is still open at `server.shutdownTimeoutMs` is cut: a request the
 *      backend never answers, a WebSocket client that never answers the close frame (whose
 *      bytes are checked as they went out);
 *   5. (in-process, where the process's exit cannot close the sockets for it) the stop closes
 *      the gateway's Redis connections.
 *
 * Nothing here is timed: each step waits for the gateway's log line or the backend's event
 * that says it happened; the drain delay is only long enough for the few requests made in it.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { test, type TestContext } from 'node:test';
import { startBackend, type Backend } from '../helpers/backend.js';
import { DEMO, logged, postJson, sha256Hex, signIn, startGateway } from '../helpers/gateway.js';
import { exitWithin, LISTENING, startGatewayProcess, waitForLog, type GatewayProcess, type LogLine } from '../helpers/process.js';
import { conformance } from '../helpers/openapi.js';
import { eventually, signal as deferred } from '../helpers/proxy.js';
import { rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';
import { handshakeText, openClient, roundTrip, startWsBackend, whenClosed } from '../helpers/ws-backend.js';

/** Generous: a loaded machine must still get the handful of requests made while draining in. */
const DRAIN_DELAY_MS = 4000;
/** A hang guard for a whole process's life. */
const PROCESS_LIMIT_MS = 60_000;

/** An answer read to its end over a fresh connection (no keep-alive pool hides a refused connect). */
interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

function get(url: string, token?: string, onHead?: (res: IncomingMessage) => void): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      onHead?.(res);
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => { body += chunk; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * The backend of the `/app` route: `/app/slow` answers when the test says, `/app/stream`
 * sends its head and a first chunk at once and the rest when the test says, anything else
 * answers at once.
 */
async function startAppBackend(t: TestContext) {
  const slowArrived = deferred<void>();
  const finishSlow = deferred<void>();
  const finishStream = deferred<void>();
  const backend: Backend = await startBackend(t, (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/app/slow') {
      slowArrived.resolve();
      void finishSlow.promise.then(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('slow done'));
    } else if (req.url === '/app/stream') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first;');
      void finishStream.promise.then(() => {
        res.write('second;');
        res.end('last');
      });
    } else {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('fast');
    }
  });
  return { backend, slowArrived: slowArrived.promise, finishSlow: () => finishSlow.resolve(), finishStream: () => finishStream.resolve() };
}

async function signInOn(url: string): Promise<string> {
  const res = await postJson(`${url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.message.accessToken as string;
}

const withMsg = (msg: string) => (line: LogLine) => line.msg === msg;

/** Resolves once a fresh TCP connection to `url` is refused (the listener is closed). */
function refused(url: string): Promise<boolean> {
  return get(`${url}/healthz`).then(() => false, (err: NodeJS.ErrnoException) => err.code === 'ECONNREFUSED');
}

test('SIGTERM drains: not ready but serving, then in-flight work finishes, WebSockets get 1001, exit 0', async (t) => {
  const app = await startAppBackend(t);
  const wsBackend = await startWsBackend(t);
  const gw = await startGatewayProcess(t, {
    LOG_LEVEL: 'info',
    DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    SHUTDOWN_TIMEOUT_MS: '30000',
    ROUTES: JSON.stringify([{ prefix: '/app', targets: [app.backend.url] }, { prefix: '/ws', targets: [wsBackend.url], websocket: true }]),
  }, { limitMs: PROCESS_LIMIT_MS });
  const token = await signInOn(gw.url);
  assert.equal((await get(`${gw.url}/readyz`)).status, 200, 'ready before the signal');

  // Work in flight: a request the backend holds, a stream half sent, a WebSocket.
  const slow = get(`${gw.url}/app/slow`, token);
  await app.slowArrived;
  const streamHead = deferred<void>();
  let streamed = '';
  const stream = get(`${gw.url}/app/stream`, token, (res) => res.on('data', (chunk: Buffer) => {
    streamed += chunk.toString();
    streamHead.resolve();
  }));
  await streamHead.promise;
  assert.equal(streamed, 'first;', 'the stream\'s first chunk is through');
  const ws = await openClient(gw.url, '/ws/live', { token });
  assert.equal((await roundTrip(ws, 'before')).data.toString(), 'before');
  const backendSide = wsBackend.sockets.at(-1)!;
  const backendClosed = new Promise<number>((resolve) => backendSide.once('close', (code: number) => resolve(code)));
  const clientClosed = whenClosed(ws, PROCESS_LIMIT_MS);

  gw.child.process.kill('SIGTERM');
  await waitForLog(gw.child, withMsg('draining: /readyz answers 503, still serving'));

  await t.test('during the delay: /readyz 503 draining, new requests served with Connection: close, the WebSocket open', async () => {
    const ready = await get(`${gw.url}/readyz`);
    assert.equal(ready.status, 503);
    assert.deepEqual(JSON.parse(ready.body), { success: false, message: { status: 'draining', checks: {} } });
    const fresh = await get(`${gw.url}/app/fast`, token);
    assert.deepEqual([fresh.status, fresh.body, fresh.headers.connection], [200, 'fast', 'close']);
    assert.equal((await get(`${gw.url}/healthz`)).status, 200, 'alive: no restart wanted');
    assert.equal((await roundTrip(ws, 'during')).data.toString(), 'during');
    // Each of these was answered before the delay ran out: the gateway says so in order.
    assert.equal(gw.logs().some(withMsg('stopped accepting connections')), false, 'the delay outlasted the requests made in it');
  });

  await t.test('after the delay: new connections refused, the WebSocket closed with 1001 on both sides', async () => {
    await waitForLog(gw.child, withMsg('stopped accepting connections'));
    assert.equal(await refused(gw.url), true, 'a new connection is refused');
    const { code, reason } = await clientClosed;
    assert.deepEqual({ code, reason }, { code: 1001, reason: 'gateway shutting down' });
    assert.equal(await backendClosed, 1001, 'the backend got the close frame too');
  });

  await t.test('in-flight work finishes whole, then the process exits 0', async () => {
    assert.equal(gw.child.process.exitCode, null, 'still running while requests are open');
    app.finishSlow();
    app.finishStream();
    assert.deepEqual(await slow.then((a) => [a.status, a.body]), [200, 'slow done']);
    assert.deepEqual(await stream.then((a) => [a.status, a.body]), [200, 'first;second;last']);
    const exit = await exitWithin(gw.child, PROCESS_LIMIT_MS);
    assert.deepEqual(exit, { code: 0, signal: null }, gw.child.stderr());
    const msgs = gw.logs().map((line) => line.msg);
    assert.ok(msgs.includes('stopped'), 'the last word is "stopped"');
    assert.deepEqual(gw.logs().filter(withMsg('shutdown deadline passed: cut the connections still open')), [], 'nothing was cut');
    assert.deepEqual(gw.logs().filter((line) => (line.level as number) >= 50), [], 'no error');
  });
});

test('a second signal exits at once, whatever is left of the drain', async (t) => {
  const gw = await startGatewayProcess(t, { LOG_LEVEL: 'info', DRAIN_DELAY_MS: String(PROCESS_LIMIT_MS) }, { limitMs: PROCESS_LIMIT_MS });
  gw.child.process.kill('SIGTERM');
  await waitForLog(gw.child, withMsg('draining: /readyz answers 503, still serving'));
  gw.child.process.kill('SIGINT');
  // Far less than the drain delay it cut short.
  const exit = await exitWithin(gw.child, 15_000);
  assert.deepEqual(exit, { code: 130, signal: null }, '128 + SIGINT\'s number, as a shell reports it');
  assert.ok(gw.logs().some(withMsg('second signal: exiting at once')));
});

/**
 * The pids of the gateway workers a primary forked (Linux: /proc/<pid>/stat's fourth field is
 * the parent's pid); other children (tsx's esbuild service) are left out by their command line.
 */
function childPids(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The name (second field) is in parentheses and may hold spaces: count from after it.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('src/main.ts')) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startWorkers(t: TestContext, extra: Record<string, string>): Promise<GatewayProcess> {
  const redis = await startRedis(t);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const gw = await startGatewayProcess(t, {
    WORKERS: '2', REDIS_URL: redis.url, SIGNING_KEYS: JSON.stringify([{ kid: 'drain-1', alg: 'EdDSA', pem }]), LOG_LEVEL: 'info', ...extra,
  }, { limitMs: PROCESS_LIMIT_MS });
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => LISTENING(line) && line.worker === worker, 20_000);
  return gw;
}

test('WORKERS=2: SIGTERM to the primary drains every worker, in-flight work finishes, exit 0', redisSuite(), async (t) => {
  const app = await startAppBackend(t);
  const gw = await startWorkers(t, {
    DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    SHUTDOWN_TIMEOUT_MS: '30000',
    ROUTES: JSON.stringify([{ prefix: '/app', targets: [app.backend.url] }]),
  });
  const token = await signInOn(gw.url);
  const slow = get(`${gw.url}/app/slow`, token);
  await app.slowArrived;

  gw.child.process.kill('SIGTERM');
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === 'draining: /readyz answers 503, still serving' && line.worker === worker);
  // Whichever worker answers, it is draining; and it still serves.
  for (let i = 0; i < 4; i++) assert.equal((await get(`${gw.url}/readyz`)).status, 503);
  assert.deepEqual(await get(`${gw.url}/app/fast`, token).then((a) => [a.status, a.body]), [200, 'fast']);

  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === 'stopped accepting connections' && line.worker === worker);
  assert.equal(gw.child.process.exitCode, null, 'the primary waits for its workers');
  app.finishSlow();
  assert.deepEqual(await slow.then((a) => [a.status, a.body]), [200, 'slow done']);
  const exit = await exitWithin(gw.child, PROCESS_LIMIT_MS);
  assert.deepEqual(exit, { code: 0, signal: null }, gw.child.stderr());
  const stops = gw.logs().filter((line) => line.msg === 'shutting down' && line.worker !== undefined);
  assert.deepEqual(stops.map((line) => line.signal), ['primary', 'primary'], 'each worker stopped once, on the primary\'s word');
});

test('WORKERS=2: a signal to the whole group, as Ctrl-C sends, stops each worker once and exits 0', redisSuite(), async (t) => {
  const gw = await startWorkers(t, { DRAIN_DELAY_MS: '1000' });
  const pids = childPids(gw.child.process.pid!);
  assert.equal(pids.length, 2, 'two workers');
  for (const pid of [...pids, gw.child.process.pid!]) process.kill(pid, 'SIGINT');
  const exit = await exitWithin(gw.child, PROCESS_LIMIT_MS);
  assert.deepEqual(exit, { code: 0, signal: null }, 'the primary\'s order was not taken for a second signal');
  assert.deepEqual(gw.logs().filter(withMsg('second signal: exiting at once')), []);
  const stops = gw.logs().filter((line) => line.msg === 'shutting down' && line.worker !== undefined);
  assert.equal(stops.length, 2, 'each worker shut down once');
});

test('WORKERS=2: a second signal ends the primary and its workers at once', redisSuite(), async (t) => {
  const gw = await startWorkers(t, { DRAIN_DELAY_MS: String(PROCESS_LIMIT_MS) });
  const pids = childPids(gw.child.process.pid!);
  assert.equal(pids.length, 2, 'two workers');
  gw.child.process.kill('SIGTERM');
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === 'draining: /readyz answers 503, still serving' && line.worker === worker);
  gw.child.process.kill('SIGTERM');
  const exit = await exitWithin(gw.child, 15_000);
  assert.deepEqual(exit, { code: 143, signal: null }, '128 + SIGTERM\'s number');
  await eventually(() => pids.every((pid) => !isRunning(pid)), 'the workers are gone too', 10_000);
});

test('what is still open at server.shutdownTimeoutMs is cut, and the close still completes', async (t) => {
  const app = await startAppBackend(t);
  const wsBackend = await startWsBackend(t);
  const gw = await startGateway(t, {
    overrides: {
      server: { shutdownTimeoutMs: 500 },
      routes: [{ prefix: '/app', targets: [app.backend.url] }, { prefix: '/ws', targets: [wsBackend.url], websocket: true }],
    },
  });
  const { accessToken } = await signIn(gw);
  // A request the backend holds past the deadline.
  const slow = get(`${gw.url}/app/slow`, accessToken).then(() => 'answered', (err: NodeJS.ErrnoException) => err.code);
  await app.slowArrived;
  // A WebSocket client that reads the gateway's close frame and never answers it.
  const { port } = new URL(gw.url);
  const socket = connect(Number(port), '127.0.0.1');
  t.after(() => socket.destroy());
  let received = Buffer.alloc(0);
  const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('data', (chunk: Buffer) => { received = Buffer.concat([received, chunk]); });
  socket.on('error', () => {});
  socket.write(handshakeText(gw.url, '/ws/mute', { headers: [['Authorization', `Bearer ${accessToken}`]] }));
  await eventually(() => received.includes('\r\n\r\n'), 'the handshake was answered');
  assert.match(received.toString('latin1'), /^HTTP\/1\.1 101 /);
  const headLength = received.indexOf('\r\n\r\n') + 4;
  await eventually(() => wsBackend.sockets.length === 1, 'the backend has its side');
  const backendCode = new Promise<number>((resolve) => wsBackend.sockets[0]!.once('close', (code: number) => resolve(code)));

  await gw.close();
  await ended;
  assert.equal(await slow, 'ECONNRESET', 'the held request was cut');
  const reason = Buffer.from('gateway shutting down');
  const expected = Buffer.concat([Buffer.from([0x88, 2 + reason.length, 0x03, 0xe9]), reason]);
  assert.deepEqual(received.subarray(headLength), expected, 'one unmasked close frame, FIN set, code 1001, then nothing');
  assert.equal(logged(gw, 'shutdown deadline passed: cut the connections still open').length, 1);
  assert.equal(await backendCode, 1001, 'the backend, which answers, got its close frame and closed cleanly');
});

test('a connection that never sent a byte (a browser\'s opened ahead of need) is cut at close, not waited on until the deadline', { timeout: 60_000 }, async (t) => {
  // The deadline is an hour: were the unused connection waited on, the close would not end
  // within the test's time.
  const gw = await startGateway(t, { overrides: { server: { shutdownTimeoutMs: 3_600_000 } } });
  const { port } = new URL(gw.url);
  const unused = connect(Number(port), '127.0.0.1');
  t.after(() => unused.destroy());
  unused.on('error', () => {});
  await new Promise<void>((resolve) => unused.once('connect', () => resolve()));
  const cut = new Promise<void>((resolve) => unused.once('close', () => resolve()));
  await gw.close();
  await cut;
  assert.equal(logged(gw, 'shutdown deadline passed: cut the connections still open').length, 0);
});

test('the draining answer of /readyz is the one the OpenAPI document describes', async (t) => {
  const gw = await startGateway(t);
  const api = await conformance(gw.url);
  assert.equal((await api.fetch('/readyz')).status, 200);
  gw.services.startDraining();
  const draining = await api.fetch('/readyz');
  assert.deepEqual([draining.status, draining.body], [503, { success: false, message: { status: 'draining', checks: {} } }]);
});

test('stopping closes the gateway\'s Redis connections', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const raw = await rawRedisClient(t, redis);
  const others = async () => {
    const id = await raw.client('ID');
    return String(await raw.client('LIST')).trim().split('\n').filter((line) => !line.startsWith(`id=${id} `)).length;
  };
  const gw = await startGateway(t, { overrides: { redis: { url: redis.url } } });
  await signIn(gw);
  assert.ok(await others() > 0, 'the gateway is connected');
  await gw.close();
  // Redis learns of each close as its connection ends: asked until then, bounded.
  const deadline = Date.now() + 10_000;
  let left = await others();
  while (left > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    left = await others();
  }
  assert.equal(left, 0, 'no connection of the gateway is left open on Redis');
});
