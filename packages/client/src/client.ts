/**
 * GatewayClient: the gateway's public API as typed methods, with the tokens handled inside.
 *
 *   const gateway = new GatewayClient({ baseUrl, credentials: { apiKey, apiSecret } });
 *   const record = await gateway.sign('0x…');
 *
 * Renewal, single flight and the 401 replay live in tokens.ts; HTTP, deadlines and retries in
 * transport.ts.
 */
import type {
  CallOptions, ClientOptions, GatewayRequestInit, RateLimitInfo, ResetResult, Role, RolesPage, RolesQuery, SignRecord,
} from './types.js';

export class GatewayClient {
  constructor(options: ClientOptions) {
    void options;
    throw new Error('not implemented');
  }

  /** The gateway's base URL, with a trailing slash. */
  get baseUrl(): URL {
    throw new Error('not implemented');
  }

  /** The RateLimit fields of the latest answer that carried them. */
  get rateLimit(): RateLimitInfo | undefined {
    throw new Error('not implemented');
  }

  /** Signs in now rather than at the first call (key credentials; a no-op for a settings token). */
  signIn(options?: CallOptions): Promise<void> {
    void options;
    throw new Error('not implemented');
  }

  /** A valid access token (renewed if due), for calls made without this client. */
  accessToken(options?: CallOptions): Promise<string> {
    void options;
    throw new Error('not implemented');
  }

  /** `GET /api/sign?address=…`: the account's sign record for an address. */
  sign(address: string, options?: CallOptions): Promise<SignRecord> {
    void address; void options;
    throw new Error('not implemented');
  }

  /** `GET /api/roles`: one page of the account's roles. */
  roles(query?: RolesQuery, options?: CallOptions): Promise<RolesPage> {
    void query; void options;
    throw new Error('not implemented');
  }

  /** Every role matching `query.name`, page after page (`query.limit` per request). */
  allRoles(query?: Omit<RolesQuery, 'page'>, options?: CallOptions): AsyncIterableIterator<Role> {
    void query; void options;
    throw new Error('not implemented');
  }

  /**
   * `POST /api/reset`: every token of this key (`scope: 'key'`, the default) or of its account
   * is refused from now on, this client's too; the client signs in again at its next call.
   * Needs key credentials (ConfigurationError otherwise). Never retried.
   */
  reset(options?: CallOptions & { scope?: 'key' | 'account' }): Promise<ResetResult> {
    void options;
    throw new Error('not implemented');
  }

  /**
   * fetch for the gateway's proxied routes: `input` is a path (resolved against the base URL),
   * a URL or a Request on the gateway's origin. Adds the bearer token, streams bodies both ways,
   * and returns the backend's answer as it came (a 4xx or 5xx is a Response, not an error).
   * Throws NetworkError, TimeoutError or AbortError when no answer came.
   */
  readonly fetch: (input: string | URL | Request, init?: GatewayRequestInit) => Promise<Response> = () => {
    throw new Error('not implemented');
  };

  /** Forgets the token pair, in memory and in the storage hook. */
  forget(): Promise<void> {
    throw new Error('not implemented');
  }
}
