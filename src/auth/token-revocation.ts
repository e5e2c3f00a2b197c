/**
 * Token revocation (RFC 7009) as a plain call: a client ends its own refresh token's family or
 * its own access token. No ctx, no HTTP (http/routes/revoke.ts).
 *
 * Who may revoke (docs/tokens.md, "Revocation"): whoever presents the token. RFC 7009 §2.1 has a
 * confidential client authenticate first; here the token is itself the proof. A refresh token is
 * the credential of its family (its holder may rotate it, and presenting it twice already ends
 * the family by reuse detection, RFC 9700 §4.14.2), and an access token is a 256-bit-signed
 * credential no one can guess (RFC 7009 §5: revoking by guessing is what it warns of; a bearer
 * token's holder can already do anything the token allows). So no API secret is asked for, and
 * none travels to end a token: a client that lost its secret, or never held one (a browser with a
 * refresh token), can still end what it holds, which is the point of revocation (RFC 9700 §2.2.2).
 * What it does not allow: ending anyone else's tokens (one needs them), or a key's other tokens
 * (that is an owner's reset).
 *
 * - a refresh token (`<handle>.<secret>`): its whole family ends, the tokens rotated from it
 *   and the ones it would rotate into, on every instance at once (one store step); and so do the
 *   access tokens minted in it (§2.1's SHOULD), refused by their `sid` (a digest of the family
 *   id) for as long as one of them can live. Tokens of earlier versions carry no `sid`: they
 *   live until their `exp`.
 * - an access token of the gateway's own (verified, not expired): its `jti` is refused until its
 *   `exp` on every instance (auth/denied-tokens.ts).
 * - an API settings token (`gwst_…`): not here (`unsupported`); its owner revokes it in the owner API.
 * - anything else (unknown, malformed, another issuer's, expired, already revoked): nothing to
 *   do, and the answer is the same success (RFC 7009 §2.2), so the endpoint is no oracle.
 * `token_type_hint` is only a hint (§2.1): the formats tell the kinds apart, so it is not needed.
 */
import { isSettingsTokenShaped } from '../domain/settings-token.js';
import type { RefreshTokenStore } from '../state/tokens/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Clock } from '../util/clock.js';
import { sessionEntry, type DeniedTokens } from './denied-tokens.js';
import { hashRefreshSecret, parseRefreshToken, sessionOf } from './refresh.js';
import type { Signer } from './signer.js';

export type RevokedType = 'refresh_token' | 'access_token' | 'unknown';

export type RevokeResult =
  /** `revoked`: ended now; `ignored`: nothing of ours to end (answered as a success all the same). */
  | { outcome: 'revoked' | 'ignored'; type: RevokedType }
  /** The deny list is at its bound (state/denylist/store.ts): nothing was recorded. */
  | { outcome: 'full'; type: 'access_token' }
  /** An API settings token: revoked in the owner API only. */
  | { outcome: 'unsupported' };

export interface TokenRevocation {
  revoke(token: string): Promise<RevokeResult>;
}

export interface TokenRevocationDeps {
  tokens: Pick<RefreshTokenStore, 'revokeFamily'>;
  signer: Pick<Signer, 'verifyAccessToken'>;
  denied: Pick<DeniedTokens, 'deny'>;
  log: Logger;
  clock: Clock;
  accessTokenTtlSeconds: number;
  clockSkewSeconds: number;
  metrics?: Pick<Metrics, 'revocations'>;
}

export function createTokenRevocation({ tokens, signer, denied, log, clock, accessTokenTtlSeconds, clockSkewSeconds, metrics }: TokenRevocationDeps): TokenRevocation {
  /**
   * The family's access tokens, by its session (`sid`): refused for as long as one minted until
   * now can live. The family is over whatever this answers; a full list leaves them to expire.
   */
  const denyFamilyTokens = async (familyId: string, ids: Record<string, string>) => {
    const outcome = await denied.deny(sessionEntry(sessionOf(familyId)), clock.now() + (accessTokenTtlSeconds + clockSkewSeconds) * 1000);
    if (outcome === 'full') log.warn(ids, 'refresh-token family revoked, but not its access tokens: the deny list is full (tokens.revokedAccessTokensMax)');
  };
  const revoke = async (token: string): Promise<RevokeResult> => {
    if (isSettingsTokenShaped(token)) return { outcome: 'unsupported' };
    const presented = parseRefreshToken(token);
    if (presented !== undefined) {
      const { secret, ...named } = presented;
      const ended = await tokens.revokeFamily({ ...named, secretHash: hashRefreshSecret(secret) });
      // Ids only: the token is a secret, its handle's ids are not.
      const ids = { accountId: named.accountId, keyId: named.keyId, familyId: named.familyId };
      if (ended) {
        log.info(ids, 'refresh-token family revoked by its holder');
        // RFC 7009 §2.1: the access tokens of the same grant go too.
        await denyFamilyTokens(named.familyId, ids);
      }
      return { outcome: ended ? 'revoked' : 'ignored', type: 'refresh_token' };
    }
    let claims;
    try {
      claims = await signer.verifyAccessToken(token);
    } catch {
      // Not a live token of ours (unknown, tampered, expired, another issuer's): §2.2, 200 all the same.
      return { outcome: 'ignored', type: 'unknown' };
    }
    // Refused until the signature check would refuse it anyway: its exp, with the skew verification allows.
    const outcome = await denied.deny(claims.jti, (claims.exp + clockSkewSeconds) * 1000);
    if (outcome === 'full') {
      log.warn({ accountId: claims.sub, keyId: claims.client_id }, 'access token not revoked: the deny list is full (tokens.revokedAccessTokensMax)');
      return { outcome: 'full', type: 'access_token' };
    }
    if (outcome === 'denied') log.info({ accountId: claims.sub, keyId: claims.client_id, jti: claims.jti }, 'access token revoked by its holder');
    return { outcome: outcome === 'denied' ? 'revoked' : 'ignored', type: 'access_token' };
  };
  return {
    async revoke(token) {
      const result = await revoke(token);
      if (result.outcome !== 'unsupported') metrics?.revocations.labels(result.type, result.outcome).inc();
      return result;
    },
  };
}
