/** POST /api/signin: apiKey + SHA-256 of the API secret in, token pair out (interface §4.1). */
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedClientCertificate } from '../../auth/client-certificate.js';
import { ok } from '../../errors/envelope.js';
import { readFields } from '../body.js';
import { apiKeyFields, bindingThumbprint, checkKeyCredentials, pairAnswer, type CredentialRouteDeps } from './credentials.js';

const SignInBody = z.object(apiKeyFields);

export function signIn(deps: CredentialRouteDeps) {
  const { auth, bodyLimitBytes, dpop } = deps;
  return async function signIn(ctx: Context): Promise<void> {
    const { apiKey, apiSecret } = await readFields(ctx, SignInBody, { limit: bodyLimitBytes, accept: ['json'] });
    // The proof is checked inside the counted attempt: the guess is counted before any work.
    const { pair } = await checkKeyCredentials(deps, ctx, apiKey, async () => auth.signIn(apiKey, apiSecret, verifiedClientCertificate(ctx.req), { dpopThumbprint: await bindingThumbprint(dpop, ctx.req) }));
    if (pair.token_type === 'DPoP') ctx.set(dpop.nonceHeader() ?? {});
    ctx.body = ok(pairAnswer(pair));
  };
}
