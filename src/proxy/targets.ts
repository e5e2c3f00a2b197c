/**
 * The backends of a route: round-robin over the healthy ones, passive health, and one
 * keep-alive connection pool per backend origin (shared by the routes that name it).
 *
 * Passive health: `ejectAfterFailures` consecutive failures (refused, reset or timed out before
 * a response; an HTTP answer of any status is a success) take a target out for `ejectMs`.
 * When every target of a route is out, the one due back first is tried anyway, as Envoy's
 * panic mode does: an outage of the health view must not become an outage of the route.
 */
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { Pool } from 'undici';
import type { RouteConfig } from '../config/schema.js';
import { outgoingPath } from './outgoing.js';

export interface Target {
  readonly url: URL;
  readonly agent: HttpAgent;
  /** Where the pools of a cleartext target come from (flight.ts); undefined for an https one. */
  readonly pools: Agents | undefined;
  /** Where requests go (flight.ts): host name (an IPv6 address without brackets) and port (0: the scheme's). */
  readonly hostname: string;
  readonly port: number;
  /** The target's path and query, as http-proxy-3 prepends them to a request's. */
  readonly path: string;
  /** For logs: the origin, never credentials (targets have none). */
  readonly origin: string;
  failures: number;
  ejectedUntil: number;
}

/**
 * Keep-alive pools by backend origin: node:http's agent, and undici's Pool for the bodiless
 * requests to a cleartext backend (flight.ts). A Pool's connect timeout is its own, not a
 * request's, so there is one per origin and connect timeout: routes naming one origin with the
 * same connectTimeoutMs (the default) share its connections, and maxSocketsPerTarget bounds each.
 */
export class Agents {
  readonly #byOrigin = new Map<string, HttpAgent>();
  readonly #pools = new Map<string, Pool>();
  readonly #maxSockets: number;

  constructor(maxSockets: number) {
    this.#maxSockets = maxSockets;
  }

  for(url: URL): HttpAgent {
    let agent = this.#byOrigin.get(url.origin);
    if (agent === undefined) {
      const options = {
        keepAlive: true,
        maxSockets: this.#maxSockets,
        maxFreeSockets: this.#maxSockets,
        // The most recently used connection is the one least likely to have been closed by
        // the backend's own idle timeout.
        scheduling: 'lifo' as const,
      };
      agent = url.protocol === 'https:' ? new HttpsAgent(options) : new HttpAgent(options);
      this.#byOrigin.set(url.origin, agent);
    }
    return agent;
  }

  /** undici's keep-alive pool to a cleartext origin, for requests with the route's connect timeout. */
  pool(origin: string, connectTimeoutMs: number): Pool {
    const key = `${connectTimeoutMs} ${origin}`;
    let pool = this.#pools.get(key);
    if (pool === undefined) {
      pool = new Pool(origin, { connections: this.#maxSockets, connectTimeout: connectTimeoutMs });
      this.#pools.set(key, pool);
    }
    return pool;
  }

  destroy(): void {
    for (const agent of this.#byOrigin.values()) agent.destroy();
    this.#byOrigin.clear();
    for (const pool of this.#pools.values()) void pool.destroy().catch(() => undefined);
    this.#pools.clear();
  }
}

export class TargetPool {
  readonly targets: readonly Target[];
  readonly #ejectAfter: number;
  readonly #ejectMs: number;
  #next = 0;

  constructor(config: Pick<RouteConfig, 'targets' | 'ejectAfterFailures' | 'ejectMs'>, agents: Agents) {
    this.targets = config.targets.map((text) => {
      const url = new URL(text);
      return {
        url, agent: agents.for(url), pools: url.protocol === 'http:' ? agents : undefined, hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port), path: targetPath(url),
        origin: url.origin, failures: 0, ejectedUntil: 0,
      };
    });
    this.#ejectAfter = config.ejectAfterFailures;
    this.#ejectMs = config.ejectMs;
  }

  /** The next healthy target in turn, skipping `exclude` (a target that just failed). */
  pick(now: number, exclude?: Target): Target {
    const { targets } = this;
    for (let i = 0; i < targets.length; i++) {
      const target = targets[this.#next++ % targets.length]!;
      if (target.ejectedUntil <= now && target !== exclude) return target;
    }
    // Panic: every target is out (or only the excluded one is in); try the one due back first.
    let best = targets[0]!;
    for (const target of targets) {
      if (target !== exclude && (best === exclude || target.ejectedUntil < best.ejectedUntil)) best = target;
    }
    return best;
  }

  succeeded(target: Target): void {
    target.failures = 0;
    target.ejectedUntil = 0;
  }

  /** Returns true when this failure took the target out. */
  failed(target: Target, now: number): boolean {
    target.failures++;
    if (target.failures < this.#ejectAfter) return false;
    target.failures = 0;
    target.ejectedUntil = now + this.#ejectMs;
    return true;
  }
}

/** What http-proxy-3's setupOutgoing makes of a target URL's path and query (its getPath), once per target. */
function targetPath(url: URL): string {
  return outgoingPath(`${url.pathname}${url.search}`);
}
