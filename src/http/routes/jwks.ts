/**
 * GET /.well-known/jwks.json: the public keys that verify access tokens (RFC 7517), for
 * backends that check tokens themselves. JWKS clients read the top-level `keys`; the same set
 * also sits in the envelope, since RFC 7517 §5 has readers ignore members they do not know.
 */
import type { Context } from 'koa';
import type { Signer } from '../../auth/signer.js';

export function publishKeys({ signer }: { signer: Pick<Signer, 'jwks'> }) {
  // Built again only when the signer's key set is replaced (signer.useKeys).
  let published = signer.jwks;
  let body = bodyOf(published);
  return async function publishKeys(ctx: Context): Promise<void> {
    if (signer.jwks !== published) body = bodyOf(published = signer.jwks);
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = body;
  };
}

function bodyOf(jwks: Signer['jwks']) {
  return { keys: jwks.keys, success: true, message: { keys: jwks.keys } };
}
