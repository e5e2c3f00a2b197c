/**
 * Tracing (src/telemetry/tracing.ts, docs/tracing.md) against real parts: gateways (in this
 * process, and real processes for what loads and what a SIGTERM flushes), backends that record
 * the `traceparent` they were sent, and a stand-in for an OpenTelemetry collector: a node:http
 * server that records every OTLP/HTTP JSON export (POST /v1/traces).
 *
 * Spans are read after the gateway has closed: closing flushes them (the batch processor's own
 * timer is 5 s), so what the collector holds then is everything the gateway exported.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { startBackend, type Backend } from '../helpers/backend.js';
import { logged, logLines, startGateway, type TestGateway } from '../helpers/gateway.js';
import { exitWithin, gatewayEnv, LISTENING, startNode, waitForLog, type Child } from '../helpers/process.js';
import { closedPort, onlyRequest } from '../helpers/proxy.js';
import { openClient, startWsBackend, whenClosed } from '../helpers/ws-backend.js';

/** A caller's span, as a trusted proxy in front would name it. */
const CALLER = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331' };
const traceparent = ({ traceId, spanId }: { traceId: string; spanId: string }, flags = '01') => `00-${traceId}-${spanId}-${flags}`;

interface TraceParent {
  traceId: string;
  spanId: string;
  flags: string;
}

function parseTraceparent(value: string | undefined): TraceParent {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value ?? '');
  assert.ok(m, `a version-00 traceparent: ${value}`);
  return { traceId: m[1]!, spanId: m[2]!, flags: m[3]! };
}

/** The one traceparent a backend request carried. */
function sentTraceparent(headers: Record<string, string[]>): TraceParent {
  assert.equal(headers.traceparent?.length, 1, `one traceparent: ${JSON.stringify(headers.traceparent)}`);
  return parseTraceparent(headers.traceparent![0]);
}

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  status: { code?: number };
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

interface Collector {
  url: string;
  /** Every request that reached it. */
  posts: { method: string; path: string; contentType: string | undefined; body: any }[];
  /** Every span of every export, flattened. */
  spans(): ExportedSpan[];
}

/** OTLP's JSON attribute list as a plain object. */
function attributesOf(list: { key: string; value: Record<string, unknown> }[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list) {
    const [kind, v] = Object.entries(value)[0]!;
    out[key] = kind === 'intValue' ? Number(v) : v;
  }
  return out;
}

async function startCollector(t: TestContext): Promise<Collector> {
  const posts: Collector['posts'] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = { unparsed: text };
      }
      posts.push({ method: req.method ?? '', path: req.url ?? '', contentType: req.headers['content-type'], body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  }));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    posts,
    spans: () => posts.flatMap(({ body }) => (body.resourceSpans ?? []).flatMap((rs: any) => {
      const resource = attributesOf(rs.resource?.attributes);
      return (rs.scopeSpans ?? []).flatMap((ss: any) => (ss.spans ?? []).map((span: any) => ({ ...span, attributes: attributesOf(span.attributes), resource })));
    })),
  };
}

function tracedGateway(t: TestContext, collector: Collector, overrides: Record<string, unknown>): Promise<TestGateway> {
  const { tracing, ...rest } = overrides;
  return startGateway(t, { overrides: { ...rest, tracing: { otlpEndpoint: collector.url, ...(tracing as object | undefined) } } });
}

/** The one exported span with this id. */
function spanWithId(collector: Collector, spanId: string): ExportedSpan {
  const found = collector.spans().filter((span) => span.spanId === spanId);
  assert.equal(found.length, 1, `one span ${spanId} among ${JSON.stringify(collector.spans().map((s) => [s.name, s.spanId]))}`);
  return found[0]!;
}

/** The one exported span with this name. */
function spanNamed(collector: Collector, name: string): ExportedSpan {
  const found = collector.spans().filter((span) => span.name === name);
  assert.equal(found.length, 1, `one span "${name}" among ${JSON.stringify(collector.spans().map((s) => s.name))}`);
  return found[0]!;
}

test('a trusted proxy\'s trace goes on through the gateway: its span is the gateway span\'s parent, and the gateway span the backend\'s', async (t) => {
  const collector = await startCollector(t);
  const backend = await startBackend(t);
  const gw = await tracedGateway(t, collector, {
    routes: [{ name: 'orders', prefix: '/orders', targets: [backend.url], auth: 'public' }],
    proxy: { trustedProxies: ['127.0.0.1'] },
    tracing: { serviceName: 'edge-gateway' },
  });

  const res = await fetch(`${gw.url}/orders/42?card=4111111111111111`, { headers: { traceparent: traceparent(CALLER), tracestate: 'vendor=opaque' } });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  const requestId = res.headers.get('x-request-id');

  const received = onlyRequest(backend);
  const sent = sentTraceparent(received.headers);
  assert.equal(sent.traceId, CALLER.traceId, 'the backend is in the caller\'s trace');
  assert.notEqual(sent.spanId, CALLER.spanId, 'its parent is the gateway\'s span, not the caller\'s');
  assert.equal(sent.flags, '01', 'sampled, as the caller decided');
  assert.deepEqual(received.headers.tracestate, ['vendor=opaque'], 'the trusted proxy\'s tracestate goes on');

  const started = logged(gw, 'tracing on: spans go to the collector');
  assert.deepEqual(started.map(({ exportTo, serviceName, sampleRatio }) => ({ exportTo, serviceName, sampleRatio })), [{ exportTo: `${collector.url}/v1/traces`, serviceName: 'edge-gateway', sampleRatio: 1 }]);

  await gw.close();
  assert.ok(collector.posts.length > 0, 'spans were exported');
  for (const post of collector.posts) {
    assert.deepEqual([post.method, post.path, post.contentType], ['POST', '/v1/traces', 'application/json']);
  }
  const span = spanWithId(collector, sent.spanId);
  assert.equal(span.traceId, CALLER.traceId);
  assert.equal(span.parentSpanId, CALLER.spanId);
  assert.equal(span.traceState, 'vendor=opaque');
  assert.equal(span.name, 'GET /orders');
  assert.equal(span.kind, 2, 'a server span');
  assert.equal(span.resource['service.name'], 'edge-gateway');
  const a = span.attributes;
  assert.equal(a['http.request.method'], 'GET');
  assert.equal(a['http.response.status_code'], 200);
  assert.equal(a['http.route'], '/orders');
  assert.equal(a['gateway.route'], 'orders');
  assert.equal(a['url.path'], '/orders/42', 'the path, never the query');
  assert.equal(a['gateway.request_id'], requestId, 'the id the caller got and the log holds');
  assert.equal(a['gateway.upstream.target'], backend.url);
  assert.equal(typeof a['gateway.upstream.duration_ms'], 'number');
  assert.ok((a['gateway.upstream.duration_ms'] as number) >= 0);
  assert.ok(!JSON.stringify(collector.posts).includes('4111111111111111'), 'the query string is exported nowhere');
});

test('from a peer that is not a trusted proxy, traceparent and tracestate are ignored: a new trace starts, by the gateway\'s own sampling', async (t) => {
  const collector = await startCollector(t);
  const backend = await startBackend(t);
  const gw = await tracedGateway(t, collector, {
    routes: [{ name: 'orders', prefix: '/orders', targets: [backend.url], auth: 'public' }],
    // A proxy is trusted, just not this client.
    proxy: { trustedProxies: ['10.9.8.7'] },
  });

  // Unsampled: if it were believed, nothing would be recorded.
  const res = await fetch(`${gw.url}/orders`, { headers: { traceparent: traceparent(CALLER, '00'), tracestate: 'attacker=1' } });
  assert.equal(res.status, 200);
  await res.arrayBuffer();

  const received = onlyRequest(backend);
  const sent = sentTraceparent(received.headers);
  assert.notEqual(sent.traceId, CALLER.traceId, 'a trace of the gateway\'s own');
  assert.equal(sent.flags, '01', 'sampled by the gateway\'s ratio (1), not the caller\'s flag');
  assert.equal(received.headers.tracestate, undefined, 'the caller\'s tracestate is dropped');

  await gw.close();
  const span = spanWithId(collector, sent.spanId);
  assert.equal(span.traceId, sent.traceId);
  assert.ok(span.parentSpanId === undefined || span.parentSpanId === '', `a root span: ${span.parentSpanId}`);
  assert.ok(!span.traceState, 'no tracestate of the caller\'s');
  assert.ok(!JSON.stringify(collector.posts).includes(CALLER.traceId), 'the caller\'s ids are exported nowhere');
});

test('a reload that changes the trusted proxies changes whose trace context is believed', async (t) => {
  const collector = await startCollector(t);
  const backend = await startBackend(t);
  const gw = await tracedGateway(t, collector, {
    routes: [{ name: 'orders', prefix: '/orders', targets: [backend.url], auth: 'public' }],
    proxy: { trustedProxies: ['10.9.8.7'] },
  });
  const call = async () => {
    const res = await fetch(`${gw.url}/orders`, { headers: { traceparent: traceparent(CALLER) } });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    return sentTraceparent(backend.received.at(-1)!.headers);
  };

  assert.notEqual((await call()).traceId, CALLER.traceId, 'not trusted yet: a new trace');
  const { config } = gw.services;
  gw.services.reload({ ...config, proxy: { ...config.proxy, trustedProxies: ['127.0.0.1'] } });
  const after = await call();
  assert.equal(after.traceId, CALLER.traceId, 'trusted since the reload: the caller\'s trace goes on');

  await gw.close();
  assert.equal(spanWithId(collector, after.spanId).parentSpanId, CALLER.spanId);
});

test('sampling is parent-based: a trusted parent\'s decision stands, and new traces are kept at sampleRatio', async (t) => {
  const collector = await startCollector(t);
  const backend = await startBackend(t);
  const gw = await tracedGateway(t, collector, {
    routes: [{ name: 'orders', prefix: '/orders', targets: [backend.url], auth: 'public' }],
    proxy: { trustedProxies: ['127.0.0.1'] },
    tracing: { sampleRatio: 0 },
  });
  const unsampledCaller = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' };
  const call = async (headers: Record<string, string>) => {
    const res = await fetch(`${gw.url}/orders`, { headers });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    return sentTraceparent(backend.received.at(-1)!.headers);
  };

  const sampled = await call({ traceparent: traceparent(CALLER, '01') });
  assert.deepEqual([sampled.traceId, sampled.flags], [CALLER.traceId, '01'], 'recorded: the parent was');
  const fresh = await call({});
  assert.notEqual(fresh.traceId, CALLER.traceId);
  assert.equal(fresh.flags, '00', 'a new trace at ratio 0 is not recorded, and the backend is told so');
  const unsampled = await call({ traceparent: traceparent(unsampledCaller, '00') });
  assert.deepEqual([unsampled.traceId, unsampled.flags], [unsampledCaller.traceId, '00'], 'not recorded: the parent was not');

  await gw.close();
  assert.deepEqual(collector.spans().map((span) => [span.traceId, span.spanId]), [[CALLER.traceId, sampled.spanId]], 'only the sampled parent\'s span is exported');
});

test('the gateway\'s own answers get spans too: own routes by their pattern, unmatched paths never by the path typed, backend failures as errors', async (t) => {
  const collector = await startCollector(t);
  const down = await closedPort();
  const gw = await tracedGateway(t, collector, {
    routes: [{ name: 'down', prefix: '/down', targets: [`http://127.0.0.1:${down}`], auth: 'public' }],
  });

  const health = await fetch(`${gw.url}/healthz`);
  assert.equal(health.status, 200);
  await health.arrayBuffer();
  const account = await fetch(`${gw.url}/owner/v1/accounts/acct_private_42`);
  assert.equal(account.status, 401);
  await account.arrayBuffer();
  const missing = await fetch(`${gw.url}/nothing/sk_live_pasted_secret`);
  assert.equal(missing.status, 404);
  await missing.arrayBuffer();
  const failed = await fetch(`${gw.url}/down/x`);
  assert.equal(failed.status, 502);
  await failed.arrayBuffer();

  await gw.close();
  const own = spanNamed(collector, 'GET /healthz');
  assert.equal(own.attributes['http.response.status_code'], 200);
  assert.equal(own.attributes['http.route'], '/healthz');
  assert.equal(own.attributes['gateway.route'], undefined, 'not a configured route');
  assert.equal(own.attributes['gateway.upstream.target'], undefined, 'no backend');
  assert.equal(own.attributes['gateway.request_id'], health.headers.get('x-request-id'));

  const pattern = spanNamed(collector, 'GET /owner/v1/accounts/:accountId');
  assert.equal(pattern.attributes['http.response.status_code'], 401);
  assert.equal(pattern.attributes['url.path'], '/owner/v1/accounts/:accountId');
  assert.ok(!JSON.stringify(collector.posts).includes('acct_private_42'), 'an own route is named by its pattern, never its ids');

  const unmatched = spanNamed(collector, 'GET');
  assert.equal(unmatched.attributes['http.response.status_code'], 404);
  assert.equal(unmatched.attributes['url.path'], '(unmatched)');
  assert.equal(unmatched.attributes['http.route'], undefined);
  assert.ok(!JSON.stringify(collector.posts).includes('sk_live_pasted_secret'), 'the typed path is exported nowhere');
  assert.notEqual(unmatched.status.code, 2, 'a 4xx is the client\'s, not an error of the server span');

  const error = spanNamed(collector, 'GET /down');
  assert.equal(error.attributes['http.response.status_code'], 502);
  assert.equal(error.status.code, 2, 'status ERROR');
  assert.equal(error.attributes['error.type'], '502');
  assert.equal(error.attributes['gateway.upstream.target'], `http://127.0.0.1:${down}`, 'the backend it tried');
  assert.equal(error.attributes['gateway.upstream.duration_ms'], undefined, 'it never answered');
});

test('a WebSocket handshake gets a span, ended by its answer, and the backend gets it as the handshake\'s parent', async (t) => {
  const collector = await startCollector(t);
  const backend = await startWsBackend(t);
  const gw = await tracedGateway(t, collector, {
    routes: [{ name: 'live', prefix: '/live', targets: [backend.url], websocket: true, auth: 'public' }],
    proxy: { trustedProxies: ['127.0.0.1'] },
  });

  const ws = await openClient(gw.url, '/live/feed', { headers: { traceparent: traceparent(CALLER) } });
  ws.close();
  await whenClosed(ws);
  assert.equal(backend.handshakes.length, 1);
  const sent = sentTraceparent(backend.handshakes[0]!.headers);
  assert.equal(sent.traceId, CALLER.traceId);
  assert.notEqual(sent.spanId, CALLER.spanId);

  await gw.close();
  const span = spanWithId(collector, sent.spanId);
  assert.equal(span.parentSpanId, CALLER.spanId);
  assert.equal(span.name, 'GET /live');
  assert.equal(span.attributes['http.response.status_code'], 101);
  assert.equal(span.attributes['gateway.route'], 'live');
  assert.equal(span.attributes['gateway.upstream.target'], backend.url);
  assert.equal(typeof span.attributes['gateway.upstream.duration_ms'], 'number');
});

test('tracing off: a trusted proxy\'s trace context passes to the backend unchanged, anyone else\'s is removed', async (t) => {
  const backend = await startBackend(t);
  const routes = [{ prefix: '/orders', targets: [backend.url], auth: 'public' }];
  const trusting = await startGateway(t, { overrides: { routes, proxy: { trustedProxies: ['127.0.0.1'] } } });
  const other = await startGateway(t, { overrides: { routes, proxy: { trustedProxies: ['10.9.8.7'] } } });
  assert.equal(trusting.services.tracing, undefined, 'no endpoint: no tracing at all');
  const headers = { traceparent: traceparent(CALLER), tracestate: 'vendor=opaque' };

  const passed = await fetch(`${trusting.url}/orders`, { headers });
  assert.equal(passed.status, 200);
  await passed.arrayBuffer();
  assert.deepEqual(backend.received.at(-1)!.headers.traceparent, [headers.traceparent], 'as it came');
  assert.deepEqual(backend.received.at(-1)!.headers.tracestate, [headers.tracestate]);

  const removed = await fetch(`${other.url}/orders`, { headers });
  assert.equal(removed.status, 200);
  await removed.arrayBuffer();
  assert.equal(backend.received.at(-1)!.headers.traceparent, undefined);
  assert.equal(backend.received.at(-1)!.headers.tracestate, undefined);
  assert.equal(backend.received.length, 2);
});

test('a collector that is away costs the requests nothing: they are served, the loss is a warning, and closing is bounded', async (t) => {
  const backend = await startBackend(t);
  const away = await closedPort();
  const gw = await startGateway(t, {
    overrides: {
      routes: [{ prefix: '/orders', targets: [backend.url], auth: 'public' }],
      tracing: { otlpEndpoint: `http://127.0.0.1:${away}` },
      server: { shutdownTimeoutMs: 500 },
    },
  });

  const res = await fetch(`${gw.url}/orders`);
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  await gw.close();
  const warnings = logLines(gw).filter((line) => line.level === 40 && String(line.msg).startsWith('tracing:'));
  assert.ok(warnings.length > 0, `a tracing warning: ${gw.logs.join('\n')}`);
  assert.ok(logLines(gw).every((line) => (line.level as number) < 50), 'nothing logged as an error');
});

test('the tracing settings are checked: the endpoint is an http(s) base URL without credentials, the ratio within 0 … 1', () => {
  const config = loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SERVICE_NAME: 'gw-eu', TRACING_SAMPLE_RATIO: '0.25' } });
  assert.deepEqual(config.tracing, { otlpEndpoint: 'http://collector:4318/', serviceName: 'gw-eu', sampleRatio: 0.25 });
  assert.deepEqual(loadConfig({ env: {} }).tracing, { serviceName: 'auth-gateway', sampleRatio: 1 }, 'off by default');
  for (const env of [
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317' },
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:secret@collector:4318' },
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/?token=x' },
    { TRACING_SAMPLE_RATIO: '1.5' },
    { TRACING_SAMPLE_RATIO: '-0.1' },
  ]) {
    assert.throws(() => loadConfig({ env }), (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.startsWith('tracing.')), JSON.stringify(env));
  }
});

/**
 * Node's module resolution, watched from inside the gateway process: every module of an
 * @opentelemetry package it resolves is written to stderr. (prom-client itself loads
 * @opentelemetry/api, the API without an SDK, whatever tracing is set to.)
 */
const WATCH_OTEL_MODULES = 'data:text/javascript,' + encodeURIComponent(
  'import { registerHooks } from "node:module";'
  + 'registerHooks({ resolve(specifier, context, next) { const found = next(specifier, context);'
  + ' const m = /\\/node_modules\\/@opentelemetry\\/([^/]+)\\//.exec(found.url); if (m) process.stderr.write(`otel-module ${m[1]}\\n`); return found; } });',
);

function otelPackagesLoaded(child: Child): Set<string> {
  return new Set([...child.stderr().matchAll(/^otel-module (\S+)$/gm)].map((m) => m[1]!));
}

async function proxiedThrough(t: TestContext, env: Record<string, string>, backend: Backend): Promise<Child> {
  const child = startNode(t, ['--import', WATCH_OTEL_MODULES, 'src/main.ts'], {
    env: gatewayEnv({
      PORT: '0', HOST: '127.0.0.1',
      ROUTES: JSON.stringify([{ name: 'orders', prefix: '/orders', targets: [backend.url], auth: 'public' }]),
      TRUSTED_PROXIES: '["127.0.0.1"]',
      ...env,
    }),
  });
  const listening = await waitForLog(child, (line) => LISTENING(line) && String(line.msg).startsWith('gateway listening'));
  const res = await fetch(`${listening.url as string}/orders`, { headers: { traceparent: traceparent(CALLER) } });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  assert.ok(child.process.kill('SIGTERM'));
  assert.deepEqual(await exitWithin(child), { code: 0, signal: null }, child.stderr());
  return child;
}

test('a gateway process without an endpoint loads no part of the SDK and exports nothing; with one, it flushes its spans when stopped', async (t) => {
  const collector = await startCollector(t);
  const backend = await startBackend(t);

  // The SDK's own variable alone does not turn tracing on: only the gateway's settings do.
  const off = await proxiedThrough(t, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces` }, backend);
  assert.deepEqual([...otelPackagesLoaded(off)].filter((name) => name !== 'api'), [], `only prom-client's API: ${[...otelPackagesLoaded(off)]}`);
  assert.deepEqual(backend.received.at(-1)!.headers.traceparent, [traceparent(CALLER)], 'the trusted proxy\'s traceparent passed as it came');
  assert.equal(collector.posts.length, 0, 'nothing exported');

  const on = await proxiedThrough(t, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'gw-process' }, backend);
  const loaded = otelPackagesLoaded(on);
  assert.ok(loaded.has('sdk-trace') && loaded.has('exporter-trace-otlp-http'), `the SDK loaded: ${[...loaded]}`);
  const sent = sentTraceparent(backend.received.at(-1)!.headers);
  assert.equal(sent.traceId, CALLER.traceId);
  // The process has exited: the span reached the collector on the way out.
  const span = spanWithId(collector, sent.spanId);
  assert.equal(span.parentSpanId, CALLER.spanId);
  assert.equal(span.resource['service.name'], 'gw-process');
  assert.equal(span.attributes['gateway.route'], 'orders');
});
