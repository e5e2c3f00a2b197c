/**
 * Webhook deliveries: events queued in the durable queue (state/webhooks/queue.ts) by the
 * listener, delivered by whichever instance claims them (claims and leases as the mail outbox's,
 * so two instances on one Redis deliver each once), each attempt signed afresh and recorded in
 * its endpoint's delivery log. A failure (refused address, timeout, non-2xx, redirect) is tried
 * again after the mail's backoff (30 s doubling to an hour, owner/mail.ts retryDelayMs) until
 * `maxAttempts`; then it is given up and counted. A delivery whose endpoint is gone or disabled
 * is dropped.
 */
import type { ClaimedDelivery, WebhookQueue } from '../state/webhooks/queue.js';
import type { AttemptRecord } from '../state/webhooks/store.js';
import type { Scheduler, Timer } from '../util/clock.js';
import type { Logger } from '../telemetry/log.js';
import type { WebhookResult } from '../telemetry/metrics.js';
import { retryDelayMs } from './mail.js';
import type { Attempt, DeliveryDeps } from './webhook-delivery.js';
import { deliverWebhook } from './webhook-delivery.js';

/** A claim holds its deliveries this long: well past an attempt's timeout. */
const LEASE_MS = 5 * 60_000;
const CLAIM_LIMIT = 20;
const POLL_MS = 5_000;

/** What a delivery needs of its endpoint, read at each attempt. */
export interface EndpointTarget {
  url: string;
  secret: string;
  /** A rolled secret still in its overlap: it signs too. */
  previousSecret?: string | undefined;
  enabled: boolean;
}

/** What became of an attempt (the metric's label). */
export type DeliveryResult = WebhookResult;

export interface WebhookSenderDeps {
  queue: WebhookQueue;
  clock: Scheduler;
  log: Logger;
  delivery: DeliveryDeps;
  maxAttempts: number;
  endpoint(accountId: string, endpointId: string): Promise<EndpointTarget | undefined>;
  /** Logs an attempt in its endpoint's delivery log (state/webhooks/store.ts). */
  record(endpointId: string, attempt: AttemptRecord): Promise<void>;
  count?(result: DeliveryResult): void;
}

export interface WebhookSender {
  /** Claims and delivers what is due now; answers how many were claimed. */
  runOnce(): Promise<number>;
  /** Delivers one delivery at once, outside the queue (a test send); answers the attempt. */
  sendNow(delivery: Omit<ClaimedDelivery, 'claim' | 'attempts'>, target: EndpointTarget): Promise<Attempt>;
  start(): void;
  stop(): Promise<void>;
  wake(): void;
}

export function createWebhookSender(deps: WebhookSenderDeps): WebhookSender {
  const { queue, clock, log } = deps;
  const count = deps.count ?? (() => {});

  async function attemptOnce(d: Omit<ClaimedDelivery, 'claim'>, target: EndpointTarget): Promise<Attempt> {
    const attempt = await deliverWebhook({ url: target.url, secret: target.secret, previousSecret: target.previousSecret, id: d.id, body: d.body, at: new Date(clock.now()) }, deps.delivery);
    const { ok, status, durationMs, error } = attempt;
    const record: AttemptRecord = { deliveryId: d.id, type: d.type, at: new Date(clock.now()).toISOString(), attempt: d.attempts + 1, ok, durationMs };
    if (status !== undefined) record.status = status;
    if (error !== undefined) record.error = error;
    await deps.record(d.endpointId, record).catch((err: unknown) => log.warn({ err, deliveryId: d.id }, 'webhook attempt could not be logged'));
    return attempt;
  }

  async function one(d: ClaimedDelivery): Promise<void> {
    const target = await deps.endpoint(d.accountId, d.endpointId);
    if (target === undefined || !target.enabled) {
      count('dropped');
      await queue.sent(d);
      return;
    }
    const attempt = await attemptOnce(d, target);
    if (attempt.ok) {
      count('delivered');
      await queue.sent(d);
      return;
    }
    const failures = d.attempts + 1;
    const given = failures >= deps.maxAttempts;
    log.warn({ deliveryId: d.id, endpointId: d.endpointId, failures, status: attempt.status, error: attempt.error }, given ? 'webhook given up' : 'webhook failed: tried again later');
    count(given ? 'failed' : 'retry');
    if (given) await queue.sent(d);
    else await queue.retry(d, clock.now() + retryDelayMs(failures));
  }

  async function runOnce(): Promise<number> {
    // Most rounds find nothing: a count is one plain read, where a claim is a script on Redis.
    if ((await queue.size()) === 0) return 0;
    const claimed = await queue.claim(clock.now(), LEASE_MS, CLAIM_LIMIT);
    for (const d of claimed) if (!stopping) await one(d);
    return claimed.length;
  }

  let timer: Timer | undefined;
  let running: Promise<void> | undefined;
  /** A wake during a round: another round follows at once (the event may have come after its claim). */
  let again = false;
  let stopped = true;
  let stopping = false;
  function tick(): void {
    timer?.cancel();
    if (stopped) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await runOnce();
        } catch (err) {
          log.warn({ err }, 'webhook queue could not be read: tried again later');
        }
      } while (again && !stopped);
    })().finally(() => {
      running = undefined;
      // A wake between the last round's end and this line found the run still set: honoured here.
      if (again) tick();
      else if (!stopped) timer = clock.setTimer(POLL_MS, tick);
    });
  }

  return {
    runOnce,
    sendNow: (delivery, target) => attemptOnce({ ...delivery, attempts: 0 }, target),
    start() {
      stopped = false;
      stopping = false;
      tick();
    },
    async stop() {
      stopped = true;
      stopping = true;
      timer?.cancel();
      await running;
    },
    wake() {
      tick();
    },
  };
}
