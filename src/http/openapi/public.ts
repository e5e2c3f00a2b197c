/**
 * The public API's routes (http/routes/*.ts), declared by hand: they predate the operation
 * objects of the owner API and read their bodies themselves. Each shape here is what the route
 * answers (docs/api.md); the conformance test (test/http/openapi.test.ts) holds them to it.
 */
import { z } from 'zod';
import type { ZodOpenApiOperationObject, ZodOpenApiPathsObject } from 'zod-openapi';
import { leakVerdict, reportedToken } from '../routes/leaks.js';
import { ErrorMessage, errorResponse, successEnvelope } from './schemas.js';

const TokenPair = z.object({
  accessToken: z.string().meta({ description: 'A JWT; send it as `Authorization: Bearer <accessToken>`, or, DPoP-bound, as `Authorization: DPoP <accessToken>` with a proof (docs/dpop.md).' }),
  refreshToken: z.string().meta({ description: 'Single use: POST /api/refresh trades it for a new pair.' }),
  token_type: z.literal('DPoP').optional().meta({ description: 'RFC 9449 §5: `DPoP` when the request came with a DPoP proof and the pair is bound to its key (`cnf.jkt`); absent for a bearer pair, whose answer is the interface document\'s two fields.' }),
}).meta({ id: 'TokenPair' });

/** RFC 9449 §4.1: the proof that binds a new pair to its key (docs/dpop.md). */
const dpopHeader = z.object({
  DPoP: z.string().optional().meta({ description: 'A DPoP proof (RFC 9449) for this request: the pair is then bound to its key. Required for a key with `requireDpop` and for a DPoP-bound refresh token.' }),
});

const ApiKeyCredentials = {
  apiKey: z.string().min(1).max(256).meta({ description: 'The API key (`gwk_…` for keys made by the owner API).' }),
  apiSecret: z.string().min(1).max(256).meta({ description: 'The SHA-256 of the API secret: 64 hex digits, or base64/base64url of the 32 bytes. Never the secret itself.' }),
};

const SignInBody = z.object(ApiKeyCredentials).meta({ description: 'Fields besides these two are ignored.' });
const RefreshBody = z.object({ refreshToken: z.string().min(1).max(2048) });
const ResetBody = z.object({
  ...ApiKeyCredentials,
  scope: z.enum(['key', 'account']).optional().meta({ description: 'Default "key".' }),
});

const PublicReset = z.object({
  scope: z.enum(['key', 'account']),
  accountId: z.string(),
  keyId: z.string().optional().meta({ description: 'Key scope only.' }),
  resetAt: z.string().meta({ description: 'Written like the other timestamps of the public API (`YYYY-MM-DD HH:MM:SS`, UTC by default).' }),
}).meta({ id: 'PublicReset' });

const SignAnswer = z.object({
  did: z.string().meta({ description: 'The address exactly as sent.' }),
  signedNonce: z.number().int(),
  signedAt: z.string().meta({ description: '`YYYY-MM-DD HH:MM:SS` in UTC (`data.timeZone` changes it).' }),
  signedExpiredAt: z.string(),
}).meta({ id: 'SignAnswer' });

const RoleListing = z.object({
  pages: z.string().regex(/^\d+$/).meta({ description: 'ceil(total / limit), as a string.' }),
  items: z.array(z.object({
    id: z.number().int(),
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    public: z.union([z.literal(0), z.literal(1)]),
  })),
  total: z.number().int().min(0),
}).meta({ id: 'RoleListing' });

const Jwk = z.object({
  kty: z.string(),
  kid: z.string(),
  alg: z.string().optional(),
  use: z.string().optional(),
  crv: z.string().optional(),
  x: z.string().optional(),
  y: z.string().optional(),
  n: z.string().optional(),
  e: z.string().optional(),
}).meta({ id: 'Jwk' });

const Jwks = z.object({
  keys: z.array(Jwk),
  success: z.literal(true),
  message: z.object({ keys: z.array(Jwk) }),
}).meta({ description: 'RFC 7517: JWKS clients read the top-level `keys`; the same set is in the envelope.' });

const Readiness = z.object({
  status: z.enum(['ready', 'degraded', 'unavailable', 'draining']),
  checks: z.record(z.string(), z.enum(['up', 'down'])),
  degraded: z.array(z.string()).optional().meta({ description: 'The checks that are down without making the instance unready (Redis, unless `readiness.requireRedis`).' }),
});

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/).meta({ description: 'Any case; looked up case-insensitively.' });
const signQuery = z.object({ address });
const rolesQuery = z.object({
  page: z.number().int().min(1).max(1_000_000).optional().meta({ description: 'Default 1.' }),
  limit: z.number().int().min(1).max(100).optional().meta({ description: 'Default `roles.defaultLimit` (10), at most `roles.maxLimit` (100).' }),
  name: z.string().max(100).optional().meta({ description: 'Case-insensitive substring of the role\'s name; empty means no filter.' }),
});

const TokenForm = z.object({
  token: z.string().min(1).max(16_384).meta({ description: 'The token itself: an access token, a refresh token or an API settings token.' }),
  token_type_hint: z.string().max(256).optional().meta({ description: '`access_token` or `refresh_token`: a hint only, not needed (the formats tell them apart); any other value is ignored.' }),
}).meta({ description: 'Other fields (`client_id`, `client_secret`, which OAuth libraries send) are ignored.' });

const IntrospectionAnswer = z.object({
  active: z.boolean(),
  scope: z.string().optional().meta({ description: 'Space-separated scopes.' }),
  client_id: z.string().optional().meta({ description: 'The API key id (a settings token\'s own id; another issuer\'s `client_id`/`azp`).' }),
  sub: z.string().optional().meta({ description: 'The account id.' }),
  exp: z.number().int().optional(),
  iat: z.number().int().optional(),
  jti: z.string().optional(),
  iss: z.string().optional(),
  aud: z.union([z.string(), z.array(z.string())]).optional(),
  token_type: z.string().optional().meta({ description: '`Bearer` (`DPoP` for a DPoP-bound access token); absent for a refresh token.' }),
  token_use: z.enum(['access_token', 'refresh_token', 'settings_token']).optional(),
  cnf: z.record(z.string(), z.unknown()).optional().meta({ description: 'The key or certificate the token is bound to (RFC 8705, RFC 9449).' }),
}).meta({ id: 'IntrospectionAnswer', description: 'RFC 7662 §2.2, not in the envelope. An inactive or unknown token is `{"active": false}` and nothing more.' });

/** /api/revoke's error answers: the envelope, and RFC 6749 §5.2's members beside it (errors/boundary.ts). */
const OAuthErrorEnvelope = z.object({
  success: z.literal(false),
  message: ErrorMessage,
  error: z.string().meta({ description: 'RFC 6749 §5.2 / RFC 7009 §2.2.1: `invalid_request`, `unsupported_token_type`, `temporarily_unavailable`.' }),
  error_description: z.string(),
}).meta({ id: 'OAuthErrorEnvelope' });

const json = (schema: z.ZodType) => ({ content: { 'application/json': { schema } } });

function responses(success: z.ZodType, errors: number[], description = 'OK') {
  return {
    200: { description, ...json(successEnvelope(success)) },
    ...Object.fromEntries(errors.map((status) => [status, errorResponse(status)])),
  };
}

const credentialErrors = [400, 401, 413, 415, 429, 503];
const bearerErrors = [400, 401, 429, 502, 503, 504];

function signOperation(method: 'get' | 'post'): ZodOpenApiOperationObject {
  return {
    operationId: method === 'get' ? 'lookUpSignRecord' : 'lookUpSignRecordByPost',
    tags: ['public'],
    summary: 'The caller\'s account\'s sign record for an address',
    description: method === 'post' ? 'A body, if sent, is read up to the body limit and ignored.' : undefined,
    security: [{ accessToken: [] }],
    requestParams: { query: signQuery },
    responses: responses(SignAnswer, method === 'get' ? [...bearerErrors, 404] : [...bearerErrors, 404, 413]),
  };
}

export const publicPaths: ZodOpenApiPathsObject = {
  '/api/signin': {
    post: {
      operationId: 'signInWithApiKey',
      tags: ['public'],
      summary: 'Sign in with an API key and the SHA-256 of its secret',
      security: [],
      requestParams: { header: dpopHeader },
      requestBody: { required: true, ...json(SignInBody) },
      responses: responses(TokenPair, credentialErrors),
    },
  },
  '/api/refresh': {
    post: {
      operationId: 'refreshTokens',
      tags: ['public'],
      summary: 'Trade a refresh token for a new token pair',
      security: [],
      requestParams: { header: dpopHeader },
      requestBody: {
        required: true,
        content: {
          'application/json': { schema: RefreshBody },
          'application/x-www-form-urlencoded': { schema: RefreshBody },
        },
      },
      responses: responses(TokenPair, credentialErrors),
    },
  },
  '/api/reset': {
    post: {
      operationId: 'resetTokens',
      tags: ['public'],
      summary: 'Reset every token of a key or of its account, with the key\'s credentials',
      security: [],
      requestBody: { required: true, ...json(ResetBody) },
      responses: responses(PublicReset, credentialErrors),
    },
  },
  '/api/revoke': {
    post: {
      operationId: 'revokeToken',
      tags: ['public'],
      summary: 'Revoke a refresh token (its whole family) or an access token (RFC 7009)',
      description: 'No client authentication: the token is the proof. 200 whether or not anything was revoked (unknown, expired and already revoked tokens too). API settings tokens: 400 `unsupported_token_type` (the owner API revokes them). 503 `temporarily_unavailable` when the revoked access tokens are at `tokens.revokedAccessTokensMax`. Counted under the refresh limits.',
      security: [],
      requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: TokenForm } } },
      responses: {
        200: { description: 'Revoked, or nothing to revoke: the same answer.', ...json(successEnvelope(z.object({}))) },
        ...Object.fromEntries([400, 413, 415, 429, 503].map((status) => [status, { ...errorResponse(status), ...json(OAuthErrorEnvelope) }])),
      },
    },
  },
  '/api/introspect': {
    post: {
      operationId: 'introspectToken',
      tags: ['public'],
      summary: 'Whether a token is active now, and whose it is (RFC 7662)',
      description: 'For a caller whose key has the scope `introspect`. The answer is RFC 7662\'s JSON object (Cache-Control: no-store); errors are the envelope with RFC 6750\'s challenge.',
      security: [{ accessToken: [] }],
      requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: TokenForm } } },
      responses: {
        200: { description: 'The token\'s state.', ...json(IntrospectionAnswer) },
        ...Object.fromEntries([400, 401, 403, 413, 415, 429, 503].map((status) => [status, errorResponse(status)])),
      },
    },
  },
  '/api/leaks/github': {
    post: {
      operationId: 'reportLeakedTokens',
      tags: ['public'],
      summary: 'A secret-scanning report in GitHub\'s partner format: each live secret named is ended (docs/leaks.md)',
      description: 'Signed by the reporter (ECDSA P-256 with SHA-256 over the raw body) with a key published at `leaks.keysUrl`; nothing is looked at before the signature checks. An API secret: its key is marked compromised (sign-in refused until a roll) and its tokens reset; an API settings token: revoked; a refresh token: its family ended. The answer is GitHub\'s array, not the envelope. Counted per address under the public-route quota (route name `leaks`).',
      security: [],
      requestParams: {
        header: z.object({
          'Github-Public-Key-Identifier': z.string().max(256).meta({ description: 'The `key_identifier` of the published key that signed the body.' }),
          'Github-Public-Key-Signature': z.string().max(256).meta({ description: 'The DER ECDSA signature of the raw body, base64.' }),
        }),
      },
      requestBody: { required: true, ...json(z.array(reportedToken).min(1).meta({ description: 'At most `leaks.maxTokens` tokens; `leaks.maxBodyBytes` in all.' })) },
      responses: {
        200: { description: 'A label per reported token, in the report\'s order: `true_positive` for a live secret of this deployment (now ended), `false_positive` for anything else (nothing changed).', ...json(z.array(leakVerdict)) },
        ...Object.fromEntries([400, 401, 413, 415, 429, 503].map((status) => [status, errorResponse(status)])),
      },
    },
  },
  '/api/sign': { get: signOperation('get'), post: signOperation('post') },
  '/api/roles': {
    get: {
      operationId: 'listRolesWithToken',
      tags: ['public'],
      summary: 'One page of the caller\'s account\'s roles, in id order',
      security: [{ accessToken: [] }],
      requestParams: { query: rolesQuery },
      responses: responses(RoleListing, bearerErrors),
    },
  },
  '/.well-known/jwks.json': {
    get: {
      operationId: 'getJwks',
      tags: ['public'],
      summary: 'The public keys that verify access tokens',
      security: [],
      responses: { 200: { description: 'The key set (Cache-Control: public, max-age=300).', ...json(Jwks) } },
    },
  },
  '/healthz': {
    get: {
      operationId: 'getLiveness',
      tags: ['health'],
      summary: 'Liveness: the process answers',
      security: [],
      responses: responses(z.object({ status: z.literal('ok') }), []),
    },
  },
  '/readyz': {
    get: {
      operationId: 'getReadiness',
      tags: ['health'],
      summary: 'Readiness: the instance serves proxied calls and its own endpoints to valid tokens',
      security: [],
      responses: {
        200: { description: 'Every check is up (`ready`), or only checks that do not stop it serving are down (`degraded`, named in `degraded`: Redis, unless `readiness.requireRedis`).', ...json(z.object({ success: z.literal(true), message: Readiness })) },
        503: { description: 'A store does not answer (`unavailable`; `checks` says which), or the gateway is stopping (`draining`, no check made).', ...json(z.object({ success: z.literal(false), message: Readiness })) },
      },
    },
  },
};
