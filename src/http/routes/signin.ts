/** POST /api/signin: apiKey + SHA-256 of the API secret in, token pair out (interface §4.1). */
import type { Context } from 'koa';
import { z } from 'zod';
import type { IncomingMessage } from 'node:http';
import type { AuthService } from '../../auth/service.js';
import type { Attempt, RateLimits } from '../../limits/rate-limits.js';
import { ok } from '../../errors/envelope.js';
import { InvalidCredentials } from '../../errors/errors.js';
import { readObjectBody, validateFields } from '../body.js';

const SignInBody = z.object({
  apiKey: z.string().min(1).max(256),
  apiSecret: z.string().min(1).max(256),
});

export interface SignInDeps {
  auth: AuthService;
  limits: RateLimits;
  clientAddress: (req: IncomingMessage) => string;
  bodyLimitBytes: number;
}

export function signIn({ auth, limits, clientAddress, bodyLimitBytes }: SignInDeps) {
  return async function signIn(ctx: Context): Promise<void> {
    const body = await readObjectBody(ctx, { limit: bodyLimitBytes, accept: ['json'] });
    const { apiKey, apiSecret } = validateFields(SignInBody, body);
    const result = await guarded(limits.signIn(apiKey, clientAddress(ctx.req)), () => auth.signIn(apiKey, apiSecret), (r) => r.outcome === 'issued');
    if (result.outcome !== 'issued') throw new InvalidCredentials();
    ctx.body = ok(result.pair);
  };
}

/**
 * Runs a credential check as a sign-in attempt (limits/rate-limits.ts): refused at once while
 * the key or address is locked out; afterwards a right answer, or a check that failed for
 * another reason, is not counted as a failure. (So a success sends no RateLimit fields: the
 * counts they were taken from have just been given back.)
 */
export async function guarded<T>(attempted: Promise<Attempt>, checkCredentials: () => Promise<T>, isRight: (result: T) => boolean): Promise<T> {
  const attempt = await attempted;
  let value: T;
  try {
    value = await checkCredentials();
  } catch (err) {
    await attempt.undecided();
    throw err;
  }
  if (isRight(value)) await attempt.succeeded();
  return value;
}
