/** POST /api/signin: apiKey + SHA-256 of the API secret in, token pair out (interface §4.1). */
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedClientCertificate } from '../../auth/client-certificate.js';
import { ok } from '../../errors/envelope.js';
import { readFields } from '../body.js';
import { apiKeyFields, checkKeyCredentials, type CredentialRouteDeps } from './credentials.js';

const SignInBody = z.object(apiKeyFields);

export function signIn(deps: CredentialRouteDeps) {
  const { auth, bodyLimitBytes } = deps;
  return async function signIn(ctx: Context): Promise<void> {
    const { apiKey, apiSecret } = await readFields(ctx, SignInBody, { limit: bodyLimitBytes, accept: ['json'] });
    const { pair } = await checkKeyCredentials(deps, ctx, apiKey, () => auth.signIn(apiKey, apiSecret, verifiedClientCertificate(ctx.req)));
    ctx.body = ok(pair);
  };
}
