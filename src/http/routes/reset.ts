/**
 * POST /api/reset: the owner's token reset (interface §5.6). Authenticated like sign-in, with
 * the API key and the SHA-256 of its secret, not with a bearer token: a reset is what an owner
 * does when a token may be in someone else's hands, so a token alone must not be enough. A key
 * bound to a client certificate resets only over a connection that presents it, as it signs in.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedClientCertificate } from '../../auth/client-certificate.js';
import { ok } from '../../errors/envelope.js';
import type { TimestampFormatter } from '../../util/time.js';
import { readFields } from '../body.js';
import { apiKeyFields, checkKeyCredentials, type CredentialRouteDeps } from './credentials.js';

const ResetBody = z.object({
  ...apiKeyFields,
  scope: z.enum(['key', 'account']).default('key'),
});

export function resetTokens(deps: CredentialRouteDeps & { formatTimestamp: TimestampFormatter }) {
  const { auth, bodyLimitBytes, formatTimestamp } = deps;
  return async function resetTokens(ctx: Context): Promise<void> {
    const { apiKey, apiSecret, scope } = await readFields(ctx, ResetBody, { limit: bodyLimitBytes, accept: ['json'] });
    // A reset checks the same secret as sign-in: it is one more guess, limited as one.
    const result = await checkKeyCredentials(deps, ctx, apiKey, () => auth.resetTokens(apiKey, apiSecret, scope, verifiedClientCertificate(ctx.req)));
    ctx.body = ok({
      scope,
      accountId: result.accountId,
      ...(result.keyId !== undefined ? { keyId: result.keyId } : {}),
      resetAt: formatTimestamp(result.at),
    });
  };
}
