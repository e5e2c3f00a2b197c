/**
 * Per-key usage of an account (src/owner/usage.ts): the calls and rate-limited calls of each key
 * and API settings token over the last 1 to 24 hours, in whole 5-minute buckets.
 */
import { z } from 'zod';
import type { OwnerServices } from '../../../owner/service.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';
import { accountParams, callerOf } from './schemas.js';

const DEFAULT_HOURS = 24;

/** `hours` 1–24 in plain decimal digits (not `1e1` or `0x10`, as Number() would read). */
const usageQuery = z.strictObject({
  hours: z.string().regex(/^[0-9]{1,2}$/, 'expected a whole number from 1 to 24').transform(Number).pipe(z.number().int().min(1).max(24)).optional()
    .describe('How far back the window reaches, in hours (1 to 24; default 24). It starts at the start of the bucket that many hours ago.'),
});

const keyUsageView = z.strictObject({
  keyId: z.string().describe('An API key id, or an API settings token id (`stk_…`).'),
  requests: z.number().int().nonnegative().describe('Calls admitted (proxied routes, WebSocket handshakes, /api/sign, /api/roles).'),
  rateLimited: z.number().int().nonnegative().describe('Calls refused with 429 by a rate limit (not in `requests`).'),
}).meta({ id: 'KeyUsage' });

const usageView = z.strictObject({
  from: z.iso.datetime().describe('Start of the oldest bucket read.'),
  to: z.iso.datetime().describe('Now.'),
  bucketSeconds: z.number().int().positive().describe('Length of a bucket: 300 (five minutes)'),
  enabled: z.boolean().describe('False while usage counting is off (`usage.enabled`): nothing is counted and `items` is empty.'),
  items: z.array(keyUsageView).describe('Keys with any count in the window, by key id.'),
}).meta({ id: 'Usage' });

export function usageOperations(owner: OwnerServices, _deps: OwnerRouteDeps): Operation[] {
  return [
    operation({
      operationId: 'getAccountUsage',
      method: 'get',
      path: '/owner/v1/accounts/{accountId}/usage',
      summary: 'Calls and rate-limited calls per key over the last hours, from the gateway\'s own counters (a few seconds behind).',
      tag: 'Usage',
      auth: 'caller',
      params: accountParams,
      query: usageQuery,
      response: usageView,
      errors: [404],
      handle: ({ params, query, caller }) => owner.usage.get(callerOf(caller), params.accountId, query.hours ?? DEFAULT_HOURS),
    }),
  ];
}
