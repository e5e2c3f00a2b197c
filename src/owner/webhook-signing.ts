/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com, spec "Signature scheme"):
 * the secret is `whsec_` + base64 of random bytes; the signature is base64 of
 * HMAC-SHA256(secret bytes, "<webhook-id>.<webhook-timestamp>.<body>") sent as `v1,<sig>` in
 * `webhook-signature`, the timestamp in whole seconds since the epoch. node:crypto's HMAC is all
 * it takes; the tests verify with the spec's own `standardwebhooks` package, an independent
 * implementation.
 */
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';
/** 32 random bytes: the spec allows 24 to 64. */
const SECRET_BYTES = 32;

/** A new signing secret, shown to the owner once (at creation and at a roll). */
export function newWebhookSecret(): string {
  return PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The three headers for one delivery attempt of `body` (the exact bytes sent), signed with each
 * of `secrets`: during a roll's overlap the new secret and the one it replaces, their signatures
 * space-separated as the spec lists several, so a receiver still on the old secret verifies too.
 */
export function signWebhook(secrets: string | readonly string[], id: string, at: Date, body: string): SignedHeaders {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const signatures = (typeof secrets === 'string' ? [secrets] : secrets).map((secret) => {
    if (!secret.startsWith(PREFIX)) throw new Error('a webhook secret starts with whsec_');
    const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
    return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
  });
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') };
}
