/**
 * GET /metrics (Prometheus text), GET /healthz (liveness: the process answers) and GET /readyz (readiness: the
 * instance can serve). A load balancer should route on /readyz and restart on /healthz.
 *
 * Ready means the instance serves proxied calls and its own endpoints to valid tokens. A check
 * marked `degradable` (Redis, and a directory kept in Redis, unless `readiness.requireRedis`)
 * does not decide that: when it is down, /readyz stays 200 with status `degraded` and names it
 * in `degraded`. Redis is shared by every instance, so its outage hits all of them alike:
 * taking them all out of the balancer turned a 5 s Redis stall into 7 s in which every proxied
 * call failed, while every instance was serving them (issue 26; test/redis/readiness-degraded.test.ts).
 *
 * Each check is asked anew on every /readyz (while one is out, its answer is shared), all at
 * once, and one that has not answered within its own `timeoutMs` counts as down: a stalled store must make the instance unready, not make
 * the load balancer's probe time out (which some take for "keep the old state").
 * Once the gateway is stopping (SIGTERM, server.ts), /readyz answers 503 `draining` at once,
 * without asking the stores, while requests are still served.
 */
import type { Context } from 'koa';
import { ok } from '../../errors/envelope.js';
import { StoreUnavailable } from '../../errors/errors.js';
import type { Metrics } from '../../telemetry/metrics.js';

/** A dependency that can say whether it is usable right now (services.ts lists them). */
export interface ReadinessCheck {
  name: string;
  /** Longest wait for `isReady`; then the check is down. */
  timeoutMs: number;
  isReady(): Promise<boolean>;
  /** Down: the instance still serves (reported as degraded, /readyz stays 200). */
  degradable?: boolean;
}

export function reportLiveness() {
  return async function reportLiveness(ctx: Context): Promise<void> {
    ctx.body = ok({ status: 'ok' });
  };
}

export function reportReadiness({ checks, isDraining }: { checks: readonly ReadinessCheck[]; isDraining: () => boolean }) {
  // One answer in flight per check: the /readyz calls that arrive while a check is out share
  // its answer. /readyz needs no credential (and is public without management.port), and the
  // Redis check writes: no rate of calls may become that rate of writes to Redis.
  const inFlight = new Map<ReadinessCheck, Promise<boolean>>();
  const ask = (check: ReadinessCheck): Promise<boolean> => {
    let asked = inFlight.get(check);
    if (asked === undefined) {
      asked = withinTimeout(check).finally(() => inFlight.delete(check));
      inFlight.set(check, asked);
    }
    return asked;
  };
  return async function reportReadiness(ctx: Context): Promise<void> {
    if (isDraining()) {
      ctx.status = 503;
      ctx.body = { success: false, message: { status: 'draining', checks: {} } };
      return;
    }
    const results = await Promise.all(checks.map(async (c) => [c, await ask(c)] as const));
    const down = results.filter(([, isReady]) => !isReady).map(([c]) => c);
    const degraded = down.filter((c) => c.degradable === true).map((c) => c.name);
    const ready = degraded.length === down.length;
    ctx.status = ready ? 200 : 503;
    const status = !ready ? 'unavailable' : down.length > 0 ? 'degraded' : 'ready';
    const listed = Object.fromEntries(results.map(([c, r]) => [c.name, r ? 'up' : 'down']));
    ctx.body = { success: ready, message: { status, checks: listed, ...(degraded.length > 0 ? { degraded } : {}) } };
  };
}

async function withinTimeout(check: ReadinessCheck): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), check.timeoutMs);
  });
  try {
    return await Promise.race([check.isReady().catch(() => false), timedOut]);
  } finally {
    clearTimeout(timer);
  }
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
