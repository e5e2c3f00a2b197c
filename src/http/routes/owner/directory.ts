/**
 * Roles and sign records of an account, under /owner/v1/accounts/{accountId}: the operations
 * of owner/directory.ts, with the validation the listings need. A role is what `/api/roles`
 * lists, but shown as stored (`public` a boolean, not the listing's 0 or 1); a sign record's
 * times are ISO 8601 here, not the interface's `YYYY-MM-DD HH:MM:SS`.
 *
 * Slugs written here are 1 to 256 of a-z 0-9 . _ -, starting with a letter or digit: safe in a
 * URL, a log line and a store key as they are. Roles the data file or Redis already hold may be
 * spelt otherwise (the listing takes any text), so answers describe a slug as any text of that
 * length.
 */
import { z } from 'zod';
import { ADDRESS_PATTERN } from '../../../domain/formats.js';
import { NotFound } from '../../../errors/errors.js';
import { ID, isoTime } from '../../../state/owners/records.js';
import type { OwnerServices } from '../../../owner/service.js';
import { operation, type Operation } from '../../owner/operation.js';
import { MAX_NAME_SEARCH_LENGTH } from '../roles.js';
import type { OwnerRouteDeps } from './deps.js';
import { accountParams, actorOf, callerOf, limitField, safeName, safeText } from './schemas.js';

export const SLUG_PATTERN = /^[a-z0-9][a-z0-9._-]{0,255}$/;
const TEXT_MAX = 256;
const DESCRIPTION_MAX = 4096;

const roleId = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
/** A role id in a path: its decimal digits (no sign, no leading zeros, no exponent). */
const roleIdText = z.string().regex(/^(?:0|[1-9][0-9]{0,15})$/, 'expected a whole number from 0').transform(Number).pipe(roleId);
const address = z.string().regex(ADDRESS_PATTERN, 'expected 0x and 40 hex digits');

const roleBody = z.strictObject({
  id: roleId.describe('Roles are listed in id order: choose ids to order them.'),
  slug: z.string().regex(SLUG_PATTERN, 'expected 1 to 256 of a-z 0-9 . _ - (starting with a letter or digit)'),
  name: safeName(TEXT_MAX),
  description: safeText(DESCRIPTION_MAX).default(''),
  public: z.boolean(),
});

const roleView = z.strictObject({
  id: roleId,
  slug: z.string().min(1).max(TEXT_MAX),
  name: z.string().min(1).max(TEXT_MAX),
  description: z.string().max(DESCRIPTION_MAX),
  public: z.boolean(),
}).meta({ id: 'Role' });

const signTimes = {
  signedNonce: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  signedAt: isoTime,
  signedExpiredAt: isoTime,
};

/** signedExpiredAt must come after signedAt; named as the field at fault. */
function expiresAfterSigning(times: { signedAt: string; signedExpiredAt: string }, ctx: z.RefinementCtx): void {
  if (Date.parse(times.signedExpiredAt) <= Date.parse(times.signedAt)) {
    ctx.addIssue({ code: 'custom', path: ['signedExpiredAt'], message: 'must be later than signedAt' });
  }
}

const signRecordBody = z.strictObject({ address, ...signTimes }).superRefine(expiresAfterSigning);
const signTimesBody = z.strictObject(signTimes).superRefine(expiresAfterSigning);

const signRecordView = z.strictObject({
  address: z.string().regex(/^0x[0-9a-f]{40}$/).describe('Lowercase.'),
  signedNonce: z.number().int().nonnegative(),
  signedAt: z.iso.datetime(),
  signedExpiredAt: z.iso.datetime(),
}).meta({ id: 'SignRecord' });

/** The `message` of /api/sign (docs/api.md): times as `YYYY-MM-DD HH:MM:SS` in data.timeZone. */
const servedSignRecordView = z.strictObject({
  did: z.string().regex(ADDRESS_PATTERN).describe('The address exactly as given in the path (case kept), as /api/sign echoes it.'),
  signedNonce: z.number().int().nonnegative(),
  signedAt: z.string().regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/).describe('YYYY-MM-DD HH:MM:SS in data.timeZone.'),
  signedExpiredAt: z.string().regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/).describe('YYYY-MM-DD HH:MM:SS in data.timeZone.'),
}).meta({ id: 'ServedSignRecord' });

const roleParams = z.strictObject({ accountId: ID, roleId: roleIdText });
const signParams = z.strictObject({ accountId: ID, address });

const roleListQuery = z.strictObject({
  limit: limitField.optional(),
  cursor: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected the nextCursor of the page before').optional(),
  name: safeName(MAX_NAME_SEARCH_LENGTH, 0).optional().describe('Only roles whose name contains this (case-insensitive).'),
});

const DEFAULT_LIMIT = 50;
const TAG = 'Roles and sign records';

const toView = (record: { address: string; signedNonce: number; signedAt: number; signedExpiredAt: number }) => ({
  address: record.address,
  signedNonce: record.signedNonce,
  signedAt: new Date(record.signedAt).toISOString(),
  signedExpiredAt: new Date(record.signedExpiredAt).toISOString(),
});

const fromTimes = (body: { signedNonce: number; signedAt: string; signedExpiredAt: string }) => ({
  signedNonce: body.signedNonce,
  signedAt: Date.parse(body.signedAt),
  signedExpiredAt: Date.parse(body.signedExpiredAt),
});

const base = '/owner/v1/accounts/{accountId}';

/** Roles, then sign records, in the order the OpenAPI document lists them. */
export function directoryOperations(owner: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  return [...roleOperations(owner), ...signRecordOperations(owner, deps)];
}

function roleOperations({ directory }: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'listAccountRoles',
      method: 'get',
      path: `${base}/roles`,
      summary: 'List the account\'s roles in id order (the order /api/roles lists them in).',
      tag: TAG,
      auth: 'caller',
      params: accountParams,
      query: roleListQuery,
      response: z.strictObject({ items: z.array(roleView), nextCursor: z.string().optional() }),
      errors: [403, 404, 409],
      handle: ({ params, query, caller }) => directory.listRoles(callerOf(caller), params.accountId, {
        limit: query.limit ?? DEFAULT_LIMIT,
        ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
        ...(query.name === undefined ? {} : { nameContains: query.name }),
      }),
    }),
    operation({
      operationId: 'createAccountRole',
      method: 'post',
      path: `${base}/roles`,
      summary: 'Create a role; /api/roles serves it at once.',
      tag: TAG,
      auth: 'caller',
      params: accountParams,
      body: roleBody,
      status: 201,
      response: roleView,
      errors: [403, 404, 409],
      handle: (input) => directory.createRole(actorOf(input), input.params.accountId, input.body),
    }),
    operation({
      operationId: 'getAccountRole',
      method: 'get',
      path: `${base}/roles/{roleId}`,
      summary: 'Read one role.',
      tag: TAG,
      auth: 'caller',
      params: roleParams,
      response: roleView,
      errors: [403, 404, 409],
      handle: ({ params, caller }) => directory.getRole(callerOf(caller), params.accountId, params.roleId),
    }),
    operation({
      operationId: 'replaceAccountRole',
      method: 'put',
      path: `${base}/roles/{roleId}`,
      summary: 'Replace a role as a whole; another id moves it (that is how roles are reordered).',
      tag: TAG,
      auth: 'caller',
      params: roleParams,
      body: roleBody,
      response: roleView,
      errors: [403, 404, 409],
      handle: (input) => directory.replaceRole(actorOf(input), input.params.accountId, input.params.roleId, input.body),
    }),
    operation({
      operationId: 'deleteAccountRole',
      method: 'delete',
      path: `${base}/roles/{roleId}`,
      summary: 'Delete a role.',
      tag: TAG,
      auth: 'caller',
      params: roleParams,
      response: z.strictObject({ id: roleId, deleted: z.literal(true) }),
      errors: [403, 404, 409],
      handle: async (input) => {
        await directory.deleteRole(actorOf(input), input.params.accountId, input.params.roleId);
        return { id: input.params.roleId, deleted: true as const };
      },
    }),
  ];
}

function signRecordOperations({ directory }: OwnerServices, { signAnswers }: OwnerRouteDeps): Operation[] {
  return [
    operation({
      operationId: 'createAccountSignRecord',
      method: 'post',
      path: `${base}/sign-records`,
      summary: 'Create the sign record of an address; /api/sign serves it at once.',
      tag: TAG,
      auth: 'caller',
      params: accountParams,
      body: signRecordBody,
      status: 201,
      response: signRecordView,
      errors: [403, 404, 409],
      handle: async (input) => toView(await directory.createSignRecord(actorOf(input), input.params.accountId, {
        address: input.body.address,
        ...fromTimes(input.body),
      })),
    }),
    operation({
      operationId: 'getAccountSignRecord',
      method: 'get',
      path: `${base}/sign-records/{address}`,
      summary: 'Read the sign record of an address (in either case).',
      tag: TAG,
      auth: 'caller',
      params: signParams,
      response: signRecordView,
      errors: [403, 404, 409],
      handle: async ({ params, caller }) => toView(await directory.getSignRecord(callerOf(caller), params.accountId, params.address)),
    }),
    operation({
      operationId: 'getAccountServedSignRecord',
      method: 'get',
      path: `${base}/sign-records/{address}/served`,
      summary: 'The sign record of an address exactly as /api/sign answers it to the account\'s keys (its `message`), read through the same cache.',
      tag: TAG,
      auth: 'caller',
      params: signParams,
      response: servedSignRecordView,
      errors: [403, 404, 409],
      handle: async ({ params, caller }) => {
        await directory.checkRead(callerOf(caller), params.accountId);
        const answer = await signAnswers(params.accountId, params.address);
        if (answer === undefined) throw new NotFound('No such sign record.');
        return answer;
      },
    }),
    operation({
      operationId: 'replaceAccountSignRecord',
      method: 'put',
      path: `${base}/sign-records/{address}`,
      summary: 'Replace the nonce and times of an address\'s sign record.',
      tag: TAG,
      auth: 'caller',
      params: signParams,
      body: signTimesBody,
      response: signRecordView,
      errors: [403, 404, 409],
      handle: async (input) => toView(await directory.replaceSignRecord(actorOf(input), input.params.accountId, input.params.address, fromTimes(input.body))),
    }),
    operation({
      operationId: 'deleteAccountSignRecord',
      method: 'delete',
      path: `${base}/sign-records/{address}`,
      summary: 'Delete the sign record of an address.',
      tag: TAG,
      auth: 'caller',
      params: signParams,
      response: z.strictObject({ address: z.string().regex(/^0x[0-9a-f]{40}$/), deleted: z.literal(true) }),
      errors: [403, 404, 409],
      handle: async (input) => {
        await directory.deleteSignRecord(actorOf(input), input.params.accountId, input.params.address);
        return { address: input.params.address.toLowerCase(), deleted: true as const };
      },
    }),
  ];
}
