/**
 * An account's webhook endpoints and each one's delivery log: the interface the owner store is
 * to implement (memory, data file, Redis; one contract, test/contracts/webhook-endpoints.contract.ts).
 * Only the memory implementation exists so far (memory.ts beside it).
 *
 * The signing secret is kept as given (it must sign, so it cannot be a digest), and answered
 * only by `find` for the sender; a listing leaves it out.
 */
import { z } from 'zod';

/** How many attempts an endpoint's log keeps: the newest. */
export const DELIVERY_LOG_LENGTH = 50;
/** Endpoints one account may have. */
export const MAX_ENDPOINTS = 16;

export const webhookEndpointSchema = z.strictObject({
  /** "whe_" and random characters. */
  id: z.string().min(1).max(64),
  url: z.string().min(1).max(2048),
  description: z.string().max(200).default(''),
  /** Event types asked for; empty: all. */
  events: z.array(z.string().min(1).max(64)).max(32).default([]),
  enabled: z.boolean().default(true),
  /** `whsec_` and base64 (owner/webhook-signing.ts). */
  secret: z.string().min(1).max(200),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type WebhookEndpoint = z.infer<typeof webhookEndpointSchema>;
export type EndpointView = Omit<WebhookEndpoint, 'secret'>;

export const attemptRecordSchema = z.strictObject({
  deliveryId: z.string().max(64),
  type: z.string().max(64),
  at: z.string(),
  attempt: z.number().int().min(1),
  ok: z.boolean(),
  status: z.number().int().optional(),
  durationMs: z.number().int().min(0),
  error: z.string().max(300).optional(),
});
export type AttemptRecordDoc = z.infer<typeof attemptRecordSchema>;

export interface WebhookEndpointStore {
  /** Adds an endpoint; false (nothing added) when the account has MAX_ENDPOINTS already. */
  add(accountId: string, endpoint: WebhookEndpoint): Promise<boolean>;
  /** The account's endpoints, oldest first, without their secrets. */
  list(accountId: string): Promise<EndpointView[]>;
  /** One endpoint with its secret (the sender, a roll). */
  find(accountId: string, id: string): Promise<WebhookEndpoint | undefined>;
  /** Replaces an endpoint; false when it is gone. */
  update(accountId: string, endpoint: WebhookEndpoint): Promise<boolean>;
  /** Removes an endpoint and its log; false when it was gone. */
  remove(accountId: string, id: string): Promise<boolean>;
  /** Appends an attempt to the endpoint's log, keeping the newest DELIVERY_LOG_LENGTH; nothing when the endpoint is gone. */
  record(accountId: string, id: string, attempt: AttemptRecordDoc): Promise<void>;
  /** The endpoint's log, newest first. */
  log(accountId: string, id: string): Promise<AttemptRecordDoc[]>;
}
