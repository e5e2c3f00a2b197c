/**
 * One exchange per request (src/http/exchange.ts): every kind of request the gateway answers
 * (its own routes, a proxied route, a CORS preflight on either, a WebSocket handshake upgraded
 * or refused, and the requests refused before any route: a bad head, 413, 431, request
 * smuggling, 408, 417, CONNECT) gets exactly one access line, exactly one observation of
 * gateway_request_duration_seconds (with its status class) and exactly one span.
 *
 * Each kind is checked as it is answered (its line awaited, then the deltas), and every kind
 * again once the gateway has closed (so a second record written late cannot hide): lines,
 * observations and spans are as many as the requests made, one each per request id.
 *
 * Spans go to the SDK's in-memory exporter, handed over as each ends (telemetry/tracing.ts's
 * `exporter`); the gateway is assembled here as test/helpers/gateway.ts does, with that tracing
 * put in place of the (off) configured one before the listeners are built.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { loadConfig } from '../../src/config/load.js';
import { startServer } from '../../src/server.js';
import { createServices, type Services } from '../../src/services.js';
import { createLogger } from '../../src/telemetry/log.js';
import { createTracing } from '../../src/telemetry/tracing.js';
import { startBackend } from '../helpers/backend.js';
import { ManualClock } from '../helpers/clock.js';
import { rawExchange } from '../helpers/raw-http.js';
import { handshakeText, openClient, rawExchange as rawHandshake, whenClosed, startWsBackend } from '../helpers/ws-backend.js';
import { demoSaveFile } from '../helpers/process.js';

const ORIGIN = 'https://app.example';

/** The SDK's in-memory exporter, keeping its spans when the gateway shuts tracing down (its own shutdown clears them). */
class KeptSpans extends InMemorySpanExporter {
  override shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

interface Recorded {
  url: string;
  services: Services;
  /** Every access line ('request') written so far. */
  lines: Record<string, unknown>[];
  exporter: InMemorySpanExporter;
  /** Resolves once the access line of `requestId` is written; fails when none is within 10 s (a hang guard: none may ever come). */
  lineOf(requestId: string): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

async function startRecordedGateway(t: TestContext, overrides: Record<string, unknown>): Promise<Recorded> {
  const config = loadConfig({
    env: {},
    overrides: {
      server: { host: '127.0.0.1', port: 0 },
      log: { level: 'info' },
      limits: { mode: 'off' },
      owner: { passwordHashNice: 0 },
      tokens: { memoryStoreMaxTokens: 10_000 },
      data: { demoSaveFile: demoSaveFile() },
      ...overrides,
    },
  });
  const lines: Record<string, unknown>[] = [];
  const waiting = new Map<string, () => void>();
  const log = createLogger(config.log.level, {
    write(text: string) {
      const line = JSON.parse(text) as Record<string, unknown>;
      if (line.msg !== 'request') return;
      lines.push(line);
      waiting.get(String(line.requestId))?.();
    },
  });
  const services = createServices(config, { log, clock: new ManualClock(Date.now()) });
  const exporter = new KeptSpans();
  const tracing = createTracing({ serviceName: 'exchange-test', sampleRatio: 1 }, { log, isTrustedPeer: () => false, flushTimeoutMs: 1000, exporter });
  assert.ok(tracing !== undefined);
  await tracing.ready;
  services.tracing = tracing;
  const running = await startServer(services);
  const close = async () => {
    await running.close();
    await tracing.shutdown();
  };
  t.after(close);
  return {
    url: running.url,
    services,
    lines,
    exporter,
    lineOf(requestId) {
      const found = lines.find((line) => line.requestId === requestId);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no access line for ${requestId}`)), 10_000);
        waiting.set(requestId, () => {
          clearTimeout(timer);
          waiting.delete(requestId);
          resolve(lines.find((line) => line.requestId === requestId)!);
        });
      });
    },
    close,
  };
}

/** gateway_request_duration_seconds_count by "route method status_class". */
async function requestCounts(gw: Recorded): Promise<Map<string, number>> {
  const metric = gw.services.metrics.registry.getSingleMetric('gateway_request_duration_seconds');
  assert.ok(metric !== undefined);
  const counts = new Map<string, number>();
  // A histogram's values are its buckets, sum and count, each named.
  const values = (await metric.get()).values as { metricName?: string; labels: Record<string, string | number>; value: number }[];
  for (const { metricName, labels, value } of values) {
    if (metricName === 'gateway_request_duration_seconds_count') counts.set(`${labels.route} ${labels.method} ${labels.status_class}`, value);
  }
  return counts;
}

/** What grew between two counts, by label set. */
function grown(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of after) {
    const delta = value - (before.get(key) ?? 0);
    if (delta !== 0) out[key] = delta;
  }
  return out;
}

function spansOf(gw: Recorded, requestId: string) {
  return gw.exporter.getFinishedSpans().filter((span) => span.attributes['gateway.request_id'] === requestId);
}

interface Kind {
  name: string;
  /** Sends the request; resolves with its request id (the one sent, or the one the answer names). */
  send(gw: Recorded, requestId: string): Promise<string>;
  status: number;
  /** The observation's labels: "route method status_class". */
  observed: string;
  websocket?: boolean;
}

/** Sends `bytes` over a connection of their own, checks the answer's status, and gives the request id the answer names. */
async function raw(gw: Recorded, bytes: string, status: number): Promise<string> {
  const res = await rawExchange(gw.url, bytes);
  assert.equal(res.status, status, res.body.toString());
  const id = res.get('x-request-id');
  assert.ok(id !== undefined, 'the answer names its request id');
  return id;
}

async function fetched(gw: Recorded, path: string, requestId: string, status: number, init: RequestInit = {}): Promise<string> {
  const res = await fetch(`${gw.url}${path}`, { ...init, headers: { 'x-request-id': requestId, ...(init.headers as Record<string, string>) } });
  await res.arrayBuffer();
  assert.equal(res.status, status);
  assert.equal(res.headers.get('x-request-id'), requestId);
  return requestId;
}

const preflight = { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': 'POST' } };

const KINDS: Kind[] = [
  { name: 'own route, 200', status: 200, observed: '/healthz GET 2xx', send: (gw, id) => fetched(gw, '/healthz', id, 200) },
  { name: 'own, nothing matched: 404', status: 404, observed: '(unmatched) GET 4xx', send: (gw, id) => fetched(gw, '/nothing/here', id, 404) },
  {
    name: 'refused by the edge, bad head (no Host): 400', status: 400, observed: '(unmatched) GET 4xx',
    send: (gw, id) => raw(gw, `GET /healthz HTTP/1.1\r\nX-Request-Id: ${id}\r\n\r\n`, 400),
  },
  {
    name: 'body over the limit: 413', status: 413, observed: '/api/signin POST 4xx',
    send: (gw, id) => raw(gw, `POST /api/signin HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`, 413),
  },
  {
    name: 'head too large, refused by Node: 431', status: 431, observed: '(unmatched) other 4xx',
    send: (gw) => raw(gw, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431),
  },
  {
    name: 'smuggling, Content-Length with Transfer-Encoding, refused by Node: 400', status: 400, observed: '(unmatched) other 4xx',
    send: (gw) => raw(gw, 'POST /orders/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400),
  },
  {
    name: 'an Expect the gateway does not meet: 417', status: 417, observed: '(unmatched) GET 4xx',
    send: (gw, id) => raw(gw, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\nExpect: teapot\r\n\r\n`, 417),
  },
  {
    name: 'CONNECT: 405', status: 405, observed: '(unmatched) CONNECT 4xx',
    send: (gw, id) => raw(gw, `CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nX-Request-Id: ${id}\r\n\r\n`, 405),
  },
  { name: 'proxied, 200', status: 200, observed: 'orders GET 2xx', send: (gw, id) => fetched(gw, '/orders/1?card=4111', id, 200) },
  { name: 'proxied, refused without a token: 401', status: 401, observed: 'secure GET 4xx', send: (gw, id) => fetched(gw, '/secure/1', id, 401) },
  { name: 'CORS preflight, own route: 204', status: 204, observed: '(unmatched) OPTIONS 2xx', send: (gw, id) => fetched(gw, '/api/signin', id, 204, preflight) },
  { name: 'CORS preflight, proxied route: 204', status: 204, observed: 'orders OPTIONS 2xx', send: (gw, id) => fetched(gw, '/orders/1', id, 204, preflight) },
  {
    name: 'WebSocket handshake upgraded: 101', status: 101, observed: 'live GET 1xx', websocket: true,
    async send(gw, id) {
      const ws = await openClient(gw.url, '/live/feed', { headers: { 'x-request-id': id } });
      ws.close();
      await whenClosed(ws);
      return id;
    },
  },
  {
    name: 'WebSocket handshake refused without a token: 401', status: 401, observed: 'ws-secure GET 4xx', websocket: true,
    async send(gw, id) {
      const { raw: answer } = await rawHandshake(gw.url, handshakeText(gw.url, '/ws-secure/feed', { headers: [['X-Request-Id', id]] }));
      assert.ok(answer.startsWith('HTTP/1.1 401 '), answer.slice(0, 100));
      return id;
    },
  },
];

/** Sends one request of a kind and checks its one line, one observation and one span. */
async function checkOnce(gw: Recorded, kind: Pick<Kind, 'send' | 'status' | 'observed' | 'websocket'>, sent: string): Promise<string> {
  const before = await requestCounts(gw);
  const spansBefore = gw.exporter.getFinishedSpans().length;
  const requestId = await kind.send(gw, sent);
  const line = await gw.lineOf(requestId);

  assert.equal(gw.lines.filter((l) => l.requestId === requestId).length, 1, 'one access line');
  assert.equal(line.status, kind.status);
  assert.equal(line.websocket, kind.websocket);
  assert.deepEqual(grown(before, await requestCounts(gw)), { [kind.observed]: 1 }, 'one observation, with its labels');
  const spans = spansOf(gw, requestId);
  assert.equal(spans.length, 1, 'one span');
  assert.equal(spans[0]!.attributes['http.response.status_code'], kind.status);
  assert.equal(gw.exporter.getFinishedSpans().length, spansBefore + 1, 'no other span');
  return requestId;
}

test('every kind of request gets one access line, one request observation and one span', async (t) => {
  const backend = await startBackend(t);
  const wsBackend = await startWsBackend(t);
  const gw = await startRecordedGateway(t, {
    cors: { allowedOrigins: [ORIGIN] },
    routes: [
      { name: 'orders', prefix: '/orders', targets: [backend.url], auth: 'public' },
      { name: 'secure', prefix: '/secure', targets: [backend.url] },
      { name: 'live', prefix: '/live', targets: [wsBackend.url], websocket: true, auth: 'public' },
      { name: 'ws-secure', prefix: '/ws-secure', targets: [wsBackend.url], websocket: true },
    ],
  });

  const ids: string[] = [];
  for (const kind of KINDS) {
    await t.test(kind.name, async () => {
      ids.push(await checkOnce(gw, kind, `exchange-${ids.length}`));
    });
  }

  await t.test('once the gateway has closed: still one line, one observation and one span per request', async () => {
    assert.equal(ids.length, KINDS.length);
    await gw.close();
    for (const id of ids) {
      assert.equal(gw.lines.filter((l) => l.requestId === id).length, 1, `one line for ${id}`);
      assert.equal(spansOf(gw, id).length, 1, `one span for ${id}`);
    }
    const total = [...(await requestCounts(gw)).values()].reduce((sum, n) => sum + n, 0);
    assert.deepEqual({ lines: gw.lines.length, observations: total, spans: gw.exporter.getFinishedSpans().length }, { lines: ids.length, observations: ids.length, spans: ids.length });
    assert.equal(wsBackend.handshakes.length, 1, 'only the upgraded handshake reached the backend');
  });
});

test('a request whose head does not arrive in time (408) gets one line, one observation and one span', async (t) => {
  const gw = await startRecordedGateway(t, { server: { host: '127.0.0.1', port: 0, requestTimeoutMs: 1000 } });
  const kind = {
    status: 408, observed: '(unmatched) other 4xx',
    // The head never ends: Node answers it once requestTimeoutMs has passed.
    send: (g: Recorded) => raw(g, 'GET /healthz HTTP/1.1\r\nHost: x\r\n', 408),
  };
  const id = await checkOnce(gw, kind, '');
  await gw.close();
  assert.deepEqual({ lines: gw.lines.map((l) => l.requestId), spans: gw.exporter.getFinishedSpans().length }, { lines: [id], spans: 1 });
});
