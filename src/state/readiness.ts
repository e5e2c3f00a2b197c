/**
 * A store's part of /readyz. The same shape as the HTTP layer's ReadinessCheck
 * (http/routes/health.ts), which this layer must not import: the checks the state factory makes
 * are handed up as they are.
 */
export interface StoreCheck {
  name: string;
  /** Longest wait for `isReady`; then the check is down. */
  timeoutMs: number;
  isReady(): Promise<boolean>;
  /** Down: the instance still serves (reported as degraded, /readyz stays 200). */
  degradable?: boolean;
}
