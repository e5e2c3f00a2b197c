/**
 * Token introspection (RFC 7662) as a plain call: is this token good now, and whose is it.
 * For backends that hold a token but not the gateway's keys or state (http/routes/introspect.ts
 * lets only callers whose key has the scope `introspect` ask).
 *
 * Each kind is judged as the gateway itself would judge it on its next use, so that
 * "active" here and "accepted" on a route agree:
 * - the gateway's own access token: signature, times, issuer and audience (signer.ts), resets
 *   (auth/revocation.ts), its own revocation (auth/denied-tokens.ts), and its key still there
 *   and enabled;
 * - another issuer's access token (`trustedIssuers`): verified as a route accepting that issuer
 *   would (auth/trusted-issuers.ts);
 * - an API settings token: as the bearer check does (auth/settings-tokens.ts);
 * - a refresh token: its record in the token store, found by its handle, active only when a
 *   refresh with it would rotate now (its secret's digest matches, not consumed, its family
 *   neither revoked nor reset nor expired), and its key still there and enabled.
 * Anything else is `{active: false}` and nothing more (§2.2), however it failed: the answer
 * tells no more of a bad token than that it is no good. Never a secret: the answer holds claims
 * and ids, never the token, the refresh secret or its digest.
 * `token_type_hint` is only a hint (§2.1): the formats tell the kinds apart.
 */
import { decodeJwt } from 'jose';
import { isSettingsTokenShaped } from '../domain/settings-token.js';
import { InvalidToken } from '../errors/errors.js';
import type { KeyDirectory } from '../state/keys/store.js';
import type { RefreshTokenStore } from '../state/tokens/store.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Clock } from '../util/clock.js';
import type { Authenticate, Identity } from './bearer.js';
import type { DeniedTokens } from './denied-tokens.js';
import { hashRefreshSecret, parseRefreshToken } from './refresh.js';
import type { Revocations } from './revocation.js';
import type { Signer } from './signer.js';

/** RFC 7662 §2.2's members; only `active` when it is false. */
export interface IntrospectionAnswer {
  active: boolean;
  scope?: string;
  client_id?: string;
  sub?: string;
  exp?: number;
  iat?: number;
  jti?: string;
  iss?: string;
  aud?: string | string[];
  /** RFC 6749 §7.1's type of an access token: `Bearer` (`DPoP` for a DPoP-bound one, RFC 9449 §6.2). Absent for a refresh token. */
  token_type?: string;
  /** Which kind of token it is (an extension, §2.2; the name Ory Hydra uses): `access_token`, `refresh_token`, `settings_token`. */
  token_use?: string;
  /** The key or certificate the token is bound to (RFC 8705 §3.2, RFC 9449 §6.2), when it is. */
  cnf?: Readonly<Record<string, unknown>>;
}

export type IntrospectedType = 'access_token' | 'external' | 'settings_token' | 'refresh_token' | 'unknown';

export interface Introspection {
  introspect(token: string): Promise<IntrospectionAnswer>;
}

export interface IntrospectionDeps {
  signer: Pick<Signer, 'verifyAccessToken'>;
  revocations: Pick<Revocations, 'isRevoked'>;
  denied: Pick<DeniedTokens, 'isDenied'>;
  keys: Pick<KeyDirectory, 'findByKeyId'>;
  tokens: Pick<RefreshTokenStore, 'inspect'>;
  /** The API settings tokens' check (auth/settings-tokens.ts). */
  settingsTokens: (token: string) => Promise<Identity>;
  /** The check of a route that accepts every trusted issuer, and no token of the gateway's own. */
  externalTokens: Authenticate | undefined;
  /** The gateway's own `iss`. */
  issuer: string;
  clock: Clock;
  metrics?: Pick<Metrics, 'introspections'>;
}

const INACTIVE: IntrospectionAnswer = Object.freeze({ active: false });

type Judged = { type: IntrospectedType; answer: IntrospectionAnswer };

export function createIntrospection(deps: IntrospectionDeps): Introspection {
  const judge = async (token: string): Promise<Judged> => {
    if (isSettingsTokenShaped(token)) return { type: 'settings_token', answer: await settingsToken(deps, token) };
    const presented = parseRefreshToken(token);
    if (presented !== undefined) return { type: 'refresh_token', answer: await refreshToken(deps, presented) };
    const iss = unverifiedIssuer(token);
    if (iss !== undefined && iss !== deps.issuer && deps.externalTokens !== undefined) {
      return { type: 'external', answer: await externalToken(deps.externalTokens, token) };
    }
    return { type: iss === undefined ? 'unknown' : 'access_token', answer: await accessToken(deps, token) };
  };
  return {
    async introspect(token) {
      const { type, answer } = await judge(token);
      deps.metrics?.introspections.labels(type, String(answer.active)).inc();
      return answer;
    },
  };
}

async function accessToken({ signer, revocations, denied, keys }: IntrospectionDeps, token: string): Promise<IntrospectionAnswer> {
  let claims;
  try {
    claims = await signer.verifyAccessToken(token);
  } catch (err) {
    return inactiveUnless(err);
  }
  if (denied.isDenied(claims.jti, claims.sid)) return INACTIVE;
  const issued = { accountId: claims.sub, keyId: claims.client_id, issuedAtMs: claims.iat_ms, epoch: claims.reset_epoch };
  if (await revocations.isRevoked(issued)) return INACTIVE;
  if (!(await isLiveKey(keys, claims.client_id, claims.sub))) return INACTIVE;
  const all = claims as unknown as Record<string, unknown>;
  const cnf = all.cnf as Record<string, unknown> | undefined;
  return {
    active: true,
    scope: claims.scope ?? '',
    client_id: claims.client_id,
    sub: claims.sub,
    exp: claims.exp,
    iat: claims.iat,
    jti: claims.jti,
    iss: all.iss as string,
    aud: all.aud as string | string[],
    token_type: cnf !== undefined && typeof cnf.jkt === 'string' ? 'DPoP' : 'Bearer',
    token_use: 'access_token',
    ...(cnf !== undefined ? { cnf } : {}),
  };
}

async function externalToken(authenticate: Authenticate, token: string): Promise<IntrospectionAnswer> {
  let identity;
  try {
    identity = await authenticate(token);
  } catch (err) {
    return inactiveUnless(err);
  }
  const claims = identity.claims ?? {};
  const aud = claims.aud;
  return {
    active: true,
    scope: identity.scopes.join(' '),
    client_id: identity.keyId,
    sub: typeof claims.sub === 'string' ? claims.sub : identity.accountId,
    exp: identity.expiresAt,
    iat: identity.issuedAt,
    jti: identity.tokenId,
    iss: identity.issuer,
    ...(typeof aud === 'string' || Array.isArray(aud) ? { aud: aud as string | string[] } : {}),
    token_type: 'Bearer',
    token_use: 'access_token',
  };
}

async function settingsToken({ settingsTokens, issuer }: IntrospectionDeps, token: string): Promise<IntrospectionAnswer> {
  let identity;
  try {
    identity = await settingsTokens(token);
  } catch (err) {
    return inactiveUnless(err);
  }
  return {
    active: true,
    scope: identity.scopes.join(' '),
    client_id: identity.keyId,
    sub: identity.accountId,
    exp: identity.expiresAt,
    iat: identity.issuedAt,
    jti: identity.tokenId,
    iss: issuer,
    token_type: 'Bearer',
    token_use: 'settings_token',
  };
}

async function refreshToken({ tokens, keys, clock, issuer }: IntrospectionDeps, presented: NonNullable<ReturnType<typeof parseRefreshToken>>): Promise<IntrospectionAnswer> {
  const { secret, ...named } = presented;
  const status = await tokens.inspect({ ...named, secretHash: hashRefreshSecret(secret) }, clock.now());
  if (status === undefined || !status.active) return INACTIVE;
  const key = await keys.findByKeyId(named.keyId);
  if (key === undefined || key.disabled || key.accountId !== named.accountId) return INACTIVE;
  return {
    active: true,
    scope: key.scopes.join(' '),
    client_id: named.keyId,
    sub: named.accountId,
    exp: Math.floor(status.expiresAt / 1000),
    iss: issuer,
    token_use: 'refresh_token',
  };
}

/** A token refused is inactive; a store that could not be read is the caller's 503, not a verdict on the token. */
function inactiveUnless(err: unknown): IntrospectionAnswer {
  if (err instanceof InvalidToken) return INACTIVE;
  throw err;
}

async function isLiveKey(keys: Pick<KeyDirectory, 'findByKeyId'>, keyId: string, accountId: string): Promise<boolean> {
  const key = await keys.findByKeyId(keyId);
  return key !== undefined && !key.disabled && key.accountId === accountId;
}

/** The unverified `iss` of a JWT; undefined for anything that is none (bounded like the issuers' own check). */
function unverifiedIssuer(token: string): string | undefined {
  if (token.length > 16_384) return undefined;
  try {
    const { iss } = decodeJwt(token);
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}
