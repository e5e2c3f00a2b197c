/**
 * What sign-in, refresh and reset share. Each reads a small body the same way (http/body.ts),
 * and each presented secret is a guess the limits count (limits/rate-limits.ts): an API key's
 * secret through the sign-in lockout, whichever route presents it. Written once, so that a
 * route added later cannot check a secret without counting the guess.
 */
import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { z } from 'zod';
import type { DpopProofs } from '../../auth/dpop.js';
import type { TokenPair } from '../../auth/refresh.js';
import type { AuthService } from '../../auth/service.js';
import { ClientCertificateRequired, InvalidCredentials, InvalidDpopProof } from '../../errors/errors.js';
import { InvalidScope } from '../../errors/oauth.js';
import type { RateLimits } from '../../limits/rate-limits.js';

export interface CredentialRouteDeps {
  auth: AuthService;
  limits: RateLimits;
  /** The client's address as the limits count it (http/client-address.ts). */
  clientAddress: (req: IncomingMessage) => string;
  bodyLimitBytes: number;
  /** DPoP proofs (auth/dpop.ts): sign-in and refresh bind the pair to a proof's key. */
  dpop: DpopProofs;
}

/**
 * The thumbprint of the request's DPoP proof for binding a new pair (RFC 9449 §5), checked as
 * for this request (POST to this URL); undefined without a `DPoP` header. With `dpop.enabled`
 * off a proof is refused rather than ignored: the client would take its tokens for bound.
 * Also for any other endpoint that issues pairs (an OAuth token endpoint).
 */
export async function bindingThumbprint(dpop: DpopProofs, req: IncomingMessage): Promise<string | undefined> {
  const proof = dpop.read(req);
  if (proof === undefined) return undefined;
  if (!dpop.bindsAtSignIn) throw new InvalidDpopProof('DPoP is turned off on this gateway (dpop.enabled): sign in without a DPoP header.', dpop.algs);
  return dpop.check(proof, req);
}

/**
 * A pair as sign-in and refresh answer it: the interface document's `{accessToken,
 * refreshToken}`, and `token_type: "DPoP"` only for a pair bound to a DPoP key (RFC 9449 §5), so
 * that every client written for the interface reads the same answer as before.
 */
export function pairAnswer(pair: TokenPair): TokenPair {
  return pair.token_type === 'DPoP' ? { accessToken: pair.accessToken, refreshToken: pair.refreshToken, token_type: 'DPoP' } : { accessToken: pair.accessToken, refreshToken: pair.refreshToken };
}

/** The refusal of a sign-in or refresh the service rejected for DPoP's sake, else undefined. */
export function dpopRefusal(reason: string | undefined, dpop: Pick<DpopProofs, 'algs'> | undefined): InvalidDpopProof | undefined {
  if (reason === 'dpop_required') return new InvalidDpopProof('This API key requires DPoP: send a DPoP proof with the sign-in and every refresh.', dpop?.algs ?? '');
  if (reason === 'dpop_mismatch') return new InvalidDpopProof('This refresh token is bound to a DPoP key: refresh with a proof signed by that key.', dpop?.algs ?? '');
  return undefined;
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
  { limits, clientAddress, dpop }: Pick<CredentialRouteDeps, 'limits' | 'clientAddress'> & Partial<Pick<CredentialRouteDeps, 'dpop'>>,
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
    // Likewise only once the secret matched: a key's DPoP requirement is no secret, but no stranger learns it.
    const refusal = dpopRefusal(reason, dpop);
    if (refusal !== undefined) throw refusal;
    throw new InvalidCredentials();
  }
  await attempt.succeeded();
  return result as Exclude<T, { outcome: 'rejected' }>;
}
