/**
 * Cross-origin calls from browsers (the `cors` settings; docs/api.md, "CORS"): the one place
 * that decides and writes CORS headers, for the Koa side (app.ts) and the proxied-route path
 * (app.ts, proxy/forward.ts) alike. Off while `cors.allowedOrigins` is empty: nothing here is
 * then built or called, and no answer changes.
 *
 * The gateway's tokens are bearer tokens, never cookies, so credentials mode is never needed
 * and Access-Control-Allow-Credentials is never sent. CORS is not access control: a request
 * from an origin not listed is still served as without CORS, its answer only lacks the headers
 * a browser needs to hand it to the page. A preflight, though, is answered by the gateway
 * itself (204, or a 403 refusal), never by a route, a backend or an authentication check.
 *
 * The owner API (a cookie session with its own CSRF check), /metrics, /healthz, /readyz and
 * /openapi.json stay same-origin: no CORS headers, and their preflights are refused.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Context, Next } from 'koa';
import type { Config } from '../config/schema.js';
import { GatewayError } from '../errors/errors.js';

/** Request headers every CORS path takes: the token, a JSON body's type, and the caller's request id. */
const BASE_ALLOW_HEADERS = ['authorization', 'content-type', 'x-request-id', 'dpop'];
/** Answer headers a script needs to read: the id to report, and what a refusal asks of it. */
const BASE_EXPOSE_HEADERS = ['X-Request-Id', 'Retry-After', 'RateLimit', 'RateLimit-Policy', 'WWW-Authenticate', 'DPoP-Nonce'];
/** What a proxied route takes: the methods the gateway serves but TRACE (refused) and OPTIONS (the preflight's own). */
export const PROXIED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE';
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Paths kept same-origin (compared as the own-path check reads paths: lower case, without `;` parameters). */
const SAME_ORIGIN_PATHS: ReadonlySet<string> = new Set(['/metrics', '/healthz', '/readyz', '/openapi.json']);

/** The refusal of a preflight: no allow headers, so the browser stops there. */
export class CorsRefused extends GatewayError {
  constructor(code: 'cors_origin_not_allowed' | 'cors_request_not_allowed', message: string) {
    super(403, code, message);
  }
}

export interface Cors {
  /** True for a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method. */
  isPreflight(req: IncomingMessage): boolean;
  /**
   * The preflight's answer headers when the path (taking `methods`, null for a path kept
   * same-origin) allows it from this origin; throws CorsRefused otherwise.
   */
  preflight(req: IncomingMessage, methods: string | null): Record<string, string>;
  /** The Access-Control-Allow-Origin value for an actual request, or undefined (no Origin, or not allowed). */
  allowedOrigin(req: IncomingMessage): string | undefined;
  /** Sets the headers of an actual answer on a CORS path (Vary always; the rest for an allowed origin). */
  decorate(res: ServerResponse, origin: string | undefined): void;
  /** A backend's answer headers, with the gateway owning CORS: its Access-Control-* go, Vary gains Origin. */
  takeOverBackend(head: OutgoingHttpHeaders): OutgoingHttpHeaders;
}

/** Undefined when CORS is off (no allowed origin). */
export function createCors(config: Config['cors']): Cors | undefined {
  if (config.allowedOrigins.length === 0) return undefined;
  const anyOrigin = config.allowedOrigins.includes('*');
  const origins: ReadonlySet<string> = new Set(config.allowedOrigins);
  const allowHeaders = [...new Set([...BASE_ALLOW_HEADERS, ...config.allowHeaders.map((name) => name.toLowerCase())])];
  const allowHeaderSet: ReadonlySet<string> = new Set(allowHeaders);
  const allowHeadersValue = allowHeaders.join(', ');
  const exposeValue = [...new Map([...BASE_EXPOSE_HEADERS, ...config.exposeHeaders].map((name) => [name.toLowerCase(), name])).values()].join(', ');
  const maxAge = String(config.maxAgeSeconds);

  function allowedOrigin(req: IncomingMessage): string | undefined {
    const origin = req.headers.origin;
    if (origin === undefined) return undefined;
    if (anyOrigin) return '*';
    // Only a listed origin is ever echoed: an Origin not in the set is never written back.
    return origins.has(origin) ? origin : undefined;
  }

  return {
    isPreflight: (req) => req.method === 'OPTIONS' && req.headers.origin !== undefined && req.headers['access-control-request-method'] !== undefined,

    preflight(req, methods) {
      const origin = allowedOrigin(req);
      if (origin === undefined) throw new CorsRefused('cors_origin_not_allowed', 'This origin may not call the gateway from a browser (cors.allowedOrigins).');
      if (methods === null) throw new CorsRefused('cors_origin_not_allowed', 'This path is not open to other origins.');
      const method = req.headers['access-control-request-method'] ?? '';
      // Methods are case-sensitive (RFC 9110 §9.1); browsers upper-case the standard ones.
      if (!methods.split(', ').includes(method)) throw new CorsRefused('cors_request_not_allowed', `This path does not take this method from a browser; it takes ${methods}.`);
      const requested = req.headers['access-control-request-headers'];
      if (requested !== undefined) {
        for (const part of requested.split(',')) {
          const name = part.trim().toLowerCase();
          if (name !== '' && (!TOKEN.test(name) || !allowHeaderSet.has(name))) {
            throw new CorsRefused('cors_request_not_allowed', `A requested header is not allowed; allowed: ${allowHeadersValue} (cors.allowHeaders).`);
          }
        }
      }
      return {
        'Access-Control-Allow-Origin': origin,
        'Access-Control-Allow-Methods': methods,
        'Access-Control-Allow-Headers': allowHeadersValue,
        'Access-Control-Max-Age': maxAge,
        Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
      };
    },

    allowedOrigin,

    decorate(res, origin) {
      res.setHeader('Vary', withOrigin(res.getHeader('vary')));
      if (origin === undefined) return;
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Expose-Headers', exposeValue);
    },

    takeOverBackend(head) {
      for (const name of Object.keys(head)) {
        if (name.startsWith('access-control-')) delete head[name];
      }
      if (head.vary !== undefined) head.vary = withOrigin(head.vary);
      return head;
    },
  };
}

/** `vary` with Origin added once (a `*` already covers it). */
function withOrigin(vary: string | number | string[] | undefined): string {
  const value = Array.isArray(vary) ? vary.join(', ') : vary === undefined ? '' : String(vary);
  if (value.trim() === '') return 'Origin';
  if (value.split(',').some((part) => /^\s*(?:origin|\*)\s*$/i.test(part))) return value;
  return `${value}, Origin`;
}

/** A path kept same-origin: the owner API's tree, metrics, health, the owner API's description. */
export function isSameOriginPath(path: string, ownerTree: string): boolean {
  const key = (path.includes(';') ? path.replace(/;[^/]*/g, '') : path).toLowerCase();
  const bare = key.length > 1 && key.endsWith('/') ? key.slice(0, -1) : key;
  return bare === ownerTree || bare.startsWith(`${ownerTree}/`) || SAME_ORIGIN_PATHS.has(bare);
}

/**
 * Koa's half, outside the error boundary (so error answers get the headers too): the headers
 * of an actual answer on a CORS path. Set after the chain ran, when ctx.path is the path the
 * edge normalised (the boundary would drop anything set before an error).
 */
export function corsAnswers(cors: Cors, ownerTree: string) {
  return async function corsAnswers(ctx: Context, next: Next): Promise<void> {
    await next();
    if (cors.isPreflight(ctx.req) || isSameOriginPath(ctx.path, ownerTree)) return;
    cors.decorate(ctx.res, cors.allowedOrigin(ctx.req));
  };
}

/**
 * Koa's half, after the edge's checks and before the router: a preflight to a path the router
 * serves (or keeps same-origin) is answered here; one to a path nothing serves goes on to the 404.
 */
export function corsPreflights(cors: Cors, ownerTree: string, methodsOf: (path: string) => string | undefined) {
  return async function corsPreflights(ctx: Context, next: Next): Promise<void> {
    if (!cors.isPreflight(ctx.req)) return next();
    const sameOrigin = isSameOriginPath(ctx.path, ownerTree);
    const methods = sameOrigin ? null : methodsOf(ctx.path);
    if (methods === undefined) return next();
    ctx.set(cors.preflight(ctx.req, methods));
    ctx.status = 204;
  };
}
