/**
 * Types shared by the proxy's steps (admission.ts, flight.ts, forward.ts, websocket.ts) and
 * their assembly (proxy.ts). A leaf: it imports no step, so no step imports another through it.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ServerOptions } from 'http-proxy-3';
import type { Authenticate, Identity } from '../auth/bearer.js';
import type { ClientCertificate } from '../auth/client-certificate.js';
import type { DeniedTokens } from '../auth/denied-tokens.js';
import type { DpopProofs } from '../auth/dpop.js';
import type { Revocations } from '../auth/revocation.js';
import type { Signer } from '../auth/signer.js';
import type { TrustedIssuers } from '../auth/trusted-issuers.js';
import type { Config } from '../config/schema.js';
import type { ProxyTrust } from '../http/client-address.js';
import type { Cors } from '../http/cors.js';
import type { LimitHeaders, RateLimits } from '../limits/rate-limits.js';
import type { Logger } from '../telemetry/log.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { Scheduler } from '../util/clock.js';
import type { Route } from './routes.js';
import type { Target } from './targets.js';

export interface ProxyDeps {
  config: Config;
  log: Logger;
  /** The time, and the timers of open WebSockets (ws-connection.ts). */
  clock: Scheduler;
  signer: Signer;
  authenticate: Authenticate;
  /** The bearer check of routes that accept other issuers' tokens too (`issuers`). */
  trustedIssuers: TrustedIssuers;
  revocations: Revocations;
  /** Revoked access tokens (auth/denied-tokens.ts): an open WebSocket of one is closed. */
  denied?: Pick<DeniedTokens, 'watch' | 'isDenied'>;
  limits: RateLimits;
  /** CORS, undefined while it is off (http/cors.ts). */
  cors: Cors | undefined;
  /** Whose forwarding headers are kept (a reload may replace the list); default: `config.proxy.trustedProxies` as started. */
  isTrustedProxy?: ProxyTrust;
  /** Requests, upstream failures and WebSockets are counted here. */
  metrics: Metrics;
  /** Tracing, undefined while it is off (telemetry/tracing.ts): backends get the gateway's span as their parent. */
  tracing?: Tracing | undefined;
  /** DPoP (auth/dpop.ts): a DPoP call's answer gets the current server nonce, when nonces are required. */
  dpop?: Pick<DpopProofs, 'nonceHeader'> | undefined;
}

/**
 * Who a route let through (undefined on a public route), the assertion it sends, its quota's
 * headers, and the verified client certificate a route with `clientCertificate` passes on.
 */
export interface Admitted {
  identity: Identity | undefined;
  assertion: string | undefined;
  limitHeaders: LimitHeaders;
  certificate?: ClientCertificate | undefined;
}

/** One attempt at one backend, handed to our http-proxy-3 hooks through its options. */
export interface Flight {
  readonly route: Route;
  readonly target: Target;
  readonly headers: OutgoingHttpHeaders;
  /** The backend's response head arrived (or, for a WebSocket, its 101). */
  responded: boolean;
  /** The route's response timeout fired before that. */
  timedOut: boolean;
  /** performance.now() when the attempt started (telemetry/upstream.ts reads these two). */
  readonly sentAt: number;
  /** performance.now() when the backend's response head (or 101) arrived; 0 before. */
  respondedAt: number;
  /** Called with the backend's response head (for a WebSocket: an answer other than 101). */
  onResponse: ((proxyRes: IncomingMessage) => void) | undefined;
  /**
   * A request sent by undici (flight.ts): called with its answer's head, raw (names as sent,
   * repeats kept) and its Connection values joined; the body follows on the response.
   */
  onHead: ((status: number, rawHeaders: string[], connection: string | undefined) => void) | undefined;
  /** Called once the backend switched protocols, before its 101 is relayed (WebSocket only); `proxySocket`: the backend's side. */
  onUpgrade: ((proxyRes: IncomingMessage, proxySocket: Duplex) => void) | undefined;
}

export type FlightOptions = ServerOptions & { flight: Flight };
