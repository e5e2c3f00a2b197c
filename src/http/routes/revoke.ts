/**
 * POST /api/revoke: token revocation (RFC 7009). A form body (§2.1: `application/x-www-form-urlencoded`)
 * with `token` and an optional `token_type_hint`, which is read and not needed (the formats tell
 * the kinds apart; an unknown value is ignored, §2.1). No client authentication: the token is the
 * proof (auth/token-revocation.ts says why); client credentials an OAuth library sends along
 * (`client_id`, `client_secret`, Basic) are neither needed nor checked, and end nothing by themselves.
 *
 * Every presented token is a guess at a family's secret, counted before any work under the
 * refresh limits (per family when the token names one, and per address: limits/rate-limits.ts).
 * The answer is 200 with the same body whether anything was revoked (§2.2): an unknown,
 * expired or already revoked token is no error, so the endpoint is no oracle. An error answer is
 * the envelope with RFC 6749 §5.2's `error` and `error_description` beside it (§2.2.1), which
 * OAuth libraries read.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { parseRefreshToken } from '../../auth/refresh.js';
import type { TokenRevocation } from '../../auth/token-revocation.js';
import { OAUTH_ERRORS } from '../../errors/boundary.js';
import { ok } from '../../errors/envelope.js';
import { RevocationListFull, UnsupportedTokenType } from '../../errors/errors.js';
import { readFields } from '../body.js';
import type { CredentialRouteDeps } from './credentials.js';

export const REVOKE_PATH = '/api/revoke';

/** Longest token looked at: the longest the gateway issues, with room (another issuer's are never revoked here). */
const MAX_TOKEN_LENGTH = 16_384;

const RevokeBody = z.object({
  token: z.string().min(1).max(MAX_TOKEN_LENGTH),
  // A hint only (§2.1): any value is taken, and none is needed.
  token_type_hint: z.string().max(256).optional(),
});

export function revokeToken({ revocation, limits, clientAddress, bodyLimitBytes }: Pick<CredentialRouteDeps, 'limits' | 'clientAddress' | 'bodyLimitBytes'> & { revocation: TokenRevocation }) {
  return async function revokeToken(ctx: Context): Promise<void> {
    // Error answers carry RFC 6749 §5.2's members too (RFC 7009 §2.2.1; errors/boundary.ts).
    ctx.state[OAUTH_ERRORS] = true;
    const { token } = await readFields(ctx, RevokeBody, { limit: bodyLimitBytes, accept: ['form'] });
    await limits.refresh(parseRefreshToken(token)?.familyId, clientAddress(ctx.req));
    const result = await revocation.revoke(token);
    if (result.outcome === 'unsupported') throw new UnsupportedTokenType('API settings tokens are revoked by their owners, in the owner API (DELETE …/settings-tokens/{tokenId}).');
    if (result.outcome === 'full') throw new RevocationListFull();
    ctx.body = ok({});
  };
}
