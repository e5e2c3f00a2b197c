/**
 * The one way the client talks HTTP: a call's deadline and abort, the platform's fetch, the
 * gateway's envelope read into a value or a typed error, and the retry policy. The token
 * logic (tokens.ts) and both entry points (client.ts, owner/) sit on top of it.
 *
 * Retries follow ky and ofetch: only idempotent methods (GET, HEAD, PUT, DELETE, OPTIONS) by
 * default; on 408, 429, 502, 503 and 504 and on a connection that failed; `Retry-After`
 * (seconds or an HTTP date) honoured with a little jitter so that many clients refused at once
 * do not all return in the same millisecond, and refused outright when it is longer than
 * `maxRetryAfterMs`; otherwise full-jitter exponential backoff. Every wait counts against the
 * call's deadline: a retry that could not finish in time is not started.
 */
import {
  AbortError, apiErrorFor, ConfigurationError, GatewayError, NetworkError, TimeoutError, UnexpectedResponseError,
} from './errors.js';
import type { DpopProver } from './dpop.js';
import { parseRateLimit, parseRetryAfter } from './rate-limit.js';
import type { CallOptions, RateLimitInfo, RetryOptions } from './types.js';

export type RetryPolicy = Required<RetryOptions>;

export const DEFAULT_RETRY: RetryPolicy = { retries: 2, maxRetryAfterMs: 60_000, baseDelayMs: 300, maxDelayMs: 10_000 };
export const DEFAULT_TIMEOUT_MS = 30_000;
/** The longest delay setTimeout takes (a signed 32-bit count of ms); longer ones fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * The most this client reads of an answer to its own JSON calls. The gateway's largest answers
 * (an owner listing at its highest limit) are far below it; a body past it is not the gateway's.
 */
export const MAX_ENVELOPE_BYTES = 8 * 1024 * 1024;

const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);
const RETRY_STATUSES = new Set([408, 429, 502, 503, 504]);

export function isIdempotent(method: string): boolean {
  return IDEMPOTENT.has(method.toUpperCase());
}

export function retryPolicy(given: RetryOptions | false | undefined, fallback: RetryPolicy | false = DEFAULT_RETRY): RetryPolicy | false {
  if (given === false) return false;
  if (given === undefined) return fallback;
  const base = fallback === false ? DEFAULT_RETRY : fallback;
  return { ...base, ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) };
}

/**
 * One call's deadline and cancellation: a signal that fires when the caller's signal does or
 * the time limit passes, and the typed error saying which. `end()` drops the timer and the
 * listener on the caller's signal. (AbortSignal.any would do this, but not on Node 20.0–20.2.)
 */
export class CallScope {
  readonly signal: AbortSignal;
  readonly deadline: number;
  readonly #controller = new AbortController();
  readonly #caller: AbortSignal | undefined;
  readonly #onAbort = () => this.#controller.abort(this.#caller?.reason);
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timedOut = false;

  constructor({ signal, timeoutMs }: { signal?: AbortSignal | null | undefined; timeoutMs: number }) {
    this.signal = this.#controller.signal;
    this.deadline = Date.now() + timeoutMs;
    this.#caller = signal ?? undefined;
    if (this.#caller?.aborted) this.#controller.abort(this.#caller.reason);
    else {
      this.#caller?.addEventListener('abort', this.#onAbort, { once: true });
      // A limit past the platform's timer range (Infinity included) is no limit: setTimeout
      // would fire such a delay at once.
      if (!(timeoutMs <= MAX_TIMER_MS)) return;
      this.#timer = setTimeout(() => {
        this.#timedOut = true;
        this.#controller.abort(new TimeoutError({ code: 'timeout', description: `the call did not finish within ${timeoutMs} ms` }));
      }, timeoutMs);
      // In Node, a pending time limit must not keep a finished script alive.
      (this.#timer as { unref?: () => void }).unref?.();
    }
  }

  /** The error for a call that stopped because this scope's signal fired. */
  abortError(): GatewayError {
    if (this.#timedOut) return this.signal.reason as TimeoutError;
    return new AbortError({ code: 'aborted', description: 'the call was aborted', cause: this.#caller?.reason });
  }

  /** Throws the typed error if the scope's signal has fired. */
  check(): void {
    if (this.signal.aborted) throw this.abortError();
  }

  /** Waits `ms`, or throws the typed error as soon as the scope ends. */
  async sleep(ms: number): Promise<void> {
    // Past the timer range, in steps: setTimeout would fire at once.
    for (; ms > MAX_TIMER_MS; ms -= MAX_TIMER_MS) await this.#sleep(MAX_TIMER_MS);
    await this.#sleep(ms);
  }

  #sleep(ms: number): Promise<void> {
    this.check();
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        clearTimeout(timer);
        reject(this.abortError());
      };
      const timer = setTimeout(() => {
        this.signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      this.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  end(): void {
    this.stopTimer();
    this.#caller?.removeEventListener('abort', this.#onAbort);
  }

  /**
   * Ends the time limit only: the caller's signal still aborts. For client.fetch, whose answer's
   * body is read after the call returns, by the caller, who may still cancel it.
   */
  stopTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }
}

/** Waits for a shared promise (a renewal, a sign-in), but gives up with the call's own error when the call ends. */
export function within<T>(scope: CallScope, promise: Promise<T>): Promise<T> {
  scope.check();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(scope.abortError());
    scope.signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => { scope.signal.removeEventListener('abort', onAbort); resolve(value); },
      (err: unknown) => { scope.signal.removeEventListener('abort', onAbort); reject(err); },
    );
  });
}

export interface TransportOptions {
  baseUrl: string | URL;
  fetch?: typeof fetch | undefined;
  timeoutMs?: number | undefined;
  retry?: RetryOptions | false | undefined;
  onRateLimit?: ((info: RateLimitInfo) => void) | undefined;
  /** DPoP proofs (dpop.ts), for the calls that bind a pair (JsonCall.dpop) and those with a bound token. */
  dpop?: DpopProver | undefined;
}

export interface JsonCall {
  method: string;
  /** Relative to the base URL, e.g. `/api/roles`. */
  path: string;
  query?: Record<string, string | number | undefined>;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as a form (`application/x-www-form-urlencoded`), for the OAuth endpoints (RFC 7009); instead of `body`. */
  form?: Record<string, string>;
  /** Overrides the method's idempotency, for calls the gateway refuses without effect. */
  retryable?: boolean;
  /** Sign-in and refresh: with the client's DPoP key, each attempt carries a proof (the pair is bound to it). */
  dpop?: boolean;
}

export class Transport {
  readonly baseUrl: URL;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #retry: RetryPolicy | false;
  readonly #onRateLimit: ((info: RateLimitInfo) => void) | undefined;
  /** The client's DPoP key, if it has one. */
  readonly dpop: DpopProver | undefined;
  #rateLimit: RateLimitInfo | undefined;

  constructor({ baseUrl: baseUrlOption, fetch: given, timeoutMs = DEFAULT_TIMEOUT_MS, retry, onRateLimit, dpop }: TransportOptions) {
    let baseUrl: URL;
    try {
      baseUrl = new URL(baseUrlOption);
    } catch {
      // Neither quoted nor kept as the cause (whose `input` is the URL): it may hold a password.
      throw new ConfigurationError({ code: 'invalid_configuration', description: 'baseUrl is not a URL' });
    }
    // fetch refuses such URLs, and its refusal quotes the URL, password included.
    if (baseUrl.username !== '' || baseUrl.password !== '') {
      throw new ConfigurationError({ code: 'invalid_configuration', description: 'baseUrl: a user name or password in the URL is not sent by fetch; give the gateway\'s URL without them' });
    }
    // A base URL with a path (https://host/gw) keeps it: paths are appended, not resolved.
    this.baseUrl = new URL(baseUrl.href.endsWith('/') ? baseUrl.href : `${baseUrl.href}/`);
    const platform = given ?? globalThis.fetch;
    if (typeof platform !== 'function') throw new TypeError('no fetch: pass options.fetch on a platform without one');
    // Called unbound, the browser's fetch throws "Illegal invocation".
    this.#fetch = given ?? ((input, init) => globalThis.fetch(input, init));
    this.#timeoutMs = timeoutMs;
    this.#retry = retryPolicy(retry);
    this.#onRateLimit = onRateLimit;
    this.dpop = dpop;
  }

  /** The RateLimit fields of the latest answer that carried them. */
  get rateLimit(): RateLimitInfo | undefined {
    return this.#rateLimit;
  }

  url(path: string, query?: Record<string, string | number | undefined>): URL {
    const url = new URL(path.replace(/^\/+/, ''), this.baseUrl);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  scope(options: CallOptions = {}): CallScope {
    return new CallScope({ signal: options.signal, timeoutMs: options.timeoutMs ?? this.#timeoutMs });
  }

  policy(options: CallOptions = {}): RetryPolicy | false {
    return retryPolicy(options.retry, this.#retry);
  }

  /**
   * One attempt: fetch, with failures as typed errors. The RateLimit fields are recorded.
   * `input` may be a Request (client.fetch builds one per attempt to carry a caller's Request).
   *
   * The client's own calls (a URL) never follow a redirect: a 307 or 308 would send their body
   * (the secret's hash, a refresh token, an owner's password) to wherever the answer points, and
   * the gateway never redirects them. The 3xx is then an answer without the envelope.
   */
  async attempt(scope: CallScope, input: URL | Request, init: RequestInit = {}): Promise<Response> {
    scope.check();
    let res: Response;
    try {
      res = await this.#fetch(input, { ...(input instanceof URL ? { redirect: 'manual' } : {}), ...init, signal: scope.signal });
    } catch (err) {
      if (scope.signal.aborted) throw scope.abortError();
      const origin = input instanceof URL ? input.origin : new URL(input.url).origin;
      throw new NetworkError({ code: 'network_error', description: `no answer from ${origin}: ${describe(err)}`, cause: err });
    }
    const info = parseRateLimit(res.headers);
    if (info !== undefined) {
      this.#rateLimit = info;
      try {
        this.#onRateLimit?.(info);
      } catch {
        // An observer's bug must not fail the call it observes (a sign-in under it, even).
      }
    }
    return res;
  }

  /**
   * Sends with the retry policy: `send` makes one attempt (so callers can set a fresh bearer
   * token per attempt). Returns the last answer, whatever its status; throws only when no
   * answer came, or when a Retry-After is longer than the policy allows (the answer's error).
   */
  async withRetries(scope: CallScope, policy: RetryPolicy | false, retryable: boolean, send: () => Promise<Response>): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const canRetry = retryable && policy !== false && attempt < policy.retries;
      let res: Response;
      try {
        res = await send();
      } catch (err) {
        if (!(err instanceof NetworkError) || !canRetry) throw err;
        const delay = backoff(policy, attempt);
        // As below: no wait past the deadline; the failure in hand says more than a TimeoutError.
        if (Date.now() + delay >= scope.deadline) throw err;
        await scope.sleep(delay);
        continue;
      }
      if (!canRetry || !RETRY_STATUSES.has(res.status)) return res;
      const retryAfter = parseRetryAfter(res.headers.get('retry-after'));
      if (retryAfter !== undefined && retryAfter > policy.maxRetryAfterMs) return res;
      const delay = retryAfter === undefined ? backoff(policy, attempt) : retryAfter + Math.random() * Math.min(1000, retryAfter * 0.25);
      // A wait that would outlast the deadline is not started: the answer in hand is the result.
      if (Date.now() + delay >= scope.deadline) return res;
      await res.body?.cancel().catch(() => {});
      await scope.sleep(delay);
    }
  }

  /** A JSON call answered in the envelope: the message, or the typed error. */
  async json<T>(call: JsonCall, options: CallOptions = {}): Promise<T> {
    const scope = this.scope(options);
    try {
      const url = this.url(call.path, call.query);
      const res = await this.withRetries(scope, this.policy(options), call.retryable ?? isIdempotent(call.method), () => {
        const headers: Record<string, string> = { accept: 'application/json' };
        if (call.form !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
        else if (call.body !== undefined) headers['content-type'] = 'application/json';
        const send = (proof?: string) => this.attempt(scope, url, {
          method: call.method,
          headers: proof === undefined ? headers : { ...headers, dpop: proof },
          body: call.form !== undefined ? new URLSearchParams(call.form).toString() : call.body === undefined ? undefined : JSON.stringify(call.body),
        });
        // A new proof per attempt: a retry with the same one would be refused as a replay.
        return call.dpop === true && this.dpop !== undefined ? this.dpop.send(call.method, url, undefined, true, send) : send();
      });
      return await readEnvelope<T>(res, scope);
    } finally {
      scope.end();
    }
  }
}

/** Full jitter: a random wait between 0 and base × 2^attempt, capped. */
function backoff(policy: RetryPolicy, attempt: number): number {
  return Math.random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}

/** The answer's text, refused (and its stream cancelled) once past MAX_ENVELOPE_BYTES. */
async function boundedText(res: Response): Promise<string> {
  const tooLarge = () => new UnexpectedResponseError({ code: 'unexpected_response', description: `an answer larger than ${MAX_ENVELOPE_BYTES} bytes is not the gateway's` });
  const declared = Number(res.headers.get('content-length'));
  if (declared > MAX_ENVELOPE_BYTES) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (res.body === null) return '';
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    size += value.byteLength;
    if (size > MAX_ENVELOPE_BYTES) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    text += decoder.decode(value, { stream: true });
  }
}

/**
 * The envelope's message on success; otherwise the typed error, with the status, the request
 * id (the header, or the envelope's on a 5xx), Retry-After and the RateLimit fields.
 */
export async function readEnvelope<T>(res: Response, scope?: CallScope): Promise<T> {
  const requestId = res.headers.get('x-request-id') ?? undefined;
  let text: string;
  try {
    text = await boundedText(res);
  } catch (err) {
    if (scope?.signal.aborted) throw scope.abortError();
    if (err instanceof UnexpectedResponseError) throw new UnexpectedResponseError({ code: err.code, description: err.description, status: res.status, requestId });
    throw new NetworkError({ code: 'network_error', description: `the answer broke off: ${describe(err)}`, status: res.status, requestId, cause: err });
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const envelope = body as { success?: unknown; message?: unknown } | undefined;
  if (envelope !== null && typeof envelope === 'object' && typeof envelope.success === 'boolean' && envelope.message !== null && typeof envelope.message === 'object') {
    if (envelope.success && res.ok) return envelope.message as T;
    const message = envelope.message as { code?: unknown; description?: unknown; requestId?: unknown };
    if (!envelope.success && typeof message.code === 'string') {
      throw apiErrorFor({
        status: res.status,
        code: message.code,
        description: typeof message.description === 'string' ? message.description : message.code,
        requestId: requestId ?? (typeof message.requestId === 'string' ? message.requestId : undefined),
        retryAfterMs: parseRetryAfter(res.headers.get('retry-after')),
        rateLimit: parseRateLimit(res.headers),
      });
    }
  }
  throw new UnexpectedResponseError({
    code: 'unexpected_response',
    description: `HTTP ${res.status} without the gateway's envelope${res.headers.get('content-type') === null ? '' : ` (${res.headers.get('content-type')})`}`,
    status: res.status,
    requestId,
  });
}
