/**
 * Sign-in and refresh as plain calls: no ctx, no HTTP. Expected failures are results; the
 * routes turn them into errors at one visible point.
 */
import { decodeJwt } from 'jose';
import type { Config } from '../config/schema.js';
import type { ApiKeyRecord, KeyDirectory } from '../state/keys/store.js';
import type { RefreshTokenStore, RotateResult } from '../state/tokens/store.js';
import { StoreUnavailable } from '../errors/errors.js';
import type { Logger } from '../telemetry/log.js';
import type { CredentialOutcome, Metrics } from '../telemetry/metrics.js';
import type { Clock } from '../util/clock.js';
import { verifyApiCredentials } from './credentials.js';
import type { ClientCertificate } from './client-certificate.js';
import type { DemoSecretGuard } from './demo-secrets.js';
import { hashRefreshSecret, mintRefreshToken, newId, parseRefreshToken, sealPair, sessionOf, unsealPair, type TokenPair } from './refresh.js';
import type { Revocations } from './revocation.js';
import type { Signer } from './signer.js';

export type IssueResult =
  /**
   * `replayed`: a duplicate refresh inside the grace window, given the pair already minted.
   * `scopes`: what the access token carries (the token endpoint's `scope` answer).
   */
  | { outcome: 'issued'; pair: TokenPair; scopes: readonly string[]; replayed?: true }
  /**
   * `invalid_scope`: a requested scope the key (or the family's grant) lacks, after the
   * credentials matched; `dpop_required`: a key that requires DPoP without a proof;
   * `dpop_mismatch`: a DPoP-bound family refreshed without a proof by its key.
   */
  | { outcome: 'rejected'; reason: 'bad_credentials' | 'invalid' | 'reused' | 'key_disabled' | 'certificate_mismatch' | 'invalid_scope' | 'dpop_required' | 'dpop_mismatch' };

/**
 * What a caller asks of a sign-in or refresh beyond the credentials: the token endpoint's
 * parameters, and the key of the request's DPoP proof.
 */
export interface GrantRequest {
  /**
   * RFC 6749 §3.3 `scope`, as distinct scope tokens: at sign-in, narrows the key's scopes and
   * is kept by the refresh-token family; at a refresh, narrows that access token only, within
   * the family's grant (§6). A scope outside them: `invalid_scope`.
   */
  scopes?: readonly string[];
  /**
   * The RFC 7638 thumbprint of the request's checked DPoP proof (auth/dpop.ts): the pair is
   * bound to that key (`cnf.jkt`, and the family remembers it, RFC 9449 §5).
   */
  dpopThumbprint?: string | undefined;
}

export type ClientResult =
  | { outcome: 'authenticated'; accountId: string; keyId: string }
  | { outcome: 'rejected'; reason: 'bad_credentials' | 'certificate_mismatch' };

export type ResetResult =
  | { outcome: 'reset'; accountId: string; keyId?: string; at: number }
  | { outcome: 'rejected'; reason: 'bad_credentials' | 'certificate_mismatch' };

export interface AuthService {
  /**
   * Checks apiKey and apiSecret (SHA-256 of the secret) and starts a refresh-token family.
   * `certificate`: the request's verified client certificate; a key bound to one
   * (`certificateSha256`) is refused (`certificate_mismatch`, after its secret matched) without
   * it, and its tokens carry it (`cnf.x5t#S256`).
   * `dpopThumbprint`: the key of the request's checked DPoP proof (auth/dpop.ts); the pair is then
   * bound to it (`cnf.jkt`, the family remembers it). A key with `requireDpop` is refused
   * (`dpop_required`, after its secret matched) without one.
   */
  signIn(apiKey: string, apiSecret: string, certificate?: ClientCertificate, request?: GrantRequest): Promise<IssueResult>;
  /**
   * Rotates a refresh token (see state/tokens/store.ts for the outcomes); a bound key's needs its
   * certificate too, as signIn. A DPoP-bound family needs a proof by its key (`dpop_mismatch`);
   * with a proof the new access token is bound to its key.
   */
  refresh(refreshToken: string, certificate?: ClientCertificate, request?: GrantRequest): Promise<IssueResult>;
  /**
   * Checks an API key's credentials as signIn does (the secret's SHA-256; the bound
   * certificate), issuing nothing: the token endpoint's client authentication for a refresh.
   */
  authenticateClient(apiKey: string, apiSecret: string, certificate?: ClientCertificate): Promise<ClientResult>;
  /**
   * The owner's token reset (interface §5.6): with the key's own credentials, kills every token
   * issued so far to that key, or to every key of its account.
   */
  resetTokens(apiKey: string, apiSecret: string, scope: 'key' | 'account', certificate?: ClientCertificate): Promise<ResetResult>;
}

export interface AuthServiceDeps {
  keys: KeyDirectory;
  tokens: RefreshTokenStore;
  signer: Signer;
  revocations: Revocations;
  clock: Clock;
  log: Logger;
  settings: Config['tokens'];
  /** After an account-wide reset: what else must stop for good (the account's API settings tokens). */
  onAccountReset?: (accountId: string) => Promise<void>;
  /** After a successful sign-in, not awaited: records the key's last use (auth/key-use.ts). */
  onSignIn?: (key: ApiKeyRecord) => void;
  /** Refuses the published demo secrets on a production gateway (auth/demo-secrets.ts); none refused without it. */
  demoSecrets?: DemoSecretGuard;
}

export function createAuthService({ keys, tokens, signer, revocations, clock, log, settings, onAccountReset, onSignIn, demoSecrets }: AuthServiceDeps): AuthService {
  /** The key when apiKey and apiSecret match and its secret may be served; undefined otherwise, one answer for all. */
  const verify = async (apiKey: string, apiSecret: string) => {
    const key = await verifyApiCredentials(keys, apiKey, apiSecret, clock.now());
    return key === undefined || demoSecrets?.refusesSignIn(key, apiSecret) === true ? undefined : key;
  };
  const refreshTtlMs = settings.refreshTokenTtlSeconds * 1000;
  const familyMaxMs = settings.refreshFamilyMaxSeconds * 1000;
  const graceMs = settings.refreshGraceSeconds * 1000;

  return {
    async signIn(apiKey, apiSecret, certificate, request = {}) {
      const key = await verify(apiKey, apiSecret);
      if (key === undefined) return { outcome: 'rejected', reason: 'bad_credentials' };
      if (!presentsBoundCertificate(key, certificate)) return { outcome: 'rejected', reason: 'certificate_mismatch' };
      const { dpopThumbprint } = request;
      if (key.requireDpop === true && dpopThumbprint === undefined) return { outcome: 'rejected', reason: 'dpop_required' };
      const grant = request.scopes === undefined ? undefined : canonicalScopes(request.scopes);
      if (grant !== undefined && !isWithin(grant, key.scopes)) return { outcome: 'rejected', reason: 'invalid_scope' };
      const scopes = grant ?? key.scopes;

      const now = clock.now();
      const familyId = newId();
      const refresh = mintRefreshToken(key.accountId, key.keyId, familyId, grant);
      const accessToken = await signer.issueAccessToken({ ...key, scopes, epoch: await revocations.currentEpoch(), certificateThumbprint: thumbprintOf(key), session: sessionOf(familyId), dpopThumbprint });
      await tokens.createFamily({
        familyId,
        accountId: key.accountId,
        keyId: key.keyId,
        familyExpiresAt: now + familyMaxMs,
        token: { tokenId: refresh.tokenId, secretHash: refresh.secretHash, expiresAt: now + refreshTtlMs },
        ...(grant === undefined ? {} : { scopes: grant }),
        ...(dpopThumbprint === undefined ? {} : { dpopThumbprint }),
      }, now);
      onSignIn?.(key);
      return { outcome: 'issued', pair: { accessToken, refreshToken: refresh.token, ...tokenType(dpopThumbprint) }, scopes };
    },

    async refresh(refreshToken, certificate, request = {}) {
      const { dpopThumbprint } = request;
      const presented = parseRefreshToken(refreshToken);
      if (presented === undefined) return { outcome: 'rejected', reason: 'invalid' };

      // A key removed or disabled in the directory mints nothing more, even from a live family.
      const key = await keys.findByKeyId(presented.keyId);
      if (key === undefined || key.disabled || key.accountId !== presented.accountId) {
        return { outcome: 'rejected', reason: key?.disabled ? 'key_disabled' : 'invalid' };
      }
      // Tokens a demo key got while ALLOW_DEMO_DATA was on end with it.
      if (demoSecrets?.refusesKey(key) === true) return { outcome: 'rejected', reason: 'invalid' };
      // Before the rotation: the refresh token stays as it was, for the client with the certificate.
      if (!presentsBoundCertificate(key, certificate)) return { outcome: 'rejected', reason: 'certificate_mismatch' };
      const scopes = refreshedScopes(key.scopes, presented.scopes, request.scopes);
      if (scopes === undefined) return { outcome: 'rejected', reason: 'invalid_scope' };
      if (key.requireDpop === true && dpopThumbprint === undefined) return { outcome: 'rejected', reason: 'dpop_required' };

      const now = clock.now();
      const successor = mintRefreshToken(presented.accountId, presented.keyId, presented.familyId, presented.scopes);
      const accessToken = await signer.issueAccessToken({ ...key, scopes, epoch: await revocations.currentEpoch(), certificateThumbprint: thumbprintOf(key), session: sessionOf(presented.familyId), dpopThumbprint });
      const pair: TokenPair = { accessToken, refreshToken: successor.token, ...tokenType(dpopThumbprint) };
      const result = await tokens.rotate({
        tokenId: presented.tokenId,
        accountId: presented.accountId,
        keyId: presented.keyId,
        familyId: presented.familyId,
        secretHash: hashRefreshSecret(presented.secret),
        successor: { tokenId: successor.tokenId, secretHash: successor.secretHash, expiresAt: now + refreshTtlMs },
        sealedPair: sealPair(pair, presented.secret),
        now,
        graceMs,
        ...(presented.scopes === undefined ? {} : { scopes: presented.scopes }),
        ...(dpopThumbprint === undefined ? {} : { dpopThumbprint }),
      });

      return refreshAnswer(result, { pair, scopes, presented, log });
    },

    authenticateClient: async (apiKey, apiSecret, certificate) => authenticated(await verify(apiKey, apiSecret), certificate),

    async resetTokens(apiKey, apiSecret, scope, certificate) {
      const key = await verify(apiKey, apiSecret);
      if (key === undefined) return { outcome: 'rejected', reason: 'bad_credentials' };
      // A bound key's credentials are its secret and its certificate: the secret alone, stolen,
      // must not be enough to end every token of the account.
      if (!presentsBoundCertificate(key, certificate)) return { outcome: 'rejected', reason: 'certificate_mismatch' };
      const target = scope === 'key' ? { accountId: key.accountId, keyId: key.keyId } : { accountId: key.accountId };
      const at = await revocations.reset(target);
      if (scope === 'account') await onAccountReset?.(key.accountId);
      log.info({ ...target, scope }, 'tokens reset');
      return { outcome: 'reset', ...target, at };
    },
  };
}

/** What a refresh answers for the store's outcome: the pair minted, the earlier one for a duplicate, or the refusal. */
function refreshAnswer(result: RotateResult, { pair, scopes, presented, log }: { pair: TokenPair; scopes: readonly string[]; presented: { accountId: string; keyId: string; secret: string }; log: Logger }): IssueResult {
  switch (result.outcome) {
    case 'rotated':
      return { outcome: 'issued', pair, scopes };
    case 'replayed': {
      // The earlier pair's own scopes: its duplicate may have asked for another narrowing.
      const earlier = unsealPair(result.sealedPair, presented.secret);
      return earlier === undefined ? { outcome: 'rejected', reason: 'invalid' } : { outcome: 'issued', pair: earlier, scopes: scopesOf(earlier.accessToken), replayed: true };
    }
    case 'reused':
      log.warn({ accountId: presented.accountId, keyId: presented.keyId, familyId: result.familyId }, 'refresh token reused: family revoked');
      return { outcome: 'rejected', reason: 'reused' };
    case 'invalid':
      return { outcome: 'rejected', reason: 'invalid' };
    case 'dpop_mismatch':
      return { outcome: 'rejected', reason: 'dpop_mismatch' };
  }
}

/**
 * A refreshed access token's scopes: the family's grant (absent: the key's), never wider than
 * the key is now (a scope an owner took from the key since the sign-in is gone from the next
 * token), narrowed by `asked`; undefined when `asked` names a scope outside the grant.
 */
function refreshedScopes(keyScopes: readonly string[], grant: readonly string[] | undefined, asked: readonly string[] | undefined): readonly string[] | undefined {
  const granted = grant === undefined ? keyScopes : grant.filter((scope) => keyScopes.includes(scope));
  if (asked === undefined) return granted;
  if (!isWithin(asked, grant ?? keyScopes)) return undefined;
  return canonicalScopes(asked).filter((scope) => granted.includes(scope));
}

/** authenticateClient's answer for the key its credentials matched (undefined: none), as signIn decides. */
function authenticated(key: ApiKeyRecord | undefined, certificate: ClientCertificate | undefined): ClientResult {
  if (key === undefined) return { outcome: 'rejected', reason: 'bad_credentials' };
  if (!presentsBoundCertificate(key, certificate)) return { outcome: 'rejected', reason: 'certificate_mismatch' };
  return { outcome: 'authenticated', accountId: key.accountId, keyId: key.keyId };
}

/** Scopes as a family keeps them: each once, sorted (so the store compares one spelling). */
function canonicalScopes(scopes: readonly string[]): readonly string[] {
  return [...new Set(scopes)].sort();
}

function isWithin(asked: readonly string[], allowed: readonly string[]): boolean {
  return asked.every((scope) => allowed.includes(scope));
}

/** The `scope` claim of a token this gateway just signed (the grace window's earlier pair). */
function scopesOf(accessToken: string): readonly string[] {
  const { scope } = decodeJwt(accessToken);
  return typeof scope === 'string' && scope !== '' ? scope.split(' ') : [];
}

/**
 * A DPoP-bound pair says so (`token_type: "DPoP"`, RFC 9449 §5); a bearer pair answers as the
 * interface document's `{accessToken, refreshToken}`, unchanged.
 */
function tokenType(dpopThumbprint: string | undefined): { token_type?: 'DPoP' } {
  return dpopThumbprint === undefined ? {} : { token_type: 'DPoP' };
}

/** True for a key bound to no certificate, or when `certificate` is the one it is bound to. */
function presentsBoundCertificate(key: ApiKeyRecord, certificate: ClientCertificate | undefined): boolean {
  return key.certificateSha256 === undefined || certificate?.sha256 === key.certificateSha256;
}

/** What a bound key's tokens carry as `cnf.x5t#S256`: the same SHA-256 in base64url. */
function thumbprintOf(key: ApiKeyRecord): string | undefined {
  return key.certificateSha256 === undefined ? undefined : Buffer.from(key.certificateSha256, 'hex').toString('base64url');
}

/**
 * The same service with each call's outcome counted (gateway_signins_total and its siblings):
 * the result's reason, `unavailable` for a store failure, `error` for anything else thrown.
 * Refusals before the service is called (a rate limit, a malformed body) are counted by their
 * own metrics and the request metrics.
 */
export function countAuthOutcomes(auth: AuthService, metrics: Pick<Metrics, 'signIn' | 'refresh' | 'reset'>): AuthService {
  const counted = <T extends IssueResult | ResetResult>(count: (outcome: CredentialOutcome) => void, call: Promise<T>): Promise<T> => call.then((result) => {
    count(result.outcome === 'rejected' ? result.reason : 'replayed' in result && result.replayed === true ? 'replayed' : result.outcome);
    return result;
  }, (err: unknown) => {
    count(err instanceof StoreUnavailable ? 'unavailable' : 'error');
    throw err;
  });
  return {
    signIn: (apiKey, apiSecret, certificate, request) => counted(metrics.signIn, auth.signIn(apiKey, apiSecret, certificate, request)),
    refresh: (refreshToken, certificate, request) => counted(metrics.refresh, auth.refresh(refreshToken, certificate, request)),
    // Counted where it leads: the refresh that follows it (or the 401 the route answers).
    authenticateClient: (apiKey, apiSecret, certificate) => auth.authenticateClient(apiKey, apiSecret, certificate),
    resetTokens: (apiKey, apiSecret, scope, certificate) => counted(metrics.reset, auth.resetTokens(apiKey, apiSecret, scope, certificate)),
  };
}
