/**
 * Per-key usage of an account (src/owner/usage.ts): the calls, rate-limited calls and calls per
 * class of status of each key and API settings token over the last 1 to 24 hours (in whole
 * 5-minute buckets, by hour) or 1 to 30 days (in whole UTC days, by day).
 */
import { z } from 'zod';
import type { OwnerServices } from '../../../owner/service.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';
import { accountParams, callerOf, idField } from './schemas.js';

const DEFAULT_HOURS = 24;

/** A whole number from 1 to `max` in plain decimal digits (not `1e1` or `0x10`, as Number() would read). */
function wholeUpTo(max: number) {
  return z.string().regex(/^[0-9]{1,2}$/, `expected a whole number from 1 to ${max}`).transform(Number).pipe(z.number().int().min(1).max(max));
}

const usageQuery = z.strictObject({
  hours: wholeUpTo(24).optional()
    .describe('How far back the window reaches, in hours (1 to 24; default 24, unless `days` is given). It starts at the start of the 5-minute bucket that many hours ago; its steps are hours.'),
  days: wholeUpTo(30).optional()
    .describe('Instead of `hours`: how far back the window reaches, in days (1 to 30). It starts at the start of the UTC day that many days ago; its steps are UTC days.'),
  keyId: idField.optional()
    .describe('Only this API key\'s (or API settings token\'s) counts, in `items` and `series`.'),
}).superRefine((query, ctx) => {
  if (query.hours !== undefined && query.days !== undefined) ctx.addIssue({ code: 'custom', path: ['days'], message: 'expected either hours or days, not both' });
});

const statusesView = z.strictObject({
  '1xx': z.number().int().nonnegative().describe('WebSocket handshakes switched (101).'),
  '2xx': z.number().int().nonnegative(),
  '3xx': z.number().int().nonnegative(),
  '4xx': z.number().int().nonnegative().describe('Rate-limited calls (429) included.'),
  '5xx': z.number().int().nonnegative(),
}).describe('The same calls (admitted and rate-limited) by the class of the status they were answered with, counted when the answer ended: a call still being answered shows in `requests` only.')
  .meta({ id: 'UsageStatuses' });

const countsShape = {
  requests: z.number().int().nonnegative().describe('Calls admitted (proxied routes, WebSocket handshakes, /api/sign, /api/roles, forward-auth decisions).'),
  rateLimited: z.number().int().nonnegative().describe('Calls refused with 429 by a rate limit (not in `requests`).'),
  statuses: statusesView,
};

const keyUsageView = z.strictObject({
  keyId: z.string().describe('An API key id, or an API settings token id (`stk_…`).'),
  ...countsShape,
}).meta({ id: 'KeyUsage' });

const usageStepView = z.strictObject({
  start: z.iso.datetime().describe('Start of the step (of the window, for the first).'),
  ...countsShape,
}).meta({ id: 'UsageStep' });

const usageView = z.strictObject({
  from: z.iso.datetime().describe('Start of the oldest bucket read.'),
  to: z.iso.datetime().describe('Now.'),
  bucketSeconds: z.number().int().positive().describe('Length of the buckets the window is made of: 300 (five minutes) with `hours`, 86400 (a UTC day) with `days`.'),
  stepSeconds: z.number().int().positive().describe('Length of a step of `series`: 3600 with `hours`, 86400 with `days`.'),
  enabled: z.boolean().describe('False while usage counting is off (`usage.enabled`): nothing is counted, `items` is empty and every step 0.'),
  items: z.array(keyUsageView).describe('Keys with any count in the window, by key id (only `keyId`, when asked for).'),
  series: z.array(usageStepView).describe('Every step of the window, oldest first (hours + 1 or days + 1 of them; the last is the one now is in), summed over `items`.'),
}).meta({ id: 'Usage' });

export function usageOperations(owner: OwnerServices, _deps: OwnerRouteDeps): Operation[] {
  return [
    operation({
      operationId: 'getAccountUsage',
      method: 'get',
      path: '/owner/v1/accounts/{accountId}/usage',
      summary: 'Calls, rate-limited calls and calls per class of status, per key and per hour or day, from the gateway\'s own counters (a few seconds behind).',
      tag: 'Usage',
      auth: 'caller',
      params: accountParams,
      query: usageQuery,
      response: usageView,
      errors: [404],
      handle: ({ params, query, caller }) => owner.usage.get(
        callerOf(caller),
        params.accountId,
        query.days !== undefined ? { days: query.days } : { hours: query.hours ?? DEFAULT_HOURS },
        query.keyId,
      ),
    }),
  ];
}
