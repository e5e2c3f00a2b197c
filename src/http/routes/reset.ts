/**
 * POST /api/reset: the owner's token reset (interface §5.6). Authenticated like sign-in, with
 * the API key and the SHA-256 of its secret, not with a bearer token: a reset is what an owner
 * does when a token may be in someone else's hands, so a token alone must not be enough.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { ok } from '../../errors/envelope.js';
import { InvalidCredentials } from '../../errors/errors.js';
import type { TimestampFormatter } from '../../util/time.js';
import { readObjectBody, validateFields } from '../body.js';
import { guarded, type SignInDeps } from './signin.js';

const ResetBody = z.object({
  apiKey: z.string().min(1).max(256),
  apiSecret: z.string().min(1).max(256),
  scope: z.enum(['key', 'account']).default('key'),
});

export function resetTokens({ auth, limits, clientAddress, bodyLimitBytes, formatTimestamp }: SignInDeps & { formatTimestamp: TimestampFormatter }) {
  return async function resetTokens(ctx: Context): Promise<void> {
    const body = await readObjectBody(ctx, { limit: bodyLimitBytes, accept: ['json'] });
    const { apiKey, apiSecret, scope } = validateFields(ResetBody, body);
    // A reset checks the same secret as sign-in: it is one more guess, limited as one.
    const result = await guarded(limits.signIn(apiKey, clientAddress(ctx.req)), () => auth.resetTokens(apiKey, apiSecret, scope), (r) => r.outcome === 'reset');
    if (result.outcome !== 'reset') throw new InvalidCredentials();
    ctx.body = ok({
      scope,
      accountId: result.accountId,
      ...(result.keyId !== undefined ? { keyId: result.keyId } : {}),
      resetAt: formatTimestamp(result.at),
    });
  };
}
