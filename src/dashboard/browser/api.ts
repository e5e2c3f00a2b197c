/**
 * The owner API, as the dashboard calls it: JSON in the gateway's envelope, the session cookie
 * sent by the browser (same origin) with the CSRF token on every change, or the operator's
 * admin token as a bearer. Failures come back as one ApiError, with the envelope's code, its
 * sentence and the field at fault, so forms can show a message next to that field.
 */
export const OWNER_API = '/owner/v1';

export class ApiError extends Error {
  override name = 'ApiError';
  /** 0 when the gateway could not be reached or did not answer in the envelope. */
  readonly status: number;
  readonly code: string;
  readonly field: string | undefined;
  /** From Retry-After, on 429 and 503. */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, code: string, message: string, field?: string, retryAfterSeconds?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export type Credential = { kind: 'owner'; csrfToken: string } | { kind: 'operator'; token: string };

export type Query = Record<string, string | number | undefined>;

export interface Api {
  get<T>(path: string, query?: Query): Promise<T>;
  send<T>(method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T>;
}

export interface ApiOptions {
  /** Who calls: read at each call, so a sign-in or sign-out takes effect at once. */
  credential(): Credential | undefined;
  /** Told when the gateway says the session (or admin token) is no longer good. */
  onSignedOut(error: ApiError): void;
}

export function createApi({ credential, onSignedOut }: ApiOptions): Api {
  async function call<T>(method: string, path: string, query: Query | undefined, body: unknown): Promise<T> {
    // A value from the address bar (a sign record's address) goes into the path escaped, but
    // escaping leaves "." and "..", which the URL would resolve: ?address=.. would ask for the
    // account instead of a record. No owner API name is a dot segment, so none is asked for.
    if (path.split('/').some((segment) => /^(?:\.|%2e){1,2}$/i.test(segment))) {
      throw new ApiError(400, 'invalid_request', 'There is nothing to look up by that name: "." and ".." are not names.');
    }
    const url = new URL(`${OWNER_API}${path}`, location.origin);
    for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined && value !== '') url.searchParams.set(name, String(value));
    const headers: Record<string, string> = { accept: 'application/json' };
    const who = credential();
    if (who?.kind === 'operator') headers.authorization = `Bearer ${who.token}`;
    if (who?.kind === 'owner' && method !== 'GET') headers['x-csrf-token'] = who.csrfToken;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(url, { method, headers, credentials: 'same-origin', cache: 'no-store', redirect: 'error', ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    } catch {
      throw new ApiError(0, 'network_error', 'The gateway could not be reached. Check the connection and try again.');
    }
    let envelope: { success?: unknown; message?: unknown };
    try {
      envelope = await res.json() as typeof envelope;
    } catch {
      throw new ApiError(res.status, 'unexpected_response', `The gateway answered ${res.status} without its usual JSON.`);
    }
    if (res.ok && envelope.success === true) return envelope.message as T;
    const message = (envelope.message ?? {}) as { code?: unknown; description?: unknown; field?: unknown };
    const retryAfter = Number(res.headers.get('retry-after'));
    const error = new ApiError(
      res.status,
      typeof message.code === 'string' ? message.code : 'unexpected_response',
      typeof message.description === 'string' ? message.description : `The gateway answered ${res.status}.`,
      typeof message.field === 'string' ? message.field : undefined,
      Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
    );
    // A session that ended (idle, signed out elsewhere, password changed) or an admin token
    // no longer configured: the dashboard goes back to sign-in, saying why.
    if (res.status === 401 && (error.code === 'session_required' || (who?.kind === 'operator' && error.code === 'invalid_credentials'))) onSignedOut(error);
    throw error;
  }
  return {
    get: (path, query) => call('GET', path, query, undefined),
    send: (method, path, body) => call(method, path, undefined, body),
  };
}

/** A sentence for a failure, as a person should read it (the gateway's own where it is clear). */
export function describeError(error: unknown): string {
  if (!(error instanceof ApiError)) return 'Something went wrong in the dashboard. Reload the page and try again.';
  switch (error.code) {
    case 'store_unavailable':
      return 'The gateway\'s store is unavailable right now, so nothing was changed. Try again in a moment.';
    case 'overloaded':
      return `The gateway is busy checking other passwords. Try again in ${error.retryAfterSeconds ?? 1} seconds.`;
    case 'rate_limited':
      return `Too many attempts. Try again in ${error.retryAfterSeconds ?? 60} seconds.`;
    case 'session_required':
      return 'Your session has ended. Sign in again.';
    case 'csrf_failed':
      return 'The gateway refused this change as coming from another page. Reload the page and try again.';
    case 'read_only_store':
      return 'This gateway does not write this store, so these objects are read-only here.';
    case 'not_found':
      return 'This does not exist, or it is not yours to see.';
    default:
      return error.message;
  }
}
