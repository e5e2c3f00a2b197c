/**
 * One delivery attempt: resolve and check the endpoint's address (owner/webhook-address.ts),
 * connect to that address with the URL's name as Host and SNI, POST the signed body, and read
 * at most a few KiB of the answer. Redirects are not followed (a 3xx is a failed attempt: a
 * redirect could lead anywhere the check refused), and the attempt ends at `timeoutMs`. What it
 * answers goes into the endpoint's delivery log: status, duration, error, never the secret.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { type Lookup, resolveForDelivery, type WebhookNetworkPolicy } from './webhook-address.js';
import { signWebhook } from './webhook-signing.js';

/** How much of a receiver's answer is kept (for the log). */
const BODY_LIMIT = 4096;

export interface Attempt {
  ok: boolean;
  /** The receiver's status, when it answered. */
  status?: number;
  durationMs: number;
  /** Why it failed (refused address, timeout, connection error, non-2xx). */
  error?: string;
  /** The first bytes of the answer. */
  body?: string;
}

export interface DeliveryInput {
  url: string;
  secret: string;
  /** A rolled secret still in its overlap: it signs too. */
  previousSecret?: string | undefined;
  /** The message id (`webhook-id`): the same for every attempt of one event. */
  id: string;
  body: string;
  at: Date;
}

export interface DeliveryDeps {
  policy: WebhookNetworkPolicy;
  timeoutMs: number;
  lookup?: Lookup;
  /** Elapsed time for the log (monotonic). */
  now?: () => number;
}

export async function deliverWebhook(input: DeliveryInput, deps: DeliveryDeps): Promise<Attempt> {
  const now = deps.now ?? (() => performance.now());
  const started = now();
  const url = new URL(input.url);
  const resolved = await resolveForDelivery(url, deps.policy, deps.lookup);
  if (!resolved.ok) return { ok: false, durationMs: 0, error: resolved.reason };
  // The connection goes to the checked address whatever the name resolves to by now.
  const pinned: LookupFunction = (_host, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: resolved.address, family: resolved.family }]);
    else callback(null, resolved.address, resolved.family);
  };
  const headers = { 'content-type': 'application/json', 'user-agent': 'gateway-webhooks', ...signWebhook(input.previousSecret === undefined ? input.secret : [input.secret, input.previousSecret], input.id, input.at, input.body) };
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<Attempt>((resolve) => {
    let settled = false;
    // The whole attempt, not just an idle socket: a receiver dripping bytes ends here too.
    const timer = setTimeout(() => {
      finish({ ok: false, error: `no answer within ${deps.timeoutMs} ms` });
      req.destroy();
    }, deps.timeoutMs);
    const finish = (attempt: Omit<Attempt, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...attempt, durationMs: Math.round(now() - started) });
    };
    const req = send(url, { method: 'POST', headers, lookup: pinned, servername: url.hostname }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (size < BODY_LIMIT) chunks.push(chunk.subarray(0, BODY_LIMIT - size));
        size += chunk.length;
        if (size >= BODY_LIMIT) res.destroy();
      });
      const done = () => {
        const status = res.statusCode ?? 0;
        const body = Buffer.concat(chunks).toString('utf8');
        finish(status >= 200 && status < 300 ? { ok: true, status, body } : { ok: false, status, body, error: `answered ${status}` });
      };
      res.on('end', done);
      res.on('close', done);
    });
    req.on('error', (err) => finish({ ok: false, error: err.message }));
    req.end(input.body);
  });
}
