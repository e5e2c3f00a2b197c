/**
 * POST /api/refresh: a refresh token in, a new pair out (interface §4.2). The document does not
 * say which content type clients send, so JSON, a form, and JSON without a Content-Type are
 * all read.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedClientCertificate } from '../../auth/client-certificate.js';
import { parseRefreshToken } from '../../auth/refresh.js';
import { ok } from '../../errors/envelope.js';
import { InvalidGrant } from '../../errors/errors.js';
import { readFields } from '../body.js';
import { bindingThumbprint, dpopRefusal, pairAnswer, type CredentialRouteDeps } from './credentials.js';

const RefreshBody = z.object({
  refreshToken: z.string().min(1).max(2048),
});

export function refresh({ auth, limits, clientAddress, bodyLimitBytes, dpop }: CredentialRouteDeps) {
  return async function refresh(ctx: Context): Promise<void> {
    const { refreshToken } = await readFields(ctx, RefreshBody, { limit: bodyLimitBytes, accept: ['json', 'form'], untypedIsJson: true });
    // Every call counts, right or wrong: wrong-secret refreshes are guesses at a family's secret.
    const attempt = await limits.refresh(parseRefreshToken(refreshToken)?.familyId, clientAddress(ctx.req));
    const result = await auth.refresh(refreshToken, verifiedClientCertificate(ctx.req), { dpopThumbprint: await bindingThumbprint(dpop, ctx.req) });
    if (result.outcome !== 'issued') throw dpopRefusal(result.reason, dpop) ?? new InvalidGrant();
    // A duplicate inside the grace window is the same refresh again, not another one.
    if (result.replayed === true) await attempt.replayed();
    if (attempt.headers !== undefined) ctx.set(attempt.headers);
    if (result.pair.token_type === 'DPoP') ctx.set(dpop.nonceHeader() ?? {});
    ctx.body = ok(pairAnswer(result.pair));
  };
}
