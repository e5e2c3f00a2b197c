/**
 * POST /api/token: the token endpoint of RFC 6749 (§3.2), for any OAuth 2.0 client library. A
 * form body (`application/x-www-form-urlencoded`, each parameter once: §3.2) with
 * `grant_type=client_credentials` (§4.4; the API key is the `client_id`, the API secret itself
 * the `client_secret`) or `grant_type=refresh_token` (§6), the client authenticated by HTTP
 * Basic (`client_secret_basic`, §2.3.1: id and secret form-encoded inside it) or by
 * `client_id` and `client_secret` in the body (`client_secret_post`), never both.
 *
 * The same calls as /api/signin and /api/refresh, one step each: the secret's SHA-256 (what
 * /api/signin takes) checked by auth.signIn as one counted guess (checkKeyCredentials), the
 * refresh token counted by limits.refresh and rotated by auth.refresh, so their limits,
 * metrics, key-use records and resets hold here too. A refresh authenticates its client as
 * well (auth.authenticateClient, counted the same way), and a token of another key is
 * invalid_grant. Answers are RFC 6749's (§5.1, §5.2), errors included (errors/oauth.ts);
 * their sentences quote in backticks, since §5.2's error_description allows no double quote.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedClientCertificate } from '../../auth/client-certificate.js';
import { MAX_GRANT_LENGTH, parseRefreshToken } from '../../auth/refresh.js';
import type { GrantRequest, IssueResult } from '../../auth/service.js';
import { SCOPE_PATTERN } from '../../domain/formats.js';
import { hashSecret } from '../../domain/secrets.js';
import { InvalidGrant } from '../../errors/errors.js';
import { InvalidClient, InvalidScope, OAuthError, toOAuthError, UnsupportedGrantType } from '../../errors/oauth.js';
import { readFields } from '../body.js';
import { bindingThumbprint, checkKeyCredentials, dpopRefusal, type CredentialRouteDeps } from './credentials.js';

export const TOKEN_PATH = '/api/token';

/** RFC 6749 §3.1: a parameter sent without a value is as if omitted. */
const param = (max: number) => z.string().max(max).optional().transform((value) => (value === '' ? undefined : value));

// Not strict: RFC 6749 §3.2 has the server ignore parameters it does not know.
const TokenBody = z.object({
  grant_type: param(256),
  client_id: param(256),
  client_secret: param(256),
  scope: param(MAX_GRANT_LENGTH),
  refresh_token: param(2048),
});
type TokenParams = z.infer<typeof TokenBody>;

export interface TokenRouteDeps extends CredentialRouteDeps {
  /** `tokens.accessTokenTtlSeconds`: the answer's `expires_in`. */
  accessTokenTtlSeconds: number;
}

/** The client's credentials, as the token endpoint received them. */
interface Client {
  apiKey: string;
  /** The SHA-256 of the API secret, as /api/signin takes it. */
  apiSecret: string;
}

export function issueTokens(deps: TokenRouteDeps) {
  return async function issueTokens(ctx: Context): Promise<void> {
    try {
      const params = await readFields(ctx, TokenBody, { limit: deps.bodyLimitBytes, accept: ['form'] });
      const grantType = grantTypeOf(params);
      const client = authenticatingClient(ctx.get('authorization'), params);
      const request: GrantRequest = params.scope === undefined ? {} : { scopes: scopesOf(params.scope) };
      const issued = grantType === 'client_credentials'
        ? await clientCredentialsGrant(deps, ctx, client, request)
        : await refreshTokenGrant(deps, ctx, client, requiredParam(params.refresh_token, 'refresh_token'), request);
      ctx.set('Pragma', 'no-cache');
      if (issued.pair.token_type === 'DPoP') ctx.set(deps.dpop.nonceHeader() ?? {});
      ctx.body = {
        access_token: issued.pair.accessToken,
        token_type: issued.pair.token_type ?? 'Bearer',
        expires_in: deps.accessTokenTtlSeconds,
        refresh_token: issued.pair.refreshToken,
        ...(issued.scopes.length > 0 ? { scope: issued.scopes.join(' ') } : {}),
      };
    } catch (err) {
      throw toOAuthError(err, ctx.get('authorization') !== '');
    }
  };
}

type Issued = Extract<IssueResult, { outcome: 'issued' }>;

/**
 * §4.4: the key's own credentials give a new pair, as /api/signin; with a DPoP proof (RFC 9449
 * §5, its `htu` this endpoint's URL) the pair is bound to its key, the proof checked inside the
 * counted attempt.
 */
async function clientCredentialsGrant(deps: TokenRouteDeps, ctx: Context, client: Client, request: GrantRequest): Promise<Issued> {
  return checkKeyCredentials(deps, ctx, client.apiKey, async () => deps.auth.signIn(client.apiKey, client.apiSecret, verifiedClientCertificate(ctx.req), { ...request, dpopThumbprint: await bindingThumbprint(deps.dpop, ctx.req) }));
}

/** §6: the client authenticated, then its refresh token counted and rotated, as /api/refresh. */
async function refreshTokenGrant(deps: TokenRouteDeps, ctx: Context, client: Client, refreshToken: string, request: GrantRequest): Promise<Issued> {
  const { auth, limits, clientAddress } = deps;
  const certificate = verifiedClientCertificate(ctx.req);
  const owner = await checkKeyCredentials(deps, ctx, client.apiKey, () => auth.authenticateClient(client.apiKey, client.apiSecret, certificate));
  const presented = parseRefreshToken(refreshToken);
  // Every call counts, right or wrong: wrong-secret refreshes are guesses at a family's secret.
  const attempt = await limits.refresh(presented?.familyId, clientAddress(ctx.req));
  // §6: the refresh token must have been issued to the authenticated client; another's is untouched.
  if (presented === undefined || presented.accountId !== owner.accountId || presented.keyId !== owner.keyId) throw new InvalidGrant();
  const result = await auth.refresh(refreshToken, certificate, { ...request, dpopThumbprint: await bindingThumbprint(deps.dpop, ctx.req) });
  if (result.outcome === 'rejected') throw result.reason === 'invalid_scope' ? new InvalidScope() : dpopRefusal(result.reason, deps.dpop) ?? new InvalidGrant();
  if (result.replayed === true) await attempt.replayed();
  if (attempt.headers !== undefined) ctx.set(attempt.headers);
  return result;
}

function grantTypeOf(params: TokenParams): 'client_credentials' | 'refresh_token' {
  const grantType = requiredParam(params.grant_type, 'grant_type');
  if (grantType !== 'client_credentials' && grantType !== 'refresh_token') throw new UnsupportedGrantType(grantType);
  return grantType;
}

function requiredParam(value: string | undefined, name: string): string {
  if (value === undefined) throw new OAuthError(400, 'invalid_request', `The parameter \`${name}\` is required.`);
  return value;
}

/**
 * The client's credentials by exactly one method (§2.3): HTTP Basic, or both parameters in the
 * body. Basic with a `client_secret` in the body is two methods; a `client_id` beside Basic
 * must name the same client.
 */
function authenticatingClient(authorization: string, params: TokenParams): Client {
  if (authorization !== '') {
    const basic = parseBasic(authorization);
    if (params.client_secret !== undefined) throw new OAuthError(400, 'invalid_request', 'The client authenticated twice: by HTTP Basic and by client_secret in the body. Use one method.');
    if (params.client_id !== undefined && params.client_id !== basic.clientId) throw new OAuthError(400, 'invalid_request', 'The client_id in the body is not the one in the Authorization header.');
    return clientOf(basic.clientId, basic.clientSecret);
  }
  if (params.client_id === undefined || params.client_secret === undefined) {
    throw new InvalidClient('The client did not authenticate: send the API key and the API secret by HTTP Basic (client_secret_basic), or as client_id and client_secret in the body (client_secret_post).');
  }
  return clientOf(params.client_id, params.client_secret);
}

function clientOf(clientId: string, clientSecret: string): Client {
  if (clientId.length > 256 || clientSecret.length > 256) throw new InvalidClient();
  return { apiKey: clientId, apiSecret: hashSecret(clientSecret).toString('hex') };
}

/**
 * RFC 7617 Basic credentials holding a form-encoded client id and secret (RFC 6749 §2.3.1).
 * Another scheme is no client authentication the token endpoint takes (invalid_client); a
 * Basic value that does not decode is a malformed request.
 */
function parseBasic(authorization: string): { clientId: string; clientSecret: string } {
  const match = /^basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(authorization);
  if (match === null) {
    if (/^basic(?: |$)/i.test(authorization)) throw new OAuthError(400, 'invalid_request', 'The Authorization header is malformed: expected `Basic` and base64 of `client_id:client_secret`.');
    throw new InvalidClient('The token endpoint takes client credentials by HTTP Basic or in the body, not another Authorization scheme.');
  }
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const clientId = colon < 0 ? undefined : formDecode(decoded.slice(0, colon));
  const clientSecret = colon < 0 ? undefined : formDecode(decoded.slice(colon + 1));
  if (clientId === undefined || clientSecret === undefined || clientId === '' || clientSecret === '') {
    throw new OAuthError(400, 'invalid_request', 'The Basic credentials are malformed: expected the form-encoded client_id and client_secret joined by a colon.');
  }
  return { clientId, clientSecret };
}

/** application/x-www-form-urlencoded decoding of one value; undefined when it does not decode. */
function formDecode(value: string): string | undefined {
  try {
    return decodeURIComponent(value.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

/** RFC 6749 §3.3: scope tokens separated by single spaces. */
function scopesOf(scope: string): readonly string[] {
  const scopes = scope.split(' ');
  if (!scopes.every((s) => SCOPE_PATTERN.test(s))) throw new OAuthError(400, 'invalid_request', 'The scope parameter is malformed: expected scope tokens separated by single spaces.');
  return scopes;
}
