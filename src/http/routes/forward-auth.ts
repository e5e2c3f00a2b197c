/**
 * /api/forward-auth (any method): the decision for proxies that ask before forwarding
 * (docs/forward-auth.md). Here the HTTP side: which original request is asked about, and the
 * answer; the decision itself is the proxy's admission (proxy/decision.ts), reached through
 * `decide` since http/ sits below proxy/.
 *
 * The original request is read only from a trusted proxy (`proxy.trustedProxies`): its method
 * from X-Forwarded-Method or X-Original-Method, else the asking request's own (Envoy's
 * ext_authz and the Gateway API's ExternalAuth ask with the original method); its target from
 * X-Forwarded-Uri or X-Original-URI, else the path below /api/forward-auth/ (Envoy's
 * `path_prefix`). From anyone else those are ignored and the request is decided as it is: its
 * own target is the gateway's own path, which no route covers, so the answer is a 404. An
 * original target is normalised as every request's is (a bad one is a 400), and one of the
 * gateway's own paths is covered by no route, as on the main listener.
 *
 * Allowed: 200, the envelope, and the identity headers for the proxy to copy. Refused: the
 * refusal of a proxied request on that route (401 with its challenge, 403, 429 with Retry-After),
 * written by the error boundary. Never a redirect, never a backend.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Context } from 'koa';
import type { Identity } from '../../auth/bearer.js';
import { ok } from '../../errors/envelope.js';
import { InvalidRequest, NotFound } from '../../errors/errors.js';
import type { ProxyTrust } from '../client-address.js';
import { normaliseUrl } from '../middleware/normalise-path.js';

export const FORWARD_AUTH_PATH = '/api/forward-auth';

/** The proxy's decision (proxy/decision.ts's Decide, as this side sees it). */
export type ForwardAuthDecide = (req: IncomingMessage, original: { method: string; url: string }, requestId: string, onRoute: (name: string) => void)
  => Promise<{ route: string; identity: Identity | undefined; headers: OutgoingHttpHeaders }>;

export interface ForwardAuthDeps {
  decide: ForwardAuthDecide;
  isTrustedProxy: ProxyTrust;
  /** True for a path the gateway answers itself (app.ts): covered by no route. */
  isOwnPath: (path: string) => boolean;
}

/** RFC 9110 §5.6.2 token. */
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/;

/**
 * The decision on the request `req` asks about (refusals thrown), for both ways it is served;
 * `onRoute` hears the route's name and the method decided on (which nginx, asking with HEAD,
 * sends in X-Original-Method).
 */
export type DecideForwardAuth = (req: IncomingMessage, requestId: string, onRoute: (name: string, method: string) => void)
  => Promise<{ route: string; identity: Identity | undefined; headers: OutgoingHttpHeaders }>;

export function createForwardAuthDecision({ decide, isTrustedProxy, isOwnPath }: ForwardAuthDeps): DecideForwardAuth {
  return async function decideForwardAuth(req, requestId, onRoute) {
    const original = originalRequest(req, isTrustedProxy);
    const q = original.url.indexOf('?');
    if (isOwnPath(q === -1 ? original.url : original.url.slice(0, q))) throw new NotFound('No route of the gateway covers this request.');
    return decide(req, original, requestId, (name) => onRoute(name, original.method));
  };
}

/** True for a normalised target the listener serves as a decision (the router takes the same paths, with case). */
export function isForwardAuthTarget(url: string): boolean {
  if (!url.startsWith(FORWARD_AUTH_PATH)) return false;
  const next = url.charCodeAt(FORWARD_AUTH_PATH.length);
  return Number.isNaN(next) || next === 0x2f || next === 0x3f;
}

/**
 * The Koa side of the same decision: the listener serves these paths itself (app.ts, outside
 * Koa, as it serves proxied routes: Koa's chain was half the decision's cost, bench/README.md),
 * so this answers only what reaches the router otherwise (none today); it keeps the paths the
 * router's own, so no route ever proxies them.
 */
export function answerForwardAuth(deps: ForwardAuthDeps) {
  const decideForwardAuth = createForwardAuthDecision(deps);
  return async function answerForwardAuth(ctx: Context): Promise<void> {
    // The exchange counts the decision, allowed or refused, under its route's name (exchange.ts joinExchange).
    const decision = await decideForwardAuth(ctx.req, ctx.state.requestId as string, (name) => { ctx.state.route = name; });
    ctx.state.identity = decision.identity;
    for (const name in decision.headers) ctx.set(name, decision.headers[name] as string | string[]);
    ctx.body = ok({ route: decision.route });
  };
}

/** The request asked about: a trusted proxy's description of it, or else this request itself. */
function originalRequest(req: IncomingMessage, isTrustedProxy: ProxyTrust): { method: string; url: string } {
  const own = { method: req.method ?? 'GET', url: req.url ?? '/' };
  if (!isTrustedProxy(req.socket.remoteAddress ?? '')) return own;
  const method = single(req, 'x-forwarded-method') ?? single(req, 'x-original-method') ?? own.method;
  if (!METHOD.test(method)) throw new InvalidRequest('X-Forwarded-Method must name an HTTP method.');
  // The edge normalised this request's own target, so the suffix is normal already.
  const below = own.url.startsWith(`${FORWARD_AUTH_PATH}/`) ? own.url.slice(FORWARD_AUTH_PATH.length) : undefined;
  const uri = single(req, 'x-forwarded-uri') ?? single(req, 'x-original-uri');
  if (uri === undefined) return { method, url: below ?? own.url };
  if (!uri.startsWith('/')) throw new InvalidRequest('X-Forwarded-Uri must be a path starting with "/".');
  return { method, url: normaliseUrl(uri) };
}

/**
 * One header's one value; a repeated one is refused (which copy would the proxy have meant?).
 * Read from the raw list: Node folds repeats with ", ", which a URI may hold, and an HTTP/2
 * request has no headersDistinct.
 */
function single(req: IncomingMessage, name: string): string | undefined {
  if (req.headers[name] === undefined) return undefined;
  let value: string | undefined;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== name.length || raw[i]!.toLowerCase() !== name) continue;
    if (value !== undefined) throw new InvalidRequest(`The header "${name}" must be given once.`);
    value = raw[i + 1]!;
  }
  return value;
}
