/**
 * What sign-in, refresh and reset share. Each reads a small body the same way (http/body.ts),
 * and each presented secret is a guess the limits count (limits/rate-limits.ts): an API key's
 * secret through the sign-in lockout, whichever route presents it. Written once, so that a
 * route added later cannot check a secret without counting the guess.
 */
import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AuthService } from '../../auth/service.js';
import { ClientCertificateRequired, InvalidCredentials } from '../../errors/errors.js';
import { InvalidScope } from '../../errors/oauth.js';
import type { RateLimits } from '../../limits/rate-limits.js';

export interface CredentialRouteDeps {
  auth: AuthService;
  limits: RateLimits;
  /** The client's address as the limits count it (http/client-address.ts). */
  clientAddress: (req: IncomingMessage) => string;
  bodyLimitBytes: number;
}

/** An API key and the SHA-256 of its secret, as sign-in and reset take them. */
export const apiKeyFields = {
  apiKey: z.string().min(1).max(256),
  apiSecret: z.string().min(1).max(256),
};

/**
 * Runs `check` of an API key's secret as a sign-in attempt: refused at once while the key or
 * address is locked out; afterwards a right answer, or a check that failed for another reason,
 * is not counted as a failure. (So a success sends no RateLimit fields: the counts they were
 * taken from have just been given back.) A rejected answer is InvalidCredentials, the same for
 * an unknown key and a wrong secret.
 */
export async function checkKeyCredentials<T extends { outcome: string }>(
  { limits, clientAddress }: Pick<CredentialRouteDeps, 'limits' | 'clientAddress'>,
  ctx: Context,
  apiKey: string,
  check: () => Promise<T>,
): Promise<Exclude<T, { outcome: 'rejected' }>> {
  const attempt = await limits.signIn(apiKey, clientAddress(ctx.req));
  let result: T;
  try {
    result = await check();
  } catch (err) {
    await attempt.undecided();
    throw err;
  }
  if (result.outcome === 'rejected') {
    const reason = (result as { reason?: string }).reason;
    // The secret matched: the call was no guess, only a scope the key lacks (the token endpoint).
    if (reason === 'invalid_scope') {
      await attempt.succeeded();
      throw new InvalidScope();
    }
    // The secret matched: only then is the missing certificate named (docs/tls.md).
    if (reason === 'certificate_mismatch') throw new ClientCertificateRequired('This API key is bound to a client certificate: use it only over a connection that presents that certificate.');
    throw new InvalidCredentials();
  }
  await attempt.succeeded();
  return result as Exclude<T, { outcome: 'rejected' }>;
}
