/**
 * GET /metrics (Prometheus text), GET /healthz (liveness: the process answers) and GET /readyz (readiness: every store it
 * depends on answers). A load balancer should route on /readyz and restart on /healthz.
 */
import type { Context } from 'koa';
import { ok } from '../../errors/envelope.js';
import { StoreUnavailable } from '../../errors/errors.js';
import type { Metrics } from '../../telemetry/metrics.js';

/** A dependency that can say whether it is usable right now (services.ts lists them). */
export interface ReadinessCheck {
  name: string;
  isReady(): Promise<boolean>;
}

export function reportLiveness() {
  return async function reportLiveness(ctx: Context): Promise<void> {
    ctx.body = ok({ status: 'ok' });
  };
}

export function reportReadiness({ checks }: { checks: readonly ReadinessCheck[] }) {
  return async function reportReadiness(ctx: Context): Promise<void> {
    const results = await Promise.all(checks.map(async (c) => [c.name, await c.isReady().catch(() => false)] as const));
    const ready = results.every(([, isReady]) => isReady);
    ctx.status = ready ? 200 : 503;
    ctx.body = { success: ready, message: { status: ready ? 'ready' : 'unavailable', checks: Object.fromEntries(results.map(([n, r]) => [n, r ? 'up' : 'down'])) } };
  };
}

export function reportMetrics({ metrics }: { metrics: Pick<Metrics, 'registry' | 'scrape'> }) {
  return async function reportMetrics(ctx: Context): Promise<void> {
    let text;
    try {
      text = await metrics.scrape();
    } catch (err) {
      // The cluster primary did not gather the workers' metrics in time: a failed scrape, not a bug.
      throw new StoreUnavailable(err as Error);
    }
    ctx.type = metrics.registry.contentType;
    ctx.body = text;
  };
}
