/**
 * The OpenID provider of owners' single sign-on, through openid-client: discovery (once, kept
 * after the first success), the authorization URL (code flow, PKCE S256, state, nonce), and the
 * code exchange, which checks the state, the PKCE verifier, the ID token (signature, issuer,
 * audience, expiry, nonce) and answers the verified claims. Every call to the provider has
 * `owner.sso.timeoutMs`. What the provider refuses is SsoFailed (`sso_failed`); a provider that
 * cannot be reached is a 502. Only owner/sso.ts uses it.
 */
import * as client from 'openid-client';
import { isLoopbackHost, type Config } from '../config/schema.js';
import { BadGateway, SsoFailed } from '../errors/errors.js';

export interface SsoTransactionChecks {
  redirectUri: string;
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** What the provider says of the person who signed in. */
export interface SsoIdentity {
  subject: string;
  email: string | undefined;
  /** True only when the provider said `email_verified: true` (a boolean). */
  emailVerified: boolean;
}

export interface SsoProvider {
  authorizationUrl(checks: Omit<SsoTransactionChecks, 'codeVerifier'> & { codeChallenge: string }): Promise<URL>;
  /** `callback`: the redirect URI with the query the provider sent the browser back with. */
  exchange(callback: URL, checks: SsoTransactionChecks): Promise<SsoIdentity>;
}

type SsoConfig = Config['owner']['sso'];

export function createSsoProvider(sso: SsoConfig & { issuer: string; clientId: string }): SsoProvider {
  let discovered: Promise<client.Configuration> | undefined;
  const issuer = new URL(sso.issuer);
  // Plain http only for a provider on this machine (the schema allows no other): openid-client
  // refuses it unless told.
  const insecure = issuer.protocol === 'http:' && isLoopbackHost(issuer.hostname);

  function configuration(): Promise<client.Configuration> {
    discovered ??= client.discovery(
      issuer, sso.clientId, undefined,
      sso.clientSecret === undefined ? client.None() : client.ClientSecretBasic(sso.clientSecret),
      { execute: insecure ? [client.allowInsecureRequests] : [], timeout: Math.ceil(sso.timeoutMs / 1000) },
    ).then((config) => {
      config.timeout = Math.ceil(sso.timeoutMs / 1000);
      return config;
    }).catch((err: unknown) => {
      // Not kept: the next sign-in tries again.
      discovered = undefined;
      throw new BadGateway(err);
    });
    return discovered;
  }

  return {
    async authorizationUrl({ redirectUri, state, nonce, codeChallenge }) {
      return client.buildAuthorizationUrl(await configuration(), {
        redirect_uri: redirectUri, scope: sso.scopes.join(' '), state, nonce,
        code_challenge: codeChallenge, code_challenge_method: 'S256',
      });
    },

    async exchange(callback, { state, nonce, codeVerifier }) {
      const config = await configuration();
      try {
        const tokens = await client.authorizationCodeGrant(config, callback, { expectedState: state, expectedNonce: nonce, pkceCodeVerifier: codeVerifier, idTokenExpected: true });
        const claims = tokens.claims();
        if (claims === undefined) throw new SsoFailed('sso_failed', 'The provider sent no ID token.');
        let { email, email_verified: verified } = claims as { email?: unknown; email_verified?: unknown };
        // Many providers put the email in the UserInfo answer only (OpenID Connect Core §5.4).
        if (email === undefined || verified === undefined) {
          const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
          ({ email, email_verified: verified } = info as { email?: unknown; email_verified?: unknown });
        }
        return { subject: claims.sub, email: typeof email === 'string' ? email : undefined, emailVerified: verified === true };
      } catch (err) {
        if (err instanceof SsoFailed) throw err;
        throw new SsoFailed('sso_failed', 'The provider\'s answer was refused (code, PKCE, nonce or ID token): start the sign-in again.', { cause: err });
      }
    },
  };
}
