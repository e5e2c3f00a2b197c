/**
 * The circuit breaker of a store client (cockatiel): after `breakerFailures` failures in a row
 * calls fail at once, until one trial call succeeds after `breakerCooldownMs`. Its opening and
 * closing are logged once each, and a call it refuses is answered with Retry-After: the
 * cooldown in whole seconds.
 */
import { ConsecutiveBreaker, circuitBreaker, handleAll, type CircuitBreakerPolicy, type Policy } from 'cockatiel';
import type { Logger } from '../telemetry/log.js';

export interface BreakerSettings {
  breakerFailures: number;
  breakerCooldownMs: number;
}

/** `name` is the store as the log names it; `handles`, the failures that count (all, by default). */
export function createStoreBreaker(name: string, { breakerFailures, breakerCooldownMs }: BreakerSettings, log: Logger, handles: Policy = handleAll): {
  breaker: CircuitBreakerPolicy;
  retryAfterSeconds: number;
} {
  const breaker = circuitBreaker(handles, { halfOpenAfter: breakerCooldownMs, breaker: new ConsecutiveBreaker(breakerFailures) });
  breaker.onBreak(() => log.warn({ cooldownMs: breakerCooldownMs }, `${name} circuit breaker open: calls fail at once`));
  breaker.onReset(() => log.info(`${name} circuit breaker closed`));
  return { breaker, retryAfterSeconds: Math.max(1, Math.ceil(breakerCooldownMs / 1000)) };
}
