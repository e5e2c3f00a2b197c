/**
 * The standard OAuth 2.0 face (http/routes/token.ts, oauth-metadata.ts; docs/oauth.md) in the
 * OpenAPI document. Its answers are the RFCs' own shapes, not the envelope: RFC 6749 §5.1 and
 * §5.2 for the token endpoint, RFC 8414 §2 for the metadata. test/http/openapi.test.ts holds the
 * real answers to these schemas as it does every other route's.
 */
import { z } from 'zod';
import type { ZodOpenApiOperationObject, ZodOpenApiPathsObject } from 'zod-openapi';

const TokenRequest = z.object({
  grant_type: z.enum(['client_credentials', 'refresh_token']),
  client_id: z.string().max(256).optional().meta({ description: 'The API key (client_secret_post; or beside HTTP Basic, naming the same key).' }),
  client_secret: z.string().max(256).optional().meta({ description: 'The API secret itself, not its SHA-256 (client_secret_post only).' }),
  scope: z.string().max(512).optional().meta({ description: 'Space-separated scopes within the key\'s (client_credentials: kept by the refresh-token family) or within the family\'s grant (refresh_token: this access token only).' }),
  refresh_token: z.string().max(2048).optional().meta({ description: 'refresh_token only: a refresh token of the authenticated key.' }),
}).meta({ description: 'Each parameter at most once (RFC 6749 §3.2); an empty one is as if omitted, unknown ones are ignored.' });

const TokenResponse = z.object({
  access_token: z.string().meta({ description: 'A JWT; send it as `Authorization: Bearer <access_token>`.' }),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int().positive().meta({ description: 'Seconds: `tokens.accessTokenTtlSeconds`.' }),
  refresh_token: z.string().meta({ description: 'Single use: grant_type=refresh_token (or POST /api/refresh) trades it for a new pair.' }),
  scope: z.string().optional().meta({ description: 'The access token\'s scopes, space-separated; absent when it has none.' }),
}).meta({ id: 'OAuthTokenResponse', description: 'RFC 6749 §5.1 (Cache-Control: no-store).' });

const OAuthErrorBody = z.object({
  error: z.enum(['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope', 'slow_down', 'temporarily_unavailable', 'server_error']),
  error_description: z.string().optional(),
}).meta({ id: 'OAuthError', description: 'RFC 6749 §5.2, not the envelope.' });

const Metadata = z.object({
  issuer: z.string().meta({ description: '`tokens.issuer` when it is an http(s) URL, else the public origin.' }),
  token_endpoint: z.string(),
  jwks_uri: z.string(),
  introspection_endpoint: z.string(),
  revocation_endpoint: z.string(),
  grant_types_supported: z.array(z.string()),
  token_endpoint_auth_methods_supported: z.array(z.string()),
  introspection_endpoint_auth_methods_supported: z.array(z.string()),
  revocation_endpoint_auth_methods_supported: z.array(z.string()),
  response_types_supported: z.array(z.string()).max(0).meta({ description: 'Empty: there is no authorization endpoint.' }),
  dpop_signing_alg_values_supported: z.array(z.string()).optional().meta({ description: 'RFC 9449 §5.1: the DPoP proof algorithms the token endpoint accepts; absent while `dpop.enabled` is off.' }),
}).meta({ id: 'AuthorizationServerMetadata', description: 'RFC 8414 §2. The endpoint URLs start with `oauth.publicOrigin`, or the request\'s own origin.' });

const json = (schema: z.ZodType) => ({ content: { 'application/json': { schema } } });

const TOKEN_ERRORS: Record<number, string> = {
  400: 'invalid_request (a body that is no form, too large, a repeated or missing parameter, two client authentication methods), invalid_grant, invalid_scope, unsupported_grant_type.',
  401: 'invalid_client: no client authentication, an unknown key or a wrong secret; with `WWW-Authenticate: Basic` when the client tried the Authorization header.',
  429: 'slow_down: over a sign-in lockout or a refresh limit, with Retry-After.',
  503: 'temporarily_unavailable: a store is unavailable, with Retry-After.',
};

function metadataOperation(operationId: string, summary: string): { get: ZodOpenApiOperationObject } {
  return {
    get: {
      operationId,
      tags: ['oauth'],
      summary,
      security: [],
      responses: { 200: { description: 'The metadata (Cache-Control: private, max-age=300).', ...json(Metadata) } },
    },
  };
}

export const oauthPaths: ZodOpenApiPathsObject = {
  '/api/token': {
    post: {
      operationId: 'requestOAuthToken',
      tags: ['oauth'],
      summary: 'The OAuth 2.0 token endpoint: client_credentials and refresh_token (RFC 6749)',
      description: 'The client authenticates by HTTP Basic (client_secret_basic: the form-encoded API key and API secret) or by client_id and client_secret in the body (client_secret_post), never both. See docs/oauth.md.',
      // Client authentication is the endpoint's own (HTTP Basic or the body), described above.
      security: [],
      requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: TokenRequest } } },
      responses: {
        200: { description: 'A token pair', ...json(TokenResponse) },
        ...Object.fromEntries(Object.entries(TOKEN_ERRORS).map(([status, description]) => [status, { description, ...json(OAuthErrorBody) }])),
      },
    },
  },
  '/.well-known/oauth-authorization-server': metadataOperation('getOAuthMetadata', 'OAuth 2.0 authorization server metadata (RFC 8414)'),
  '/.well-known/openid-configuration': metadataOperation('getOpenIdConfiguration', 'The same metadata where OpenID Connect clients look (the gateway is no OpenID Provider)'),
};
