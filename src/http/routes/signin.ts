/** POST /api/signin: apiKey + SHA-256 of the API secret in, token pair out (interface §4.1). */
import type { Context } from 'koa';
import { z } from 'zod';
import type { AuthService } from '../../auth/service.js';
import { InvalidCredentials } from '../../errors/errors.js';
import { readObjectBody, validateFields } from '../body.js';
import { ok } from '../envelope.js';

const SignInBody = z.object({
  apiKey: z.string().min(1).max(256),
  apiSecret: z.string().min(1).max(256),
});

export function signIn({ auth, bodyLimitBytes }: { auth: AuthService; bodyLimitBytes: number }) {
  return async function signIn(ctx: Context): Promise<void> {
    const body = await readObjectBody(ctx, { limit: bodyLimitBytes, accept: ['json'] });
    const { apiKey, apiSecret } = validateFields(SignInBody, body);
    const result = await auth.signIn(apiKey, apiSecret);
    if (result.outcome !== 'issued') throw new InvalidCredentials();
    ctx.body = ok(result.pair);
  };
}
