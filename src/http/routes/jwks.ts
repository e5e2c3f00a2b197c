/**
 * GET /.well-known/jwks.json: the public keys that verify access tokens (RFC 7517), for
 * backends that check tokens themselves. JWKS clients read the top-level `keys`; the same set
 * also sits in the envelope, since RFC 7517 §5 has readers ignore members they do not know.
 */
import type { Context } from 'koa';
import type { Signer } from '../../auth/signer.js';

export function publishKeys({ signer }: { signer: Pick<Signer, 'jwks'> }) {
  const body = { keys: signer.jwks.keys, success: true, message: { keys: signer.jwks.keys } };
  return async function publishKeys(ctx: Context): Promise<void> {
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = body;
  };
}
