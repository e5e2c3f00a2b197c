/**
 * Forward-auth decisions (docs/forward-auth.md): may this original request, described by the
 * proxy that asks before forwarding it (nginx `auth_request`, Traefik `ForwardAuth`, Envoy
 * `ext_authz` …), pass on its route? Decided by the very admission a proxied request passes
 * (admission.ts: the route's issuers, scope, rules and quota), so the answer is the one a
 * request proxied by the gateway on that route would get: the same refusal (status, envelope
 * code, challenge, Retry-After), or, allowed, the identity headers its backend would be sent.
 *
 * It refuses to guess: a request no route covers is a 404 (what the gateway answers for a path
 * nothing matches), TRACE is a 405 as on a proxied route. Reading the original request from the
 * asking proxy's headers (and trusting only trusted proxies for it) is the HTTP side's
 * (http/routes/forward-auth.ts); test/proxy/forward-auth.test.ts holds both through real nginx.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { readBearerToken, type Identity } from '../auth/bearer.js';
import type { Config } from '../config/schema.js';
import { MethodNotAllowed, NotFound, SERVED_METHODS } from '../errors/errors.js';
import type { Admit } from './admission.js';
import { addIdentityHeaders } from './headers.js';
import type { RouteMatch } from './routes.js';

/** The request a proxy asks about: its method, and its target with the path normalised. */
export interface OriginalRequest {
  method: string;
  url: string;
}

/** An allowed request: its route's name, who it is, and the headers for the proxy to copy. */
export interface Decision {
  route: string;
  identity: Identity | undefined;
  headers: OutgoingHttpHeaders;
}

/**
 * The decision on `original`, asked by `req` (whose Authorization and socket are the caller's); a
 * refusal is thrown. `onRoute` hears the route's name as soon as one matched, refused or not
 * (the exchange counts the decision under it).
 */
export type Decide = (req: IncomingMessage, original: OriginalRequest, requestId: string, onRoute: (name: string) => void) => Promise<Decision>;

/** The sentence of a 404 decision. */
export const NO_ROUTE = 'No route of the gateway covers this request.';

export function createDecide(admit: Admit, match: (url: string) => RouteMatch | undefined, names: () => Config['proxy']['identityHeaders']): Decide {
  return async function decide(req, original, requestId, onRoute) {
    if (original.method === 'TRACE') throw new MethodNotAllowed(SERVED_METHODS);
    const matched = match(original.url);
    if (matched === undefined) throw new NotFound(NO_ROUTE);
    const { route } = matched;
    onRoute(route.name);
    // The caller's request as the route sees it: the original method and target, everything
    // else (headers, socket, certificate) the asking request's, which carries the caller's. Lent
    // to the admission on the asking request itself, and given back after: a view made with
    // Object.create(req) turned each request into a prototype, which V8 gives a map of its own,
    // so every read of a request (node:http's and the admission's) missed its inline caches; that
    // was two fifths of a decision's CPU (bench/README.md, forward auth). Nothing else reads this
    // request meanwhile: its exchange read it at arrival, and its answer is written after.
    const { method, url } = req;
    req.method = original.method;
    req.url = original.url;
    let admitted: Awaited<ReturnType<Admit>>;
    try {
      admitted = await admit(route, req, readBearerToken(req), requestId);
    } finally {
      req.method = method;
      req.url = url;
    }
    const { identity, assertion, limitHeaders, certificate } = admitted;
    const headers: OutgoingHttpHeaders = { ...limitHeaders };
    addIdentityHeaders(headers, names(), {
      identity: identity === undefined ? route.sends.anonymous : route.sends.caller,
      caller: identity, requestId, assertion, certificate, claimHeaders: route.claimHeaders, claims: identity?.claims,
    });
    return { route: route.name, identity, headers };
  };
}
