/**
 * GatewayClient: the gateway's public API as typed methods, with the tokens handled inside.
 *
 *   const gateway = new GatewayClient({ baseUrl, credentials: { apiKey, apiSecret } });
 *   const record = await gateway.sign('0x…');
 *
 * Renewal, single flight and the 401 replay live in tokens.ts; HTTP, deadlines and retries in
 * transport.ts.
 */
import { DpopProver, sendAuthorized } from './dpop.js';
import { AuthenticationError, ConfigurationError, UnexpectedResponseError } from './errors.js';
import { gatewayFetch } from './fetch.js';
import { runsInBrowser } from './platform.js';
import { tokenOption, TokenManager } from './tokens.js';
import { isIdempotent, readEnvelope, Transport, type JsonCall } from './transport.js';
import type {
  CallOptions, ClientOptions, GatewayRequestInit, RateLimitInfo, ResetResult, Role, RolesPage, RolesQuery, SignRecord,
} from './types.js';

export class GatewayClient {
  readonly #transport: Transport;
  readonly #tokens: TokenManager;

  constructor(options: ClientOptions) {
    const { credentials } = options;
    if (credentials === null || typeof credentials !== 'object'
      || !(('apiKey' in credentials && 'apiSecret' in credentials) || 'settingsToken' in credentials || 'refreshToken' in credentials)) {
      throw new ConfigurationError({ code: 'invalid_credentials_option', description: 'credentials: {apiKey, apiSecret}, {settingsToken} or {refreshToken, accessToken?}' });
    }
    if (runsInBrowser() && !('refreshToken' in credentials) && options.dangerouslyAllowBrowser !== true) {
      throw new ConfigurationError({
        code: 'secret_in_browser',
        description: 'an API secret or API settings token in a web page is readable by every script on it: mint a pair on your backend and pass {refreshToken}, or set dangerouslyAllowBrowser: true',
      });
    }
    this.#transport = new Transport({
      baseUrl: options.baseUrl, fetch: options.fetch, timeoutMs: options.timeoutMs, retry: options.retry, onRateLimit: options.onRateLimit,
      // An API settings token is never DPoP-bound: no key for it.
      dpop: options.dpop === undefined || options.dpop === null || 'settingsToken' in credentials ? undefined : new DpopProver(options.dpop),
    });
    this.#tokens = new TokenManager({
      transport: this.#transport,
      credentials,
      storage: options.storage,
      crossTabLock: options.crossTabLock,
      lockName: options.lockName,
      renewBeforeMs: options.renewBeforeMs,
      onSessionExpired: options.onSessionExpired,
    });
    this.fetch = gatewayFetch(this.#transport, this.#tokens);
  }

  /** The gateway's base URL, with a trailing slash. */
  get baseUrl(): URL {
    return new URL(this.#transport.baseUrl);
  }

  /** The RateLimit fields of the latest answer that carried them. */
  get rateLimit(): RateLimitInfo | undefined {
    return this.#transport.rateLimit;
  }

  /** Signs in now rather than at the first call (key credentials; a no-op for a settings token). */
  async signIn(options?: CallOptions): Promise<void> {
    await this.accessToken(options);
  }

  /** A valid access token (renewed if due), for calls made without this client. */
  async accessToken(options?: CallOptions): Promise<string> {
    const scope = this.#transport.scope(options);
    try {
      return await this.#tokens.token(scope);
    } finally {
      scope.end();
    }
  }

  /** `GET /api/sign?address=…`: the account's sign record for an address. */
  sign(address: string, options?: CallOptions): Promise<SignRecord> {
    return this.#authorized<SignRecord>({ method: 'GET', path: '/api/sign', query: { address } }, options);
  }

  /** `GET /api/roles`: one page of the account's roles. */
  async roles(query: RolesQuery = {}, options?: CallOptions): Promise<RolesPage> {
    const page = await this.#authorized<RolesPage>({ method: 'GET', path: '/api/roles', query: { page: query.page, limit: query.limit, name: query.name } }, options);
    // allRoles walks pages by these two fields: garbage in either would have it loop for ever.
    if (!Array.isArray(page?.items) || typeof page.pages !== 'string' || !/^\d{1,15}$/.test(page.pages)) {
      throw new UnexpectedResponseError({ code: 'unexpected_response', description: 'the roles answer has no items list or no page count' });
    }
    return page;
  }

  /** Every role matching `query.name`, page after page (`query.limit` per request). */
  async *allRoles(query: Omit<RolesQuery, 'page'> = {}, options?: CallOptions): AsyncIterableIterator<Role> {
    for (let page = 1; ; page++) {
      const answer = await this.roles({ ...query, page }, options);
      yield* answer.items;
      // Without a limit the gateway's default applies; a short page or the last page ends it.
      if (answer.items.length === 0 || (query.limit !== undefined && answer.items.length < query.limit) || page >= Number(answer.pages)) return;
    }
  }

  /**
   * `POST /api/reset`: every token of this key (`scope: 'key'`, the default) or of its account
   * is refused from now on, this client's too; the client signs in again at its next call.
   * Needs key credentials (ConfigurationError otherwise). Never retried.
   */
  async reset(options: CallOptions & { scope?: 'key' | 'account' } = {}): Promise<ResetResult> {
    const { scope = 'key', ...callOptions } = options;
    if (!this.#tokens.hasKey) throw new ConfigurationError({ code: 'no_api_key', description: 'reset needs the API key and secret in the credentials' });
    const result = await this.#transport.json<ResetResult>({
      method: 'POST', path: '/api/reset', body: { ...(await this.#tokens.keyCredentials()), scope }, retryable: false,
    }, callOptions);
    // Every token of the key is dead now: the next call signs in rather than learning it by a 401.
    await this.#tokens.drop();
    return result;
  }

  /**
   * fetch for the gateway's proxied routes: `input` is a path (resolved against the base URL),
   * a URL or a Request on the gateway's origin. Adds the bearer token, streams bodies both ways,
   * and returns the backend's answer as it came (a 4xx or 5xx is a Response, not an error).
   * Throws NetworkError, TimeoutError or AbortError when no answer came.
   */
  readonly fetch: (input: string | URL | Request, init?: GatewayRequestInit) => Promise<Response>;

  /** Forgets the token pair, in memory and in the storage hook (nothing is revoked: see signOut). */
  async forget(): Promise<void> {
    await this.#tokens.drop();
  }

  /**
   * `POST /api/revoke` (RFC 7009): ends `token` on every gateway instance. A refresh token ends
   * with its whole family (every token rotated from the same sign-in); an access token is refused
   * until it expires. Answers normally for a token the gateway does not know or already ended
   * (RFC 7009 §2.2); an API settings token is refused (InvalidRequestError `unsupported_token_type`:
   * its owner revokes it in the owner API). Needs no credentials: holding the token is the proof.
   * Retried like a read (revoking twice is revoking once). The pair this client holds is left
   * alone: signOut() revokes and forgets it.
   */
  async revoke(token: string, options: CallOptions & { tokenTypeHint?: 'refresh_token' | 'access_token' } = {}): Promise<void> {
    const { tokenTypeHint, ...callOptions } = options;
    const form: Record<string, string> = { token: tokenOption('token', token) };
    if (tokenTypeHint !== undefined) form.token_type_hint = tokenTypeHint;
    await this.#transport.json<unknown>({ method: 'POST', path: '/api/revoke', form, retryable: true }, callOptions);
  }

  /**
   * Signs out: revokes the held refresh token (its family ends, so no copy of it, in another tab
   * or stolen, can mint more) and the held access token (refused from now on, not only once it
   * expires), then forgets the pair, in memory and in the storage hook. The pair is forgotten
   * even when a revocation fails (no answer, the gateway's store down): that error is thrown
   * then, so the application knows the tokens may live on until they expire. With an API settings
   * token there is nothing to revoke here: it is only forgotten.
   */
  async signOut(options: CallOptions = {}): Promise<void> {
    const scope = this.#transport.scope(options);
    let held: { accessToken: string | undefined; refreshToken: string | undefined };
    try {
      held = await this.#tokens.held(scope);
    } finally {
      scope.end();
    }
    // Forgotten first: a call racing the sign-out must not renew the pair being revoked.
    await this.#tokens.drop();
    const failures: unknown[] = [];
    if (held.refreshToken !== undefined) await this.revoke(held.refreshToken, { ...options, tokenTypeHint: 'refresh_token' }).catch((err: unknown) => failures.push(err));
    if (held.accessToken !== undefined) await this.revoke(held.accessToken, { ...options, tokenTypeHint: 'access_token' }).catch((err: unknown) => failures.push(err));
    if (failures.length > 0) throw failures[0];
  }

  /**
   * A call with the bearer token; a 401 invalid_token renews and replays it once, and so does
   * invalid_dpop_proof with a DPoP key (a stored token bound to an earlier key is renewed).
   */
  async #authorized<T>(call: JsonCall, options: CallOptions = {}): Promise<T> {
    const scope = this.#transport.scope(options);
    try {
      const url = this.#transport.url(call.path, call.query);
      for (let replay = 0; ; replay++) {
        const { res, token: used } = await this.#tokens.send(scope, this.#transport.policy(options), call.retryable ?? isIdempotent(call.method), (token) =>
          sendAuthorized(this.#transport.dpop, call.method, url, token, true, (headers) =>
            this.#transport.attempt(scope, url, { method: call.method, headers: { accept: 'application/json', ...headers } })));
        try {
          return await readEnvelope<T>(res, scope);
        } catch (err) {
          const renewable = err instanceof AuthenticationError && (err.code === 'invalid_token' || (err.code === 'invalid_dpop_proof' && this.#transport.dpop !== undefined));
          if (replay > 0 || this.#tokens.isSettingsToken || !renewable) throw err;
          this.#tokens.refused(used);
        }
      }
    } finally {
      scope.end();
    }
  }
}
