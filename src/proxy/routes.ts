/**
 * The configured routes, matched on the normalised path (http/middleware/normalise-path.ts).
 *
 * A prefix matches on segment boundaries (`/orders` takes `/orders`, `/orders/` and
 * `/orders/42`, never `/ordersx`), the longest prefix wins, and prefixes compare without case:
 * a backend that reads paths without case must not be reachable at `/ADMIN` through a public
 * catch-all while `/admin` requires a token. For the same reason segment parameters are
 * ignored when matching (`/admin;x=1/users` is the `/admin` route): servers that read them
 * (Tomcat, Spring) route that path to `/admin/users`.
 */
import type { IdentityPart, RouteConfig } from '../config/schema.js';
import { compileClaimHeaders, type ClaimHeaders } from './claim-headers.js';
import { compilePolicy, type Policy } from './policy.js';
import { TargetPool } from './targets.js';
import type { Agents } from './targets.js';

/** Which identity headers go to the backend. */
export interface IdentityParts {
  readonly account: boolean;
  readonly key: boolean;
  readonly token: boolean;
  readonly request: boolean;
  readonly scopes: boolean;
  readonly roles: boolean;
}

export interface Route extends Readonly<RouteConfig> {
  readonly name: string;
  readonly pool: TargetPool;
  /** The identity headers sent for an authenticated caller, and for an anonymous one. */
  readonly sends: { readonly caller: IdentityParts; readonly anonymous: IdentityParts };
  /** The `allow` rules compiled (policy.ts), undefined when the route has none. */
  readonly policy: Policy | undefined;
  /** The `identityHeaders` compiled (claim-headers.ts), undefined when the route has none. */
  readonly claimHeaders: ClaimHeaders | undefined;
}

export interface RouteMatch {
  route: Route;
  /**
   * Path and query to send to the backend (prefix stripped when the route says so), joined to
   * the target's base path; only the query (or '') when the whole path was the stripped prefix.
   */
  upstreamUrl: string;
}

export class RouteTable {
  readonly routes: readonly Route[];
  /** Longest prefix first, so the first match is the most specific. */
  readonly #ordered: readonly { lower: string; segments: number; route: Route }[];
  /** Each route by its configuration as written, for the next table of a reload. */
  readonly #byConfig: ReadonlyMap<string, Route>;

  /**
   * `previous`: the table a reload replaces. A route configured exactly as before is kept as
   * it is, with its targets' health (an ejected target stays out).
   */
  constructor(configs: readonly RouteConfig[], agents: Agents, previous?: RouteTable) {
    const byConfig = new Map<string, Route>();
    this.routes = configs.map((config) => {
      const key = JSON.stringify(config);
      const route = (previous === undefined ? undefined : previous.#byConfig.get(key)) ?? this.#build(config, agents);
      byConfig.set(key, route);
      return route;
    });
    this.#byConfig = byConfig;
    this.#ordered = this.routes
      .map((route) => ({
        lower: route.prefix === '/' ? '' : route.prefix.toLowerCase(),
        segments: route.prefix === '/' ? 0 : route.prefix.split('/').length - 1,
        route,
      }))
      .sort((a, b) => b.lower.length - a.lower.length);
  }

  #build(config: RouteConfig, agents: Agents): Route {
    const has = (part: IdentityPart) => config.identity.includes(part);
    const caller = { account: has('account'), key: has('key'), token: has('token'), request: has('request'), scopes: has('scopes'), roles: has('roles') };
    return Object.freeze({
      ...config,
      name: config.name ?? config.prefix,
      pool: new TargetPool(config, agents),
      // A public route has no caller: only the request id can go.
      sends: { caller, anonymous: { account: false, key: false, token: false, request: caller.request, scopes: false, roles: false } },
      policy: compilePolicy(config.allow, config.allowMode),
      claimHeaders: compileClaimHeaders(config.identityHeaders),
    });
  }

  /** The route for a normalised path and the URL its backend gets, or undefined. */
  match(url: string): RouteMatch | undefined {
    if (this.#ordered.length === 0) return undefined;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const key = (path.includes(';') ? path.replace(/;[^/]*/g, '') : path).toLowerCase();
    for (const { lower: prefix, segments, route } of this.#ordered) {
      if (!key.startsWith(prefix)) continue;
      const next = key.charCodeAt(prefix.length);
      // Segment boundary: the path ends here, or a "/" follows (also true for the "/" route).
      if (!Number.isNaN(next) && next !== 0x2f) continue;
      if (!route.stripPrefix || segments === 0) return { route, upstreamUrl: url };
      // As many segments as the prefix has, counted on the path as sent (parameters and all).
      let end = 0;
      for (let i = 0; i < segments && end !== -1; i++) end = path.indexOf('/', end + 1);
      // The prefix itself: only the query goes on, so the target's base path is sent as written
      // (`/status` to `http://b/health` sends `/health`, not `/health/`, as nginx's proxy_pass
      // with a URI replaces the location), and a target without one gets `/`.
      if (end === -1) return { route, upstreamUrl: url.slice(path.length) };
      return { route, upstreamUrl: `${path.slice(end)}${url.slice(path.length)}` };
    }
    return undefined;
  }
}
