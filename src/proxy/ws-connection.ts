/**
 * One switched WebSocket: the client's socket and the backend's, the two frame relays between
 * them (ws-frames.ts), its timers, and how it ends. The timers are set on an injected Scheduler
 * (util/clock.ts), so a test moves time instead of waiting for it.
 *
 *     open ──shut(why)──▶ closing(why) ──both sockets closed──▶ closed(reason)
 *       └──────────────────both sockets closed──────────────────────▲
 *
 * - open: relaying both ways. The idle timer (the route's `webSocketIdleTimeoutMs`, 0 for none,
 *   started again by every byte either way) and the expiry timer (the token's `exp`) are set.
 *   The peers may close by themselves here: their close frames are relayed, and each side's TCP
 *   connection is ended once a close frame went each way.
 * - closing(why), `why` one of expired (the expiry timer), reset (a reset covering the token:
 *   websocket.ts watches them), idle (the idle timer), drain (the gateway shuts down): the
 *   gateway's close frame (GATEWAY_CLOSE_CODES, the same to both sides) goes out at each relay's
 *   next frame boundary; the idle and expiry timers are cancelled and the close wait is set:
 *   a peer that has not answered within CLOSE_WAIT_MS is cut. A later shut changes nothing:
 *   the first reason wins.
 * - closed(reason): both sockets have closed, every timer is cancelled, the connection has left
 *   its set, and gateway_websocket_closed_total counted `reason`: the first thing noted of the
 *   gateway's `why`, a side's close frame or end (client, backend), a socket error; `error` if
 *   nothing was.
 *
 * cut() destroys both sockets in any state (the close wait, the shutdown deadline); closed
 * follows. Held by test/proxy/ws-connection.test.ts (on a ManualClock), and end to end by
 * test/proxy/websocket.test.ts, test/proxy/websocket-hostile.test.ts and test/ops/drain.test.ts.
 */
import type { Duplex } from 'node:stream';
import type { Identity } from '../auth/bearer.js';
import type { Logger } from '../telemetry/log.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Scheduler, Timer } from '../util/clock.js';
import type { Route } from './routes.js';
import { closeFrame, relayFrames, type FrameRelay } from './ws-frames.js';

/** How long a peer may take to answer the gateway's close frame before its connection is cut. */
export const CLOSE_WAIT_MS = 5000;

/** Why a WebSocket ended (the `reason` label of gateway_websocket_closed_total). */
export type CloseReason = 'client' | 'backend' | 'expired' | 'reset' | 'idle' | 'drain' | 'error';
/** Why the gateway closes a WebSocket itself. */
export type GatewayReason = 'expired' | 'reset' | 'idle' | 'drain';

/**
 * The close frames the gateway sends, the same to both sides (the backend learns why its
 * client went). 1001 is RFC 6455's "going away"; the 4000s are the range private to an
 * application (§7.4.2), chosen to echo the HTTP statuses they resemble.
 */
export const GATEWAY_CLOSE_CODES: Readonly<Record<GatewayReason, { code: number; reason: string }>> = {
  expired: { code: 4001, reason: 'token expired' },
  reset: { code: 4003, reason: 'access reset' },
  idle: { code: 4008, reason: 'idle timeout' },
  drain: { code: 1001, reason: 'gateway shutting down' },
};

export type ConnectionState =
  | { readonly name: 'open' }
  | { readonly name: 'closing'; readonly why: GatewayReason }
  | { readonly name: 'closed'; readonly reason: CloseReason };

/** What a connection joins: the handshake's route and identity (undefined on a public route), and the two sockets. */
export interface ConnectionSides {
  route: Pick<Route, 'name' | 'webSocketIdleTimeoutMs'>;
  identity: Identity | undefined;
  client: Duplex;
  backend: Duplex;
}

export interface ConnectionDeps {
  clock: Scheduler;
  log: Logger;
  metrics: Pick<Metrics, 'webSocketConnections' | 'webSocketsClosed'>;
}

/** Which close frames have gone which way: a side's close handshake is complete with one each way. */
interface CloseFrames {
  toClient: boolean;
  fromClient: boolean;
  toBackend: boolean;
  fromBackend: boolean;
}

export class WebSocketConnection {
  readonly route: ConnectionSides['route'];
  readonly identity: Identity | undefined;
  readonly client: Duplex;
  readonly backend: Duplex;
  /** Resolves once both sockets are closed (the state is then closed). */
  readonly finished: Promise<void>;
  readonly #deps: ConnectionDeps;
  #state: ConnectionState = { name: 'open' };
  /** The first reason noted: what gateway_websocket_closed_total counts. */
  #reason: CloseReason | undefined;
  readonly #frames: CloseFrames = { toClient: false, fromClient: false, toBackend: false, fromBackend: false };
  readonly #idle: Timer | undefined;
  readonly #expiry: Timer | undefined;
  #closeWait: Timer | undefined;
  readonly #toClient: FrameRelay;
  readonly #toBackend: FrameRelay;

  /** Starts relaying at once; `onClosed` is called when the state becomes closed, before it is counted. */
  constructor({ route, identity, client, backend }: ConnectionSides, deps: ConnectionDeps, onClosed?: (connection: WebSocketConnection) => void) {
    this.route = route;
    this.identity = identity;
    this.client = client;
    this.backend = backend;
    this.#deps = deps;
    const { clock, metrics } = deps;
    const idleMs = route.webSocketIdleTimeoutMs;
    this.#idle = idleMs > 0 ? clock.setTimer(idleMs, () => this.shut('idle')) : undefined;
    this.#expiry = identity === undefined ? undefined : clock.setTimer(identity.expiresAt * 1000 - clock.now(), () => this.shut('expired'));
    this.#toBackend = this.#relay(client, backend, 'client');
    this.#toClient = this.#relay(backend, client, 'backend');
    client.on('error', () => this.#note('error'));
    backend.on('error', () => this.#note('error'));
    this.finished = Promise.all([whenClosed(client), whenClosed(backend)]).then(() => {
      this.#cancelTimers();
      this.#closeWait?.cancel();
      this.#state = { name: 'closed', reason: this.#reason ?? 'error' };
      onClosed?.(this);
      metrics.webSocketConnections.dec({ route: route.name });
      metrics.webSocketsClosed.inc({ route: route.name, reason: this.#state.reason });
    });
    metrics.webSocketConnections.inc({ route: route.name });
  }

  get state(): ConnectionState {
    return this.#state;
  }

  /** open → closing(why): the gateway's close frame to both sides. Does nothing in any other state. */
  shut(why: GatewayReason): void {
    const { client, backend, identity, route } = this;
    if (this.#state.name !== 'open' || (client.destroyed && backend.destroyed)) return;
    this.#state = { name: 'closing', why };
    this.#note(why);
    this.#cancelTimers();
    if (why !== 'drain') this.#deps.log.info({ accountId: identity?.accountId, tokenId: identity?.tokenId, route: route.name, reason: why }, 'websocket closed by the gateway');
    const { code, reason } = GATEWAY_CLOSE_CODES[why];
    this.#closeWait = this.#deps.clock.setTimer(CLOSE_WAIT_MS, () => this.cut());
    this.#toClient.stop(() => {
      if (!this.#toClient.closeRelayed && client.writable) client.write(closeFrame(code, reason, false));
      this.#frames.toClient = true;
      this.#settle();
    });
    this.#toBackend.stop(() => {
      if (!this.#toBackend.closeRelayed && backend.writable) backend.write(closeFrame(code, reason, true));
      this.#frames.toBackend = true;
      this.#settle();
    });
  }

  /** Destroys both sockets, whatever the state. */
  cut(): void {
    this.client.destroy();
    this.backend.destroy();
  }

  /** Relays `from` to `to`; `side` names `from`, for the reason and the close frames. */
  #relay(from: Duplex, to: Duplex, side: 'client' | 'backend'): FrameRelay {
    const idle = this.#idle;
    const relay: FrameRelay = relayFrames(from, to, {
      onActivity: idle === undefined ? () => {} : () => { if (this.#state.name === 'open') idle.refresh(); },
      onClose: () => {
        this.#note(side);
        if (side === 'client') {
          this.#frames.fromClient = true;
          this.#frames.toBackend ||= relay.closeRelayed;
        } else {
          this.#frames.fromBackend = true;
          this.#frames.toClient ||= relay.closeRelayed;
        }
        this.#settle();
      },
      onEnd: () => {
        this.#note(side);
        if (this.#state.name === 'closing') from.end();
      },
    });
    return relay;
  }

  /**
   * Each side's close handshake is complete once a close frame went each way: then the gateway
   * ends its side of that TCP connection (§7.1.1: the server closes first).
   */
  #settle(): void {
    const { client, backend } = this;
    const frames = this.#frames;
    if (frames.toClient && frames.fromClient && client.writable) client.end();
    if (frames.toBackend && frames.fromBackend && backend.writable) backend.end();
  }

  #note(why: CloseReason): void {
    this.#reason ??= why;
  }

  #cancelTimers(): void {
    this.#idle?.cancel();
    this.#expiry?.cancel();
  }
}

/**
 * The open WebSockets of one gateway, by account for resets. `drain` closes them with 1001, and
 * every one opened after it as soon as it is.
 */
export class WebSocketConnections {
  readonly #deps: ConnectionDeps;
  readonly #all = new Set<WebSocketConnection>();
  readonly #byAccount = new Map<string, Set<WebSocketConnection>>();
  #draining = false;

  constructor(deps: ConnectionDeps) {
    this.#deps = deps;
  }

  /** A connection for the two sockets, in this set until it is closed. */
  open(sides: ConnectionSides): WebSocketConnection {
    const connection = new WebSocketConnection(sides, this.#deps, (closed) => this.#untrack(closed));
    this.#track(connection);
    if (this.#draining) connection.shut('drain');
    return connection;
  }

  get size(): number {
    return this.#all.size;
  }

  /** The connections opened with a token of this account. */
  ofAccount(accountId: string): Iterable<WebSocketConnection> {
    return this.#byAccount.get(accountId) ?? [];
  }

  /** Every connection opened with a token (not those of public routes). */
  *withIdentity(): Iterable<WebSocketConnection & { identity: Identity }> {
    for (const connections of this.#byAccount.values()) yield* connections as Set<WebSocketConnection & { identity: Identity }>;
  }

  /** Shuts every connection with 1001, and those opened from now on; resolves once the ones open now are closed. */
  drain(): Promise<void> {
    this.#draining = true;
    const open = [...this.#all];
    for (const connection of open) connection.shut('drain');
    return Promise.all(open.map((c) => c.finished)).then(() => {});
  }

  cutAll(): void {
    for (const connection of this.#all) connection.cut();
  }

  #track(connection: WebSocketConnection): void {
    this.#all.add(connection);
    const { identity } = connection;
    if (identity === undefined) return;
    const connections = this.#byAccount.get(identity.accountId) ?? new Set<WebSocketConnection>();
    connections.add(connection);
    this.#byAccount.set(identity.accountId, connections);
  }

  #untrack(connection: WebSocketConnection): void {
    this.#all.delete(connection);
    const { identity } = connection;
    if (identity === undefined) return;
    const connections = this.#byAccount.get(identity.accountId);
    connections?.delete(connection);
    if (connections?.size === 0) this.#byAccount.delete(identity.accountId);
  }
}

function whenClosed(socket: Duplex): Promise<void> {
  return new Promise<void>((resolve) => {
    if (socket.closed) resolve();
    else socket.once('close', () => resolve());
  });
}
