/**
 * The configured routes, matched on the normalised path (http/middleware/normalise-path.ts).
 *
 * A prefix matches on segment boundaries (`/orders` takes `/orders`, `/orders/` and
 * `/orders/42`, never `/ordersx`), the longest prefix wins, and prefixes compare without case:
 * a backend that reads paths without case must not be reachable at `/ADMIN` through a public
 * catch-all while `/admin` requires a token.
 */
import type { RouteConfig } from '../config/schema.js';
import { TargetPool } from './targets.js';
import type { Agents } from './targets.js';

export interface Route extends Readonly<RouteConfig> {
  readonly name: string;
  readonly pool: TargetPool;
}

export interface RouteMatch {
  route: Route;
  /** Path and query to send to the backend (prefix stripped when the route says so). */
  upstreamUrl: string;
}

export class RouteTable {
  readonly routes: readonly Route[];
  /** Longest prefix first, so the first match is the most specific. */
  readonly #ordered: readonly { lower: string; route: Route }[];

  constructor(configs: readonly RouteConfig[], agents: Agents) {
    this.routes = configs.map((config) => Object.freeze({
      ...config,
      name: config.name ?? config.prefix,
      pool: new TargetPool(config, agents),
    }));
    this.#ordered = this.routes
      .map((route) => ({ lower: route.prefix === '/' ? '' : route.prefix.toLowerCase(), route }))
      .sort((a, b) => b.lower.length - a.lower.length);
  }

  /** The route for a normalised path and the URL its backend gets, or undefined. */
  match(url: string): RouteMatch | undefined {
    if (this.#ordered.length === 0) return undefined;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const lower = path.toLowerCase();
    for (const { lower: prefix, route } of this.#ordered) {
      if (!lower.startsWith(prefix)) continue;
      const next = lower.charCodeAt(prefix.length);
      // Segment boundary: the path ends here, or a "/" follows (also true for the "/" route).
      if (!Number.isNaN(next) && next !== 0x2f) continue;
      if (!route.stripPrefix || prefix === '') return { route, upstreamUrl: url };
      const rest = url.slice(prefix.length);
      return { route, upstreamUrl: rest === '' || rest.startsWith('?') ? `/${rest}` : rest };
    }
    return undefined;
  }
}
