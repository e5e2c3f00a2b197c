/**
 * Each webhook endpoint's delivery log: the newest attempts, for the owner API
 * (listWebhookDeliveries) and the dashboard. The endpoints themselves live in their account
 * (state/owners/records.ts), written with their audit events; the log is written at every
 * attempt, so it is kept apart: in this process's memory without Redis (lost at a restart: the
 * deliveries themselves wait in the queue file), in Redis with it, shared by every instance.
 * Two implementations pass test/contracts/webhook-log.contract.ts.
 */
import { z } from 'zod';

/** How many attempts an endpoint's log keeps: the newest. */
export const DELIVERY_LOG_LENGTH = 50;
/** How long a log outlives its last attempt (Redis: the key's TTL). */
export const DELIVERY_LOG_RETENTION_MS = 30 * 86_400_000;

/** One attempt as the log keeps it: never the secret, never the body. */
export const attemptRecordSchema = z.strictObject({
  deliveryId: z.string().max(64),
  type: z.string().max(64),
  /** ISO 8601. */
  at: z.string().max(40),
  attempt: z.number().int().min(1),
  ok: z.boolean(),
  status: z.number().int().optional(),
  durationMs: z.number().int().min(0),
  error: z.string().max(300).optional(),
});
export type AttemptRecord = z.infer<typeof attemptRecordSchema>;

export interface WebhookLogStore {
  /** Appends an attempt to the endpoint's log, keeping the newest DELIVERY_LOG_LENGTH. */
  record(endpointId: string, attempt: AttemptRecord): Promise<void>;
  /** The endpoint's log, newest first. */
  list(endpointId: string): Promise<AttemptRecord[]>;
  /** Drops the endpoint's log (the endpoint is deleted). */
  forget(endpointId: string): Promise<void>;
}
