/**
 * Prometheus metrics (prom-client), one registry per gateway so that several in one process
 * (the tests) keep their counts apart. Labels are bounded sets (limit names, outcomes): never
 * an account, key or address, which would grow without bound and end up in a dashboard.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  readonly registry: Registry;
  /** Rate-limit decisions by limit and outcome (`admitted`, `refused`, `would_refuse` in dry-run). */
  readonly rateLimitDecisions: Counter<'limit' | 'outcome'>;
  /** 1 while a limit cannot reach Redis and runs under its failure policy, else 0. */
  readonly rateLimitDegraded: Gauge<'limit' | 'policy'>;
  /** Counter calls to Redis that failed, by limit and the policy applied instead. */
  readonly rateLimitStoreFailures: Counter<'limit' | 'policy'>;

  // WebSockets (proxy/websocket.ts); the reasons are the close reasons docs/proxying.md lists.
  /** WebSockets open now, by route name. */
  readonly webSocketConnections: Gauge<'route'>;
  /** WebSockets closed, by route name and reason: client, backend, expired, reset, idle, drain, error. */
  readonly webSocketsClosed: Counter<'route' | 'reason'>;
}

export function createMetrics({ processMetrics = true }: { processMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (processMetrics) collectDefaultMetrics({ register: registry, prefix: 'gateway_' });
  return {
    registry,
    rateLimitDecisions: new Counter({
      name: 'gateway_rate_limit_decisions_total',
      help: 'Rate-limit decisions, by limit and outcome (would_refuse: a dry-run limit over its quota).',
      labelNames: ['limit', 'outcome'],
      registers: [registry],
    }),
    rateLimitDegraded: new Gauge({
      name: 'gateway_rate_limit_degraded',
      help: '1 while a limit cannot reach Redis and runs under its failure policy (memory, open or closed).',
      labelNames: ['limit', 'policy'],
      registers: [registry],
    }),
    rateLimitStoreFailures: new Counter({
      name: 'gateway_rate_limit_store_failures_total',
      help: 'Rate-limit counter calls to Redis that failed or timed out, by limit and the policy applied instead.',
      labelNames: ['limit', 'policy'],
      registers: [registry],
    }),

    // WebSockets: route names come from the configuration, reasons from a fixed list.
    webSocketConnections: new Gauge({
      name: 'gateway_websocket_connections',
      help: 'WebSockets open now, by route.',
      labelNames: ['route'],
      registers: [registry],
    }),
    webSocketsClosed: new Counter({
      name: 'gateway_websocket_closed_total',
      help: 'WebSockets closed, by route and reason (client, backend, expired, reset, idle, drain, error).',
      labelNames: ['route', 'reason'],
      registers: [registry],
    }),
  };
}
