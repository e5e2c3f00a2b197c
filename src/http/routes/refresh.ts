/**
 * POST /api/refresh: a refresh token in, a new pair out (interface §4.2). The document does not
 * say which content type clients send, so JSON, a form, and JSON without a Content-Type are
 * all read.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import type { AuthService } from '../../auth/service.js';
import { InvalidGrant } from '../../errors/errors.js';
import { readObjectBody, validateFields } from '../body.js';
import { ok } from '../envelope.js';

const RefreshBody = z.object({
  refreshToken: z.string().min(1).max(2048),
});

export function refresh({ auth, bodyLimitBytes }: { auth: AuthService; bodyLimitBytes: number }) {
  return async function refresh(ctx: Context): Promise<void> {
    const body = await readObjectBody(ctx, { limit: bodyLimitBytes, accept: ['json', 'form'], untypedIsJson: true });
    const { refreshToken } = validateFields(RefreshBody, body);
    const result = await auth.refresh(refreshToken);
    if (result.outcome !== 'issued') throw new InvalidGrant();
    ctx.body = ok(result.pair);
  };
}
