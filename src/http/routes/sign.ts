/**
 * GET or POST /api/sign?address=0x…: the caller's account's sign record for an address
 * (interface §4.3). `did` echoes the address exactly as the caller spelt it; the lookup itself
 * is case-insensitive. A POST body is read (bounded) and ignored: the example sends none.
 */
import type { Context } from 'koa';
import type { Identity } from '../../auth/bearer.js';
import { ok } from '../../errors/envelope.js';
import { InvalidRequest, NotFound } from '../../errors/errors.js';
import { ADDRESS_PATTERN } from '../../domain/formats.js';
import type { Directory, SignRecord } from '../../state/directory/store.js';
import type { TimestampFormatter } from '../../util/time.js';
import { discardBody } from '../body.js';
import { singleQueryParam } from '../query.js';

/** What /api/sign answers for an address (its `message`): `did` is the address as the caller spelt it. */
export interface SignAnswer {
  did: string;
  signedNonce: number;
  signedAt: string;
  signedExpiredAt: string;
}

/** The account's sign record for `address` (any case) as /api/sign answers it, or undefined. */
export type SignAnswers = (accountId: string, address: string) => Promise<SignAnswer | undefined>;

/**
 * The one reading and formatting of a sign record for /api/sign, shared with the owner API's
 * `served` operation (routes/owner/directory.ts), so an owner sees exactly what a client gets.
 */
export function createSignAnswers({ directory, formatTimestamp }: { directory: Directory; formatTimestamp: TimestampFormatter }): SignAnswers {
  /** Both times as written, per record the directory returned: a cached record is formatted once. */
  const formatted = new WeakMap<SignRecord, { signedAt: string; signedExpiredAt: string }>();
  return async function answerSign(accountId, address) {
    const record = await directory.findSignRecord(accountId, address.toLowerCase());
    if (record === undefined) return undefined;
    let times = formatted.get(record);
    if (times === undefined) {
      times = { signedAt: formatTimestamp(record.signedAt), signedExpiredAt: formatTimestamp(record.signedExpiredAt) };
      formatted.set(record, times);
    }
    return { did: address, signedNonce: record.signedNonce, ...times };
  };
}

export function lookUpSignRecord({ answers, bodyLimitBytes }: {
  answers: SignAnswers;
  bodyLimitBytes: number;
}) {
  return async function lookUpSignRecord(ctx: Context): Promise<void> {
    if (ctx.method === 'POST') await discardBody(ctx, bodyLimitBytes);
    const address = singleQueryParam(ctx, 'address');
    if (address === undefined || address === '') throw new InvalidRequest('The query parameter "address" is required.');
    if (!ADDRESS_PATTERN.test(address)) throw new InvalidRequest('The query parameter "address" must be 0x followed by 40 hexadecimal digits.');

    const { accountId } = ctx.state.identity as Identity;
    const answer = await answers(accountId, address);
    if (answer === undefined) throw new NotFound('There is no sign record for this address.', 'sign_record_not_found');
    ctx.body = ok(answer);
  };
}
