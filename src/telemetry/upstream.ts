/**
 * The backend side of one proxied exchange, as metrics and tracing read it once the exchange is
 * over. A view of the exchange's last attempt (proxy/types.ts's Flight has these fields), so
 * reading it costs no object of its own on the hot path.
 */
export interface Upstream {
  /** The backend the last attempt went to; `origin` is a configured target (a bounded label). */
  readonly target: { readonly origin: string };
  /** performance.now() when that attempt was started (its target picked, the request about to be sent). */
  readonly sentAt: number;
  /** performance.now() when the backend's response head (or a WebSocket's 101) arrived; 0 when none did. */
  readonly respondedAt: number;
}

/** Seconds from the attempt's start to the backend's answer head; undefined when it never answered. */
export function upstreamSeconds(upstream: Upstream): number | undefined {
  return upstream.respondedAt === 0 ? undefined : (upstream.respondedAt - upstream.sentAt) / 1000;
}
