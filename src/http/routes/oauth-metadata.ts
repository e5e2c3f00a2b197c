/**
 * GET /.well-known/oauth-authorization-server: the authorization server metadata (RFC 8414), so
 * that an OAuth client library finds the token endpoint by discovery. The same document is served
 * at /.well-known/openid-configuration, where OpenID Connect clients look first: it names
 * `jwks_uri`, but the gateway is no OpenID Provider (no authorization endpoint, no ID tokens,
 * no userinfo), which docs/oauth.md says.
 *
 * The `issuer` is `tokens.issuer` when that is an http(s) URL (the tokens' `iss`, as RFC 8414
 * §2 wants); otherwise, as with the default `auth-gateway`, the public origin, since RFC 8414
 * requires a URL and clients compare it with the URL they discovered from. The endpoint URLs
 * start with the public origin (http/public-origin.ts: `oauth.publicOrigin`, or the request's).
 */
import type { Context } from 'koa';
import type { PublicOrigin } from '../public-origin.js';

export const METADATA_PATHS = ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'];

/** Where the endpoints the metadata names are served. */
export interface OAuthEndpoints {
  token: string;
  jwks: string;
  introspection: string;
  revocation: string;
}

export interface MetadataDeps {
  /** `tokens.issuer`. */
  issuer: string;
  publicOrigin: PublicOrigin;
  endpoints: OAuthEndpoints;
  /** The DPoP proof algorithms accepted while binding is on (`dpop.algorithms`); absent: DPoP off. */
  dpopAlgorithms?: readonly string[] | undefined;
}

export function publishMetadata({ issuer, publicOrigin, endpoints, dpopAlgorithms }: MetadataDeps) {
  const issuerUrl = isIssuerUrl(issuer) ? issuer : undefined;
  return async function publishMetadata(ctx: Context): Promise<void> {
    const origin = publicOrigin(ctx.req);
    // Built from the request's origin unless one is configured: not for shared caches.
    ctx.set('Cache-Control', 'private, max-age=300');
    ctx.set('Vary', 'Host, X-Forwarded-Host, X-Forwarded-Proto, Forwarded');
    ctx.body = {
      issuer: issuerUrl ?? origin,
      token_endpoint: `${origin}${endpoints.token}`,
      jwks_uri: `${origin}${endpoints.jwks}`,
      introspection_endpoint: `${origin}${endpoints.introspection}`,
      revocation_endpoint: `${origin}${endpoints.revocation}`,
      grant_types_supported: ['client_credentials', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      // RFC 8414 §2 takes these from the access token types too: a backend calls introspection
      // with its own bearer token (a key with the scope `introspect`).
      introspection_endpoint_auth_methods_supported: ['Bearer'],
      // Revocation takes no client authentication: the token itself is the proof.
      revocation_endpoint_auth_methods_supported: ['none'],
      // RFC 8414 §2 requires the member; there is no authorization endpoint, so no response type.
      response_types_supported: [],
      // RFC 9449 §5.1: the token endpoint binds a pair to the key of a DPoP proof it comes with.
      ...(dpopAlgorithms === undefined ? {} : { dpop_signing_alg_values_supported: dpopAlgorithms }),
    };
  };
}

/** An http(s) URL with no credentials, query or fragment: what RFC 8414 §2 allows as an issuer. */
export function isIssuerUrl(issuer: string): boolean {
  const url = URL.parse(issuer);
  return url !== null && (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '' && url.search === '' && url.hash === '' && !issuer.includes('?') && !issuer.includes('#');
}
