/**
 * The exchange: one per request, opened at the listener as the request arrives, whatever way it
 * then takes (the gateway's own routes through Koa, a proxied route, a CORS preflight, a
 * WebSocket handshake, or a refusal before any of these: server.ts). It carries what the
 * request's record needs (its id, arrival, route, who made it, the status the client got, the
 * backend that answered) and it alone writes that record: the access-log line and the request
 * metric (middleware/access-log.ts's writer) and the trace span, each exactly once, when the
 * exchange ends; then it tells the usage recorder the status (limits/usage.ts counts a key's
 * calls by class of status from it). Ending again does nothing, so a path that ends it on every
 * way out cannot count a request twice; test/http/exchange.test.ts holds one line, one
 * observation and one span for each kind of request.
 *
 * The edge's screening (edge.ts) is recorded on it too: the normalised target, or the refusal
 * that Koa throws inside its error boundary, so that no request is screened twice.
 *
 * One small object per request and no closure: it is on the proxied hot path (bench/README.md),
 * where it stands in for the access-log entry and the span outcome it replaces (it is both).
 */
import type { IncomingMessage } from 'node:http';
import type { Context, Next } from 'koa';
import type { RequestSpan, Tracing } from '../telemetry/tracing.js';
import type { Upstream } from '../telemetry/upstream.js';
import type { Screening } from './edge.js';
import { finalStatus, ownRouteOf, shortPath, UNMATCHED_PATH, type AccessEntry, type AccessLog } from './middleware/access-log.js';
import { requestIdOf } from './middleware/request-id.js';

/** Where an exchange's record goes: shared by every exchange of a listener. */
interface Records {
  write: AccessLog;
  tracing: Tracing | undefined;
  /** Told each request's final status, for the per-key usage by status class (limits/usage.ts); undefined while usage is off. */
  answered: ((req: IncomingMessage, status: number) => void) | undefined;
}

export class Exchange implements AccessEntry, Screening {
  readonly requestId: string;
  /** performance.now() at arrival. */
  readonly started: number;
  /** Undefined for a request refused before its head was read; a forward-auth decision's is the method decided on (app.ts). */
  method: string | undefined;
  /** As the access log writes it: a proxied request's normalised path, an own route's pattern, or UNMATCHED_PATH. */
  path: string = UNMATCHED_PATH;
  /** A configured route's name (undefined for the gateway's own routes). */
  route: string | undefined = undefined;
  /** The matched template (a proxied route's prefix, an own route's pattern), for the span. */
  template: string | undefined = undefined;
  accountId: string | undefined = undefined;
  /** The status the client got; 0 until the exchange ends. */
  status = 0;
  upstream: Upstream | undefined = undefined;
  /** True for a WebSocket handshake on a WebSocket route (its 101, or its refusal). */
  websocket: true | undefined = undefined;
  url: string | undefined = undefined;
  refusal: unknown = undefined;
  readonly #records: Records;
  readonly #span: RequestSpan | undefined;
  readonly #req: IncomingMessage | undefined;

  constructor(records: Records, req: IncomingMessage | undefined, requestId: string) {
    this.requestId = requestId;
    this.started = performance.now();
    this.method = req?.method;
    this.#records = records;
    this.#req = records.answered === undefined ? undefined : req;
    // Before the proxy builds the backend's headers, which name this span as the parent.
    this.#span = records.tracing?.start(req);
  }

  /** The configured route the edge chose, and the normalised path (for the log). */
  routeTo(route: string, template: string, path: string): void {
    this.route = route;
    this.template = template;
    this.path = shortPath(path);
  }

  /** Writes the line, the metric and the span with the status the client got; once (later calls do nothing). */
  end(status: number): void {
    if (this.status !== 0) return;
    this.status = status;
    this.#records.write(this);
    this.#span?.end(this);
    if (this.#req !== undefined) this.#records.answered!(this.#req, status);
  }
}

export interface Exchanges {
  /**
   * The exchange of a request arriving at the listener; `requestId` given for a request
   * refused before the app (none when Node read no head: a fresh one then).
   */
  open(req: IncomingMessage | undefined, requestId?: string): Exchange;
}

/**
 * `write`: the access-log writer (which also counts the request); `tracing`: undefined while off;
 * `answered`: the usage recorder's (limits/usage.ts), undefined while usage is off.
 */
export function createExchanges(write: AccessLog, tracing: Tracing | undefined, answered?: (req: IncomingMessage, status: number) => void): Exchanges {
  const records: Records = { write, tracing, answered };
  return {
    open: (req, requestId) => new Exchange(records, req, requestId ?? requestIdOf(req)),
  };
}

/**
 * Koa's side, outermost: the exchange the listener opened for this request (`exchangeOf`),
 * its id on ctx.state and the answer, and its end once the chain has run, with the own route
 * it matched and who the bearer guard let through. Outside the error boundary, so it sees
 * every final status.
 */
export function joinExchange(exchangeOf: (req: IncomingMessage) => Exchange) {
  return async function joinExchange(ctx: Context, next: Next): Promise<void> {
    const exchange = exchangeOf(ctx.req);
    ctx.state.requestId = exchange.requestId;
    ctx.set('X-Request-Id', exchange.requestId);
    try {
      await next();
    } finally {
      const template = ownRouteOf(ctx);
      if (template !== undefined) {
        exchange.path = template;
        exchange.template = template;
      }
      // A forward-auth decision is counted under the route it decided on (routes/forward-auth.ts).
      if (typeof ctx.state.route === 'string') exchange.route = ctx.state.route;
      exchange.accountId = (ctx.state.identity as { accountId?: string } | undefined)?.accountId;
      exchange.end(finalStatus(ctx.req, ctx.res, ctx.status));
    }
  };
}
