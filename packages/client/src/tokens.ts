/**
 * The token pair and its renewal.
 *
 * When to renew: the access token's lifetime is read from its own payload (exp − iat), and its
 * expiry counted from the moment the pair arrived here, so a client whose clock is wrong renews
 * on time all the same. (A pair this client did not receive itself, from the storage hook or the
 * credentials, has no receipt time: its exp is read against the local clock, capped at one
 * lifetime; a wrong clock then costs one 401 and a replay, nothing more.) A token that is not a
 * readable JWT is renewed only when the gateway refuses it.
 *
 * Single flight: one renewal promise per client, every caller awaits it; with a storage hook and
 * Web Locks, one per origin too: the renewal runs inside a lock and first re-reads the storage,
 * adopting the pair another tab has just rotated instead of spending a refresh token that is no
 * longer the newest. A lock that cannot be had in 10 s (a tab frozen while holding it) is given
 * up for an in-process renewal: the gateway's grace window answers a duplicate refresh with the
 * same pair, so the worst case is one extra request.
 */
import { AuthenticationError, ConfigurationError, UnexpectedResponseError, type GatewayError } from './errors.js';
import { sha256Hex } from './secret.js';
import { within, type CallScope, type RetryPolicy, type Transport } from './transport.js';
import type { Credentials, TokenPair, TokenStorage } from './types.js';

const LOCK_TIMEOUT_MS = 10_000;
/** After a renewal failed for want of the gateway's store or network, the held token is used this long before the next try. */
const RENEW_AGAIN_MS = 5_000;
/** A token this close to its expiry is not sent: it could expire on the way. */
const EXPIRY_SLACK_MS = 1_000;

interface Held {
  /** Dropped (undefined) when the gateway refused it; the refresh token stays usable. */
  accessToken: string | undefined;
  refreshToken: string | undefined;
  /** Local time after which the access token should be renewed; undefined: only on a 401. */
  renewAt: number | undefined;
  /** Local time at which the access token expires; undefined when unknown. */
  expiresAt: number | undefined;
}

interface LockManager {
  request<T>(name: string, options: { signal?: AbortSignal }, callback: () => Promise<T>): Promise<T>;
}

export interface TokenManagerOptions {
  transport: Transport;
  credentials: Credentials;
  storage?: TokenStorage | undefined;
  crossTabLock?: boolean | undefined;
  lockName?: string | undefined;
  renewBeforeMs?: number | undefined;
  onSessionExpired?: ((error: Error) => void) | undefined;
}

/**
 * What a token may be: visible ASCII, as every token the gateway mints is. Anything else could
 * not go in an Authorization header, and the platform's refusal would quote it in its message.
 */
const TOKEN_TEXT = /^[\x21-\x7e]{1,8192}$/;

export function isTokenText(value: unknown): value is string {
  return typeof value === 'string' && TOKEN_TEXT.test(value);
}

/**
 * A token given in the options: trimmed (one read from a file or an environment variable often
 * ends in a newline, which a header would have dropped anyway), then checked, and never quoted.
 */
export function tokenOption(name: string, value: unknown): string {
  const text = typeof value === 'string' ? value.trim() : value;
  if (!isTokenText(text)) throw new ConfigurationError({ code: 'invalid_credentials_option', description: `${name}: not a token (visible ASCII characters only)` });
  return text;
}

/** The access token's lifetime in ms (exp − iat of its payload), or undefined when unreadable. */
export function lifetimeOf(token: string): { lifetimeMs: number; expMs: number } | undefined {
  const part = token.split('.')[1];
  if (part === undefined) return undefined;
  try {
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/');
    const binary = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    const payload = JSON.parse(new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)))) as { exp?: unknown; iat?: unknown };
    if (typeof payload.exp !== 'number' || typeof payload.iat !== 'number' || payload.exp <= payload.iat) return undefined;
    const lifetimeMs = (payload.exp - payload.iat) * 1000;
    // An exp too far off to compute with would make every call renew (Infinity − Infinity).
    if (!Number.isFinite(lifetimeMs) || !Number.isFinite(payload.exp * 1000)) return undefined;
    return { lifetimeMs, expMs: payload.exp * 1000 };
  } catch {
    return undefined;
  }
}

/**
 * A renewal's failure on its way through a call's retry loop: the renewal has made its own
 * retries, so the call must not retry it again (a NetworkError would be). send() unwraps it.
 */
class RenewalFailure {
  readonly error: unknown;
  constructor(error: unknown) {
    this.error = error;
  }
}

export class TokenManager {
  readonly #transport: Transport;
  readonly #storage: TokenStorage | undefined;
  readonly #lockName: string;
  readonly #useLock: boolean;
  readonly #renewBeforeMs: number | undefined;
  readonly #onSessionExpired: ((error: Error) => void) | undefined;
  readonly #apiKey: string | undefined;
  readonly #settingsToken: string | undefined;
  /** The plain secret, kept only until it is hashed. */
  #plainSecret: string | undefined;
  #secretHex: Promise<string> | undefined;
  #held: Held | undefined;
  #loading: Promise<void> | undefined;
  #renewal: Promise<Held> | undefined;
  /** Why the session ended, for refresh-only credentials: every later call fails with it. */
  #expired: GatewayError | undefined;
  /**
   * The `{refreshToken}` of the credentials while it has not been tried: a pair loaded from the
   * storage hook is used first (in a browser it is the tabs' newest), but when that one is dead
   * (a pair left from an earlier visit) the one the application just handed over is tried before
   * the session is declared over.
   */
  #handedOver: TokenPair | undefined;
  /**
   * Counts drop()s: a renewal that began before one (forget, reset) must not bring its pair
   * back, into memory or storage, when it ends after it.
   */
  #generation = 0;

  constructor(options: TokenManagerOptions) {
    const { credentials } = options;
    this.#transport = options.transport;
    this.#storage = options.storage;
    this.#renewBeforeMs = options.renewBeforeMs;
    this.#onSessionExpired = options.onSessionExpired;
    if ('apiKey' in credentials) {
      this.#apiKey = credentials.apiKey;
      this.#plainSecret = credentials.apiSecret;
    } else if ('settingsToken' in credentials) {
      this.#settingsToken = tokenOption('settingsToken', credentials.settingsToken);
    } else {
      this.#handedOver = { refreshToken: tokenOption('refreshToken', credentials.refreshToken), accessToken: typeof credentials.accessToken === 'string' ? credentials.accessToken.trim() : '' };
      this.#held = this.#fromStored(this.#handedOver);
    }
    this.#lockName = options.lockName ?? `auth-gateway-client:${this.#transport.baseUrl.href}:${this.#apiKey ?? 'session'}`;
    this.#useLock = options.storage !== undefined && options.crossTabLock !== false && typeof locks()?.request === 'function';
  }

  get hasKey(): boolean {
    return this.#apiKey !== undefined;
  }

  get isSettingsToken(): boolean {
    return this.#settingsToken !== undefined;
  }

  /** The apiKey and hashed secret, for sign-in and reset. */
  async keyCredentials(): Promise<{ apiKey: string; apiSecret: string }> {
    if (this.#apiKey === undefined) throw new ConfigurationError({ code: 'no_api_key', description: 'this needs the API key and secret in the credentials' });
    if (this.#secretHex === undefined) {
      this.#secretHex = sha256Hex(this.#plainSecret ?? '');
      this.#plainSecret = undefined;
    }
    return { apiKey: this.#apiKey, apiSecret: await this.#secretHex };
  }

  /** A valid access token: the held one, or a renewed one when it is due or missing. */
  async token(scope: CallScope): Promise<string> {
    scope.check();
    if (this.#settingsToken !== undefined) return this.#settingsToken;
    await within(scope, this.#load());
    const held = this.#held;
    if (held?.accessToken !== undefined && (held.renewAt === undefined || Date.now() < held.renewAt)) return held.accessToken;
    let renewed: Held;
    try {
      renewed = await within(scope, this.renew());
    } catch (err) {
      const fallback = this.#stillValid(scope, err);
      if (fallback === undefined) throw err;
      return fallback;
    }
    if (renewed.accessToken === undefined) throw new AuthenticationError({ status: 401, code: 'invalid_token', description: 'no access token after renewal' });
    return renewed.accessToken;
  }

  /**
   * A renewal that failed because the gateway could not renew (its store down, a 429, no
   * answer) says nothing against the token in hand: while it has not expired it is still good
   * (the gateway validates it without the store), so it is used, and the renewal is tried again
   * a few seconds later rather than by every call. A refusal (401) or the caller's own abort is
   * never papered over.
   */
  #stillValid(scope: CallScope, err: unknown): string | undefined {
    if (scope.signal.aborted || err instanceof AuthenticationError || err instanceof ConfigurationError) return undefined;
    const held = this.#held;
    const now = Date.now();
    if (held?.accessToken === undefined || held.expiresAt === undefined || now >= held.expiresAt - EXPIRY_SLACK_MS) return undefined;
    this.#held = { ...held, renewAt: Math.min(now + RENEW_AGAIN_MS, held.expiresAt - EXPIRY_SLACK_MS) };
    return held.accessToken;
  }

  /**
   * Sends with a valid access token under the call's retry policy: `send` makes one attempt with
   * the token of the moment. Answers the last response and the token it carried (to hand to
   * refused() if the gateway refuses it).
   */
  async send(scope: CallScope, policy: RetryPolicy | false, retryable: boolean, send: (token: string) => Promise<Response>): Promise<{ res: Response; token: string }> {
    let token = '';
    const res = await this.#transport.withRetries(scope, policy, retryable, async () => {
      token = await this.token(scope).catch((err: unknown) => { throw new RenewalFailure(err); });
      return send(token);
    }).catch((err: unknown) => { throw err instanceof RenewalFailure ? err.error : err; });
    return { res, token };
  }

  /**
   * The gateway refused `accessToken` (401 invalid_token): forget it, unless a renewal has
   * already replaced it, so that the next token() renews.
   */
  refused(accessToken: string): void {
    if (this.#held?.accessToken === accessToken) this.#held = { ...this.#held, accessToken: undefined };
  }

  /** The pair held now (loaded from the storage hook first), without renewing it: for sign-out. */
  async held(scope: CallScope): Promise<{ accessToken: string | undefined; refreshToken: string | undefined }> {
    if (this.#settingsToken !== undefined) return { accessToken: undefined, refreshToken: undefined };
    await within(scope, this.#load());
    return { accessToken: this.#held?.accessToken, refreshToken: this.#held?.refreshToken };
  }

  /** Forgets the pair, here and in the storage hook (the pair is dead or unwanted). */
  async drop(): Promise<void> {
    this.#generation++;
    this.#held = undefined;
    this.#handedOver = undefined;
    this.#loading = Promise.resolve();
    await this.#storage?.save(undefined);
  }

  /** The one renewal in flight, started if there is none. */
  renew(): Promise<Held> {
    this.#renewal ??= this.#renewShared().finally(() => { this.#renewal = undefined; });
    return this.#renewal;
  }

  #load(): Promise<void> {
    this.#loading ??= (async () => {
      const generation = this.#generation;
      const stored = await this.#storage?.load();
      // Whatever the hook holds that is not a pair (another version's format, a hand edit) is no
      // pair; and a pair dropped (forget, reset) while it loaded stays dropped.
      if (this.#settingsToken === undefined && isStoredPair(stored) && generation === this.#generation) this.#held = this.#fromStored(stored);
    })().catch((err: unknown) => {
      // A storage that failed once (a locked IndexedDB, say) is asked again by the next call.
      this.#loading = undefined;
      throw err;
    });
    return this.#loading;
  }

  async #renewShared(): Promise<Held> {
    const manager = this.#useLock ? locks() : undefined;
    if (manager !== undefined) {
      let entered = false;
      try {
        return await manager.request(this.#lockName, { signal: AbortSignal.timeout(LOCK_TIMEOUT_MS) }, () => {
          entered = true;
          return this.#renewNow(true);
        });
      } catch (err) {
        if (entered) throw err;
        // The lock was not granted in time (or Web Locks failed): renew in this process only.
      }
    }
    return this.#renewNow(false);
  }

  async #renewNow(recheck: boolean): Promise<Held> {
    const generation = this.#generation;
    if (recheck && this.#storage !== undefined) {
      const stored = await this.#storage.load();
      // Another tab rotated the pair while this one waited for the lock: its pair is the newest.
      if (isStoredPair(stored) && stored.refreshToken !== this.#held?.refreshToken && generation === this.#generation) {
        this.#held = this.#fromStored(stored);
        this.#expired = undefined;
        return this.#held;
      }
    }
    for (let refreshToken = this.#held?.refreshToken; refreshToken !== undefined;) {
      if (refreshToken === this.#handedOver?.refreshToken) this.#handedOver = undefined;
      try {
        return await this.#accept(await this.#transport.json<TokenPair>({ method: 'POST', path: '/api/refresh', body: { refreshToken }, retryable: true, dpop: true }), generation);
      } catch (err) {
        // A family bound to another DPoP key (a pair stored under an earlier key): with the key at
        // hand a fresh sign-in binds a new one; without it, the refusal is the caller's to see.
        if (err instanceof AuthenticationError && err.code === 'invalid_dpop_proof' && this.#apiKey !== undefined) break;
        if (!(err instanceof AuthenticationError && err.code === 'invalid_grant')) throw err;
        if (this.#handedOver !== undefined) {
          // The stored pair was dead; the application's own refresh token is still untried.
          this.#held = this.#fromStored(this.#handedOver);
          refreshToken = this.#handedOver.refreshToken;
          continue;
        }
        if (this.#apiKey === undefined) {
          this.#expired = err;
          // The application's storage and callback failing must not hide why the session ended.
          await this.drop().catch(() => {});
          try {
            this.#onSessionExpired?.(err);
          } catch {
            // The callback's own bug is the application's to find; the caller gets the refusal.
          }
          throw err;
        }
        // A dead refresh token (reset, reused, expired) with the key at hand: one fresh sign-in.
        break;
      }
    }
    if (this.#apiKey === undefined) {
      throw this.#expired ?? new AuthenticationError({ status: 401, code: 'invalid_grant', description: 'the session has ended and there is no API key to sign in with' });
    }
    const body = await this.keyCredentials();
    return this.#accept(await this.#transport.json<TokenPair>({ method: 'POST', path: '/api/signin', body, retryable: true, dpop: true }), generation);
  }

  /**
   * A pair the gateway sent, held and saved, unless the pair was dropped (forget, reset) since
   * the renewal began: the callers waiting for it still get it, but it is not kept.
   */
  async #accept(pair: unknown, generation: number): Promise<Held> {
    if (pair === null || typeof pair !== 'object' || !isTokenText((pair as TokenPair).accessToken) || !isTokenText((pair as TokenPair).refreshToken)) {
      throw new UnexpectedResponseError({ code: 'unexpected_response', description: 'the gateway answered without a token pair' });
    }
    const { accessToken, refreshToken } = pair as TokenPair;
    const life = lifetimeOf(accessToken);
    const expiresAt = life === undefined ? undefined : Date.now() + life.lifetimeMs;
    const held: Held = {
      accessToken,
      refreshToken,
      renewAt: life === undefined || expiresAt === undefined ? undefined : expiresAt - this.#renewBefore(life.lifetimeMs),
      expiresAt,
    };
    if (generation !== this.#generation) return held;
    this.#held = held;
    this.#expired = undefined;
    // A storage that cannot save (a full localStorage) costs the pair's persistence, not the
    // call: counted as a failed renewal, it would renew again every few seconds.
    await (async () => this.#storage?.save({ accessToken, refreshToken }))().catch(() => {});
    return held;
  }

  /** A pair not received by this client: its exp, read against the local clock, at most one lifetime ahead. */
  #fromStored(pair: TokenPair): Held {
    // An access token that could not be sent is no token: the refresh token renews it.
    const accessToken = isTokenText(pair.accessToken) ? pair.accessToken : undefined;
    const life = accessToken === undefined ? undefined : lifetimeOf(accessToken);
    const expiresAt = life === undefined ? undefined : Math.min(life.expMs, Date.now() + life.lifetimeMs);
    return {
      accessToken,
      refreshToken: pair.refreshToken,
      renewAt: life === undefined || expiresAt === undefined ? undefined : expiresAt - this.#renewBefore(life.lifetimeMs),
      expiresAt,
    };
  }

  #renewBefore(lifetimeMs: number): number {
    return this.#renewBeforeMs ?? Math.min(lifetimeMs / 2, Math.max(5000, lifetimeMs * 0.1));
  }
}

/** A stored pair: a usable refresh token, and an access token that #fromStored checks on its own. */
function isStoredPair(value: unknown): value is TokenPair {
  return value !== null && typeof value === 'object' && isTokenText((value as TokenPair).refreshToken);
}

function locks(): LockManager | undefined {
  return (globalThis as { navigator?: { locks?: LockManager } }).navigator?.locks;
}
