/**
 * Tracing: W3C Trace Context (`traceparent`, `tracestate`) and one span per request, exported
 * to an OTLP/HTTP collector (JSON) by OpenTelemetry's SDK. docs/tracing.md is the operator's
 * view; test/ops/tracing.test.ts holds every rule below against a real gateway, backend and
 * collector stand-in.
 *
 * Off unless `tracing.otlpEndpoint` is set, and then free: the SDK is imported (dynamically)
 * only when tracing is on, so a gateway without a collector never loads a module of it, and a
 * request costs one check that `services.tracing` is undefined.
 *
 * Whom to believe: an incoming `traceparent` names the caller's span as the parent of ours and
 * carries its sampling decision. Anyone on the internet could use it to attach our spans to a
 * trace of theirs, or to have every request recorded whatever the sample ratio. So it is read
 * only from the trusted proxies (`proxy.trustedProxies`, as the forwarding headers are); from
 * any other peer it is ignored, with its `tracestate`, and a new trace starts. Either way the
 * backend gets a `traceparent` naming the gateway's span (proxy/headers.ts asks `inject`).
 *
 * No global state of the OpenTelemetry API on the request path: no context manager (a request's
 * span is found by its request object, never by async context), no global tracer provider (two
 * gateways in one process, as in the tests, keep their spans apart). The one exception is the
 * SDK's report of failed exports, which goes through process-wide hooks: the last gateway
 * started logs them.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Context, Span, Tracer } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { Logger } from './log.js';
import type { Upstream } from './upstream.js';

export interface TracingSettings {
  /** The collector's base URL; undefined: tracing off. */
  otlpEndpoint?: string | undefined;
  serviceName: string;
  /** Share of new traces recorded; a trusted parent's own decision is kept (parent-based). */
  sampleRatio: number;
}

/** What a finished request tells its span (the same facts as its access-log line). */
export interface SpanOutcome {
  status: number;
  requestId: string | undefined;
  /** The path as the access log writes it (normalised, never the query). */
  path: string;
  /** The matched template (`http.route`): a proxied route's prefix or an own route's pattern. */
  template?: string | undefined;
  /** A proxied route's configured name. */
  route?: string | undefined;
  /** The backend side of a proxied request (its last attempt), when a backend was tried. */
  upstream?: Upstream | undefined;
}

export interface RequestSpan {
  /** Ends the span (once; later calls do nothing). */
  end(outcome: SpanOutcome): void;
}

export interface Tracing {
  /** Resolves once the SDK is loaded; rejects when it cannot be (the gateway must not start). */
  readonly ready: Promise<void>;
  /**
   * Starts the span of a request or WebSocket handshake as it arrives; without `req` for a
   * request refused before its head was read (named `HTTP`, its method `_OTHER`).
   */
  start(req: IncomingMessage | undefined): RequestSpan;
  /** Adds the `traceparent` (and `tracestate`) naming the span of `req` to the headers bound for its backend. */
  inject(req: IncomingMessage, headers: OutgoingHttpHeaders): void;
  /** Ends tracing: the spans still queued are sent, for at most `flushTimeoutMs`. Never rejects. */
  shutdown(): Promise<void>;
}

export interface TracingDeps {
  log: Logger;
  /** True for the address of a peer whose `traceparent` may name our parent (proxy.trustedProxies). */
  isTrustedPeer: (address: string) => boolean;
  /** How long shutdown waits for the collector to take the last spans. */
  flushTimeoutMs: number;
  /**
   * Where spans go instead of the collector, each as it ends (tests: the SDK's
   * InMemorySpanExporter); with it, tracing is on even without `otlpEndpoint`.
   */
  exporter?: SpanExporter | undefined;
}

/** Span attribute names: OpenTelemetry's HTTP semantic conventions, and the gateway's own under `gateway.`. */
const ATTR = {
  method: 'http.request.method',
  status: 'http.response.status_code',
  route: 'http.route',
  path: 'url.path',
  scheme: 'url.scheme',
  errorType: 'error.type',
  routeName: 'gateway.route',
  requestId: 'gateway.request_id',
  upstreamTarget: 'gateway.upstream.target',
  upstreamMs: 'gateway.upstream.duration_ms',
} as const;

const ENDED: RequestSpan = { end() {} };

/** Tracing as configured: undefined while `otlpEndpoint` is unset (and nothing of the SDK is loaded). */
export function createTracing(settings: TracingSettings, deps: TracingDeps): Tracing | undefined {
  const endpoint = settings.otlpEndpoint;
  if (endpoint === undefined && deps.exporter === undefined) return undefined;
  // Until the SDK is loaded nothing is traced: startServer awaits `ready` before it listens.
  let live: Omit<Tracing, 'ready'> | undefined;
  const ready = loadTracing(endpoint, settings, deps).then((loaded) => {
    live = loaded;
  });
  return {
    ready,
    start: (req) => live === undefined ? ENDED : live.start(req),
    inject(req, headers) {
      live?.inject(req, headers);
    },
    async shutdown() {
      await ready.catch(() => {});
      await live?.shutdown();
    },
  };
}

async function loadTracing(endpoint: string | undefined, settings: TracingSettings, deps: TracingDeps): Promise<Omit<Tracing, 'ready'>> {
  const sdk = await loadSdk();
  const { provider, exportTo } = createProvider(sdk, endpoint, settings, deps.exporter);
  deps.log.info({ exportTo, serviceName: settings.serviceName, sampleRatio: settings.sampleRatio }, 'tracing on: spans go to the collector');
  reportSdkFailures(sdk, deps.log);
  const spans = createSpans(sdk, provider.getTracer('auth-gateway'), deps.isTrustedPeer);
  return { ...spans, shutdown: () => shutdownProvider(provider, deps) };
}

type Sdk = Awaited<ReturnType<typeof loadSdk>>;

/** The SDK's modules, imported only here (and so only with tracing on). */
async function loadSdk() {
  const [api, core, sdk, { OTLPTraceExporter }, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  return { api, core, sdk, OTLPTraceExporter, resources };
}

/**
 * The tracer provider: parent-based sampling, spans batched to the collector; or, with
 * `exporter` (tests), handed to it one by one as each ends.
 */
function createProvider({ sdk, OTLPTraceExporter, resources }: Sdk, endpoint: string | undefined, settings: TracingSettings, exporter: SpanExporter | undefined) {
  // The exporter's own env settings (OTEL_EXPORTER_OTLP_HEADERS, _CERTIFICATE, _TIMEOUT,
  // _COMPRESSION …) still apply; the URL is ours. As the spec reads OTEL_EXPORTER_OTLP_ENDPOINT:
  // a base URL, to which the signal's path is appended.
  const url = endpoint === undefined ? undefined : `${endpoint.endsWith('/') ? endpoint : `${endpoint}/`}v1/traces`;
  const processor = exporter !== undefined ? new sdk.SimpleSpanProcessor({ exporter }) : new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }) });
  const provider = new sdk.TracerProvider({
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.name': settings.serviceName })),
    sampler: new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(settings.sampleRatio) }),
    spanProcessors: [processor],
  });
  return { provider, exportTo: exporter !== undefined ? '(in-process exporter)' : url };
}

/**
 * Process-wide hooks (see the top): a collector that refuses or is away is worth a warning,
 * never an error of the request that made the span.
 */
function reportSdkFailures({ api, core }: Sdk, log: Logger): void {
  core.setGlobalErrorHandler((err) => log.warn({ err: { message: describe(err) } }, 'tracing: spans could not be exported'));
  api.diag.setLogger({
    error: (message) => log.warn({ detail: message }, 'tracing: OpenTelemetry error'),
    warn: (message) => log.warn({ detail: message }, 'tracing: OpenTelemetry warning'),
    info: () => {},
    debug: () => {},
    verbose: () => {},
  }, { logLevel: api.DiagLogLevel.WARN, suppressOverrideMessage: true });
}

/** Starting spans, and the context each request's backend is sent on. */
function createSpans({ api, core }: Sdk, tracer: Tracer, isTrustedPeer: (address: string) => boolean): Pick<Tracing, 'start' | 'inject'> {
  const { ROOT_CONTEXT, SpanKind, SpanStatusCode, defaultTextMapGetter, defaultTextMapSetter, trace } = api;
  const propagator = new core.W3CTraceContextPropagator();
  /** The context to send on: each request's own span, set while it runs. */
  const contexts = new WeakMap<IncomingMessage, Context>();

  function start(req: IncomingMessage | undefined): RequestSpan {
    const parent = req !== undefined && isTrustedPeer(req.socket.remoteAddress ?? '')
      ? propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter)
      : ROOT_CONTEXT;
    // Without a request (its head was refused unread), the HTTP conventions' name for a method not known.
    const method = req === undefined ? undefined : req.method ?? 'GET';
    const span: Span = tracer.startSpan(method ?? 'HTTP', { kind: SpanKind.SERVER }, parent);
    if (req !== undefined) contexts.set(req, trace.setSpan(ROOT_CONTEXT, span));
    let ended = false;
    return {
      end(outcome) {
        if (ended) return;
        ended = true;
        if (req !== undefined) contexts.delete(req);
        // A span the sampler dropped records nothing: skip the attributes it would throw away.
        if (span.isRecording()) describeSpan(span, method, outcome);
        span.end();
      },
    };
  }

  function describeSpan(span: Span, method: string | undefined, { status, requestId, path, template, route, upstream }: SpanOutcome): void {
    // "{method} {http.route}", as the HTTP conventions name a server span.
    if (template !== undefined && method !== undefined) span.updateName(`${method} ${template}`);
    span.setAttribute(ATTR.method, method ?? '_OTHER');
    span.setAttribute(ATTR.status, status);
    span.setAttribute(ATTR.path, path);
    span.setAttribute(ATTR.scheme, 'http');
    if (template !== undefined) span.setAttribute(ATTR.route, template);
    if (route !== undefined) span.setAttribute(ATTR.routeName, route);
    if (requestId !== undefined) span.setAttribute(ATTR.requestId, requestId);
    if (upstream !== undefined) {
      span.setAttribute(ATTR.upstreamTarget, upstream.target.origin);
      if (upstream.respondedAt !== 0) span.setAttribute(ATTR.upstreamMs, upstream.respondedAt - upstream.sentAt);
    }
    // A server span is an error for a 5xx only: a 4xx is the client's (HTTP conventions).
    if (status >= 500) {
      span.setAttribute(ATTR.errorType, String(status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
  }

  return {
    start,
    inject(req, headers) {
      const context = contexts.get(req);
      if (context !== undefined) propagator.inject(context, headers, defaultTextMapSetter);
    },
  };
}

/** Sends the spans still queued, for at most `flushTimeoutMs`; never rejects. */
async function shutdownProvider(provider: { shutdown(): Promise<void> }, { log, flushTimeoutMs }: TracingDeps): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), flushTimeoutMs);
  });
  try {
    const outcome = await Promise.race([provider.shutdown().then(() => 'flushed' as const), timeout]);
    if (outcome === 'timeout') log.warn({ timeoutMs: flushTimeoutMs }, 'tracing: the collector did not take the last spans in time; they are lost');
  } catch (err) {
    log.warn({ err: { message: describe(err) } }, 'tracing: the last spans could not be exported');
  } finally {
    clearTimeout(timer);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
