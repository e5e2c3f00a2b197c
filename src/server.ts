/**
 * The HTTP server around the gateway's listeners (app.ts). Requests Node's parser refuses never
 * reach them (malformed request line, both Content-Length and Transfer-Encoding, oversized
 * headers), nor do CONNECT and an unmet Expect: they are answered here, still in the envelope
 * (http/raw-response.ts), and the connection is closed. On the main listener each still gets
 * its exchange (http/exchange.ts): an access line, a request metric and a span, as any request.
 *
 * With TLS on the main listener is HTTPS (tls/certificates.ts). With ACME on, its certificate is
 * ordered once the listeners answer (tls/acme.ts: HTTP-01 on the redirect listener), a
 * temporary one standing in until then, and TLS-ALPN-01 validations are taken aside before TLS
 * starts (tls/alpn-challenge.ts), as plain-HTTP requests sent to the TLS port are, to be
 * answered 400 rather than cut (tls/first-record.ts).
 *
 * Stopping (drain, then close): /readyz turns 503 at once while everything is still served for
 * `server.drainDelayMs`, so that load balancers take the instance out before it refuses
 * anything; every answer from then on says `Connection: close`, so keep-alive clients move
 * too. Then the listener closes, idle connections go, open requests and streams get up to
 * `server.shutdownTimeoutMs` to finish and WebSockets a close frame (1001), and whatever is left
 * at that deadline is cut. test/ops/drain.test.ts holds it against a real process.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createSecureServer as createHttp2SecureServer, type Http2SecureServer, type Http2Server } from 'node:http2';
import type { TlsOptions } from 'node:tls';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { Counter } from 'prom-client';
import { createListeners, createManagementListener } from './app.js';
import { isAcmeOn, isTlsOn } from './config/schema.js';
import { errorAnswer } from './errors/boundary.js';
import { ExpectationFailed, InvalidRequest, MethodNotAllowed, RequestHeadersTooLarge, RequestTimeout, SERVED_METHODS, type GatewayError } from './errors/errors.js';
import type { Exchange, Exchanges } from './http/exchange.js';
import { createCleartextHttp2, dispatchPriorKnowledge, http2Options, trackSessions, type Sessions } from './http/http2.js';
import { serveStreams } from './http/http2-streams.js';
import { requestIdOf } from './http/middleware/request-id.js';
import { answerResponse, answerSocket } from './http/raw-response.js';
import type { Services } from './services.js';
import type { Config } from './config/schema.js';
import type { ChallengeStore } from './state/index.js';
import { ACME_CERTIFICATE_ID, createAcmeManager, temporaryCertificate, type AcmeManager } from './tls/acme.js';
import { alpnChallengeRoute } from './tls/alpn-challenge.js';
import { createCertificateSet, type CertificateSet } from './tls/certificates.js';
import { screenFirstRecord, type FirstRecordScreen } from './tls/first-record.js';
import { createRedirectListener } from './tls/redirect.js';
import type { Logger } from './telemetry/log.js';

export interface RunningServer {
  server: Server;
  /** e.g. http://127.0.0.1:8080 */
  url: string;
  /** The management listener's (management.port), when there is one: /metrics, /healthz, /readyz. */
  managementUrl: string | undefined;
  /** The main listener's certificates, with TLS on (tls.certFile, or ACME): SIGHUP reloads the files. */
  certificates: CertificateSet | undefined;
  /** The redirect listener's (tls.redirectPort), when there is one: plain HTTP, 308 to HTTPS. */
  redirectUrl: string | undefined;
  /** The ACME answers: HTTP-01's the redirect listener serves, TLS-ALPN-01's the main listener's validations read. */
  challenges: ChallengeStore;
  /**
   * /readyz answers 503 from now on; everything is still served for `server.drainDelayMs`,
   * then close(). Resolves once closed; called again, the same promise.
   */
  drain(): Promise<void>;
  /**
   * Stops accepting, lets open requests and streams finish and WebSockets close (1001) up to
   * `server.shutdownTimeoutMs`, cuts what is left, then closes the services.
   */
  close(): Promise<void>;
}

export async function startServer(services: Services): Promise<RunningServer> {
  const { host, port, drainDelayMs, shutdownTimeoutMs, listenWaitMs } = services.config.server;
  const { log } = services;
  const listeners = createListeners(services);
  // Read and checked before anything listens: a bad certificate or key stops the start.
  const certificates = await createCertificates(services);
  const { server, sessions } = createMainServer(services, listeners, certificates);
  if (certificates !== undefined) certificates.attach(server as HttpsServer);
  server.on('upgrade', listeners.upgrade);
  const firstRecords = certificates === undefined ? undefined : screenFirstRecords(services, server as HttpsServer, listeners.exchanges);

  try {
    await services.warmUp();
    await listen(server, port, host, { waitMs: listenWaitMs, log });
  } catch (err) {
    certificates?.close();
    throw err;
  }
  const url = urlOf(server, certificates === undefined ? 'http' : 'https');
  const { challenges } = services.acme;
  let management: Server | undefined;
  let redirect: Server | undefined;
  try {
    ({ management, redirect } = await startSideListeners(services, server, listeners.exchanges, challenges));
  } catch (err) {
    server.close();
    certificates?.close();
    throw err;
  }
  // Once the redirect listener answers HTTP-01; until the first order completes the main
  // listener serves the temporary certificate (or the files', for names ACME does not cover).
  const acme = startAcme(services, certificates);

  // Added only once stopping, so that serving costs nothing extra until then.
  const closeAfterAnswer = (_req: IncomingMessage, res: ServerResponse) => { res.shouldKeepAlive = false; };
  const startDraining = () => {
    if (services.isDraining()) return;
    services.startDraining();
    server.prependListener('request', closeAfterAnswer);
  };

  let draining: Promise<void> | undefined;
  let closing: Promise<void> | undefined;
  const running: RunningServer = {
    server,
    url,
    managementUrl: management === undefined ? undefined : urlOf(management),
    certificates,
    redirectUrl: redirect === undefined ? undefined : urlOf(redirect),
    challenges,
    drain() {
      draining ??= (async () => {
        startDraining();
        log.info({ drainDelayMs }, 'draining: /readyz answers 503, still serving');
        await new Promise((resolve) => setTimeout(resolve, drainDelayMs));
        await running.close();
      })();
      return draining;
    },
    close() {
      closing ??= (async () => {
        startDraining();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        sessions?.closeAll();
        cutUnusedConnections(server);
        firstRecords?.cutWaiting();
        log.info({ webSockets: services.proxy.openWebSockets(), shutdownTimeoutMs }, 'stopped accepting connections');
        // Upgraded connections are not the HTTP server's to close, and would hold it open.
        const webSockets = services.proxy.closeWebSockets();
        let cutWaited!: () => void;
        const cut = new Promise<void>((resolve) => { cutWaited = resolve; });
        const deadline = setTimeout(() => {
          const left = { webSockets: services.proxy.openWebSockets() };
          closeAllConnections(server);
          sessions?.destroyAll();
          services.proxy.cutWebSockets();
          log.warn(left, 'shutdown deadline passed: cut the connections still open');
          // A handshake still waiting for its backend is no one's to cut: not waited for long.
          setTimeout(cutWaited, 1000);
        }, shutdownTimeoutMs);
        await Promise.race([Promise.all([closed, webSockets]), cut]);
        clearTimeout(deadline);
        if (redirect !== undefined) await closeNow(redirect);
        // Last: health and metrics stay answerable while the main listener drains.
        if (management !== undefined) await closeNow(management);
        acme?.stop();
        certificates?.close();
        await services.close();
      })();
      return closing;
    },
  };
  return running;
}

/**
 * The main listener's certificates with TLS on: the files' (tls.certFile, tls.certificates),
 * and with ACME on the one it obtains, served for its names; without files, a temporary
 * self-signed one stands in as the default until the first order completes (docs/tls.md).
 */
async function createCertificates(services: Services): Promise<CertificateSet | undefined> {
  const { config, log, clock, metrics } = services;
  if (!isTlsOn(config)) return undefined;
  const initial = config.tls.certFile === undefined ? { id: ACME_CERTIFICATE_ID, certificate: await temporaryCertificate(config.acme.domains) } : undefined;
  return createCertificateSet(config.tls, { log, clock, timers: clock, registry: config.metrics.enabled ? metrics.registry : undefined, initial });
}

/** Starts ordering (or serving the stored) ACME certificate, with ACME on; its failures are logged and retried, never thrown. */
function startAcme(services: Services, certificates: CertificateSet | undefined): AcmeManager | undefined {
  const { config, log, clock, acme: state } = services;
  if (!isAcmeOn(config) || certificates === undefined) return undefined;
  const { directoryUrl, email, domains, eabKid, eabHmacKey, renewBeforeDays } = config.acme;
  // HTTP-01 first where the redirect listener is (port 80 is easier to forward than to share); TLS-ALPN-01 always.
  const challengeTypes = config.tls.redirectPort === undefined ? ['tls-alpn-01' as const] : ['http-01' as const, 'tls-alpn-01' as const];
  const orders = config.metrics.enabled ? new Counter({ name: 'gateway_acme_orders_total', help: 'ACME orders this instance made, by outcome (issued, failed)', labelNames: ['outcome'], registers: [services.metrics.registry] }) : undefined;
  const manager = createAcmeManager({
    settings: { directoryUrl: directoryUrl!, email, domains, eabKid, eabHmacKey, renewBeforeDays, challengeTypes },
    store: state.store, challenges: state.challenges, sink: certificates, scheduler: clock, log,
    onOrder: (outcome) => orders?.inc({ outcome }),
  });
  void manager.start();
  return manager;
}

/**
 * The listeners beside the main one, once it listens: management (management.port) and the
 * redirect to HTTPS (tls.redirectPort), each when configured. Neither is left open on failure.
 */
async function startSideListeners(services: Services, main: Server, exchanges: Exchanges, challenges: ChallengeStore): Promise<{ management: Server | undefined; redirect: Server | undefined }> {
  const { log, config } = services;
  const { host, listenWaitMs } = config.server;
  const { redirectPort, publicHttpsPort } = config.tls;
  const management = config.management.port === undefined ? undefined : createGatewayServer(services, createManagementListener(services));
  const redirect = redirectPort === undefined ? undefined : createGatewayServer(services, createRedirectListener({
    exchanges,
    challenges,
    // Read now, while the main listener listens (its address is gone once it closes).
    httpsPort: publicHttpsPort ?? (main.address() as AddressInfo).port,
  }), {}, exchanges);
  try {
    if (management !== undefined) await listen(management, config.management.port!, config.management.host ?? host, { waitMs: listenWaitMs, log });
    if (redirect !== undefined) await listen(redirect, redirectPort!, host, { waitMs: listenWaitMs, log });
  } catch (err) {
    management?.close();
    redirect?.close();
    throw err;
  }
  return { management, redirect };
}

/** The TLS handshake gets the same bound as the headers (Node's default: two minutes). */
function handshakeTimeoutMs(services: Services): number {
  return Math.min(10_000, services.config.server.requestTimeoutMs);
}

/** Closes a side listener at once, its open connections with it. */
function closeNow(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  return closed;
}

/**
 * The main listener: HTTP/1.1, HTTPS with HTTP/2 by ALPN (`http2.tls`), or HTTP/1.1 with h2c by
 * prior knowledge beside it (`http2.cleartext`), each serving the same listeners
 * (http/http2.ts). `sessions`: the HTTP/2 sessions to close at shutdown, when HTTP/2 is on.
 */
function createMainServer(services: Services, listeners: ReturnType<typeof createListeners>, certificates: CertificateSet | undefined): { server: Server; sessions: Sessions | undefined } {
  const { http2 } = services.config;
  // Only a WebSocket handshake the edge routes to a WebSocket route becomes an 'upgrade'
  // event; any other Upgrade header is ignored and the request served (or refused) as usual.
  const options: ServerOptions = { shouldUpgradeCallback: listeners.shouldUpgrade };
  const secure = certificates?.serverOptions();
  const useHttp2 = secure === undefined ? http2.cleartext : http2.tls;
  const server = createGatewayServer(services, listeners.request, options, listeners.exchanges, secure, useHttp2 ? http2 : undefined);
  if (!useHttp2) return { server, sessions: undefined };
  if (secure !== undefined) {
    serveStreams(server as unknown as Http2SecureServer, listeners.stream);
    return { server, sessions: trackSessions(server) };
  }
  const cleartext = createCleartextHttp2(http2, listeners.request as never);
  serveStreams(cleartext, listeners.stream);
  refuseConnect(cleartext, services.log, listeners.exchanges);
  dispatchPriorKnowledge(server, cleartext, handshakeTimeoutMs(services));
  return { server, sessions: trackSessions(cleartext) };
}

/**
 * An HTTP server with the bounds and refusals every listener of the gateway has, the management
 * listener's too: slow-loris timeouts, the head size, and the envelope for what Node refuses
 * before any app sees it. `exchanges`: the main listener's, so that those refusals too are
 * logged, counted and traced as requests (the management listener's are not, as none of its
 * requests are).
 */
function createGatewayServer(services: Services, listener: RequestListener, options: ServerOptions = {}, exchanges?: Exchanges, secure?: TlsOptions, http2?: Config['http2']): Server {
  const { requestTimeoutMs } = services.config.server;
  const { log } = services;
  const http: ServerOptions = {
    // Slow-loris bounds: headers within 10 s, the whole request within requestTimeoutMs.
    headersTimeout: Math.min(10_000, requestTimeoutMs),
    requestTimeout: requestTimeoutMs,
    // How often Node checks those two timeouts (its default, 30 s, would let them overrun).
    connectionsCheckingInterval: 1000,
    maxHeaderSize: 16_384,
    // Checked by the app (http/middleware/request-head.ts), so that the answer is the envelope.
    requireHostHeader: false,
    ...options,
  };
  const server: Server = secure === undefined ? createServer(http, listener)
    : http2 === undefined ? createHttpsServer({ ...http, ...secure, handshakeTimeout: handshakeTimeoutMs(services) }, listener)
      : http1Bounds(createHttp2SecureServer({ ...http2Options(http2), ...secure, allowHTTP1: true, handshakeTimeout: handshakeTimeoutMs(services) }, listener as never), http);
  trackConnections(server, secure !== undefined);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket, log, exchanges));
  // Without these listeners Node answers an unknown Expect with a bare 417 and drops CONNECT
  // without a word; both get the envelope instead.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const requestId = requestIdOf(req);
    const exchange = exchanges?.open(req, requestId);
    log.info({ requestId, status: 417 }, 'refused a request before the app');
    // Its body was not read: the answer closes the connection.
    answerResponse(res, errorAnswer(new ExpectationFailed(), requestId, false), requestId);
    exchange?.end(417);
  });
  refuseConnect(server, log, exchanges);
  return server;
}

/**
 * CONNECT is refused 405 in the envelope: over HTTP/1.1 on the socket, which then closes; over
 * HTTP/2 (where 'connect' hands a stream's response) on that stream alone.
 */
function refuseConnect(server: Server | Http2Server, log: Logger, exchanges: Exchanges | undefined): void {
  server.on('connect', (req: IncomingMessage, socketOrResponse: Duplex | ServerResponse) => {
    const requestId = requestIdOf(req);
    const exchange = exchanges?.open(req, requestId);
    const error = new MethodNotAllowed(SERVED_METHODS);
    if (req.httpVersionMajor < 2) {
      refuseBeforeApp(socketOrResponse as Duplex, error, log, 'CONNECT', requestId, exchange);
      return;
    }
    log.info({ requestId, status: error.status, reason: 'CONNECT' }, 'refused a request before the app');
    answerResponse(socketOrResponse as ServerResponse, errorAnswer(error, requestId, false), requestId);
    exchange?.end(error.status);
  });
}

/**
 * HTTP/2's secure server serves HTTP/1.1 clients with Node's HTTP/1.1 code, but with that
 * code's defaults (a minute for the headers, no Upgrade filter, Host required by Node): the
 * gateway's own bounds are set on it, as createServer takes them for the others.
 */
function http1Bounds(server: NodeJS.EventEmitter, http: ServerOptions): Server {
  return Object.assign(server, {
    headersTimeout: http.headersTimeout,
    requestTimeout: http.requestTimeout,
    connectionsCheckingInterval: http.connectionsCheckingInterval,
    maxHeaderSize: http.maxHeaderSize,
    requireHostHeader: http.requireHostHeader,
    ...(http.shouldUpgradeCallback === undefined ? {} : { shouldUpgradeCallback: http.shouldUpgradeCallback }),
  }) as unknown as Server;
}

/** Cuts every connection (the shutdown deadline); HTTP/2's secure server has no closeAllConnections. */
function closeAllConnections(server: Server): void {
  if (typeof server.closeAllConnections === 'function') server.closeAllConnections();
  for (const socket of connectionsOf.get(server) ?? []) socket.destroy();
}

const connectionsOf = new WeakMap<Server, Set<Socket>>();

/** Keeps the server's open connections (over TLS: once their handshake is done), for cutUnusedConnections. */
function trackConnections(server: Server, secure: boolean): void {
  const open = new Set<Socket>();
  connectionsOf.set(server, open);
  server.on(secure ? 'secureConnection' : 'connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
}

/**
 * Cuts the connections that have not sent a byte. Browsers open sockets ahead of need, and Node
 * does not count one that was never used as idle: server.close() would wait on it until the
 * shutdown deadline (and its timeout checks stop with the listener). No request is lost by
 * the cut, as none was begun; the client opens a new connection, to whichever instance listens.
 */
function cutUnusedConnections(server: Server): void {
  for (const socket of connectionsOf.get(server) ?? []) {
    if (socket.bytesRead === 0) socket.destroy();
  }
}

function listenOnce(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * Listens, waiting while the port is in use: at a restart the process being replaced keeps the
 * port while it drains (server.drainDelayMs, then open requests), and the new one should take
 * it over when that ends rather than die on EADDRINUSE. It tries again with a pause growing to
 * a second, saying so in its log, for at most `waitMs`; then the error stands.
 */
async function listen(server: Server, port: number, host: string, { waitMs, log }: { waitMs: number; log: Logger }): Promise<void> {
  const giveUpAt = Date.now() + waitMs;
  let pauseMs = 50;
  let hasLogged = false;
  for (;;) {
    try {
      return await listenOnce(server, port, host);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || Date.now() >= giveUpAt) throw err;
      if (!hasLogged) {
        hasLogged = true;
        log.warn({ host, port, waitMs }, `port ${port} is in use (a gateway being replaced may still be draining): waiting for it`);
      }
    }
    await sleep(Math.min(pauseMs, Math.max(0, giveUpAt - Date.now())));
    pauseMs = Math.min(pauseMs * 2, 1000);
  }
}

function urlOf(server: Server, scheme = 'http'): string {
  const address = server.address() as AddressInfo;
  return `${scheme}://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
}

function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, log: Logger, exchanges: Exchanges | undefined): void {
  // Never interleave with a response that has started on this connection (the request's body
  // turned out malformed after its headers were answered): cut the connection instead.
  const inProgress = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  // HPE_INVALID_EOF_STATE: the client closed mid-request; there is no one left to answer.
  if (err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE' || !socket.writable || inProgress?.headersSent === true) {
    socket.destroy();
    return;
  }
  const error = err.code === 'HPE_HEADER_OVERFLOW' ? new RequestHeadersTooLarge()
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? new RequestTimeout()
      : new InvalidRequest('The request is not valid HTTP/1.1.');
  // No request was parsed, so no caller's id to keep. A request the app already holds on this
  // connection (its body arriving too slowly: 408) has an exchange, which ends it: none here.
  const requestId = randomUUID();
  const isHeld = inProgress !== undefined && inProgress !== null;
  refuseBeforeApp(socket, error, log, err.code, requestId, isHeld ? undefined : exchanges?.open(undefined, requestId));
}

/**
 * The TLS listener's first bytes of each connection (tls/first-record.ts): a plain-HTTP request
 * is answered 400 with an exchange of its own, as any request refused before the app; with
 * ACME on, TLS-ALPN-01 validations go to their responder.
 */
function screenFirstRecords(services: Services, server: HttpsServer, exchanges: Exchanges): FirstRecordScreen {
  const { log } = services;
  const waitMs = handshakeTimeoutMs(services);
  return screenFirstRecord(server, {
    handshakeTimeoutMs: waitMs,
    plainHttp(socket) {
      // What the client sends on is read and dropped until it closes (or the wait ends): a
      // close with unread bytes would reset the connection before the answer is read.
      socket.setTimeout(waitMs, () => socket.destroy());
      socket.resume();
      const requestId = randomUUID();
      refuseBeforeApp(socket, new InvalidRequest('This port speaks HTTPS: send the request with https://.'), log, 'plain HTTP on the TLS port', requestId, exchanges.open(undefined, requestId));
    },
    byHello: isAcmeOn(services.config) ? alpnChallengeRoute({ challenges: services.acme.challenges, handshakeTimeoutMs: waitMs, log }) : undefined,
  });
}

function refuseBeforeApp(socket: Duplex, error: GatewayError, log: Logger, reason: string | undefined, requestId: string, exchange: Exchange | undefined): void {
  log.info({ requestId, status: error.status, reason }, 'refused a request before the app');
  answerSocket(socket, error, requestId);
  exchange?.end(error.status);
}
