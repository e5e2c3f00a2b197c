/**
 * client.fetch: the platform's fetch for the gateway's proxied routes, with the bearer token.
 *
 * The token goes to the gateway only: any other origin, or a path outside the base URL's, is
 * refused before anything is sent. Redirects follow the platform's fetch, which drops the
 * Authorization header when a redirect leaves the origin (Node's fetch and current browsers). Bodies stream both ways (a ReadableStream body is sent with `duplex: 'half'`; the answer
 * is the platform's Response, unread). A 401 invalid_token renews and replays once when the body
 * can be sent again; a stream cannot, so its 401 is returned as it came. The time limit runs
 * until the answer's headers arrive; the body is then the caller's, and the caller's signal
 * still cancels it.
 */
import { ConfigurationError } from './errors.js';
import { RenewalFailure, type TokenManager } from './tokens.js';
import { isIdempotent, type Transport } from './transport.js';
import type { GatewayRequestInit } from './types.js';

export type GatewayFetch = (input: string | URL | Request, init?: GatewayRequestInit) => Promise<Response>;

export function gatewayFetch(transport: Transport, tokens: TokenManager): GatewayFetch {
  return async (input, init = {}) => {
    const { timeoutMs, retry, signal, ...rest } = init;
    const source = input instanceof Request ? input : undefined;
    const url = source !== undefined ? new URL(source.url)
      : input instanceof URL ? input
        : /^[a-z][a-z\d+.-]*:/i.test(input as string) ? new URL(input as string) : transport.url(input as string);
    // Under the base URL's path too: on an origin shared with other applications (a gateway
    // mounted at https://host/gw/), '../admin' or an absolute URL elsewhere is not the gateway.
    if (url.origin !== transport.baseUrl.origin || !url.pathname.startsWith(transport.baseUrl.pathname)) {
      throw new ConfigurationError({ code: 'foreign_origin', description: `client.fetch sends the bearer token under ${transport.baseUrl.href} only, not to ${url.origin}${url.pathname}` });
    }
    const method = (rest.method ?? source?.method ?? 'GET').toUpperCase();
    // A Request's body is a stream, but a clone of the untouched original can be sent again.
    const pristine = source?.clone();
    const replayable = rest.body === undefined || rest.body === null || !isStream(rest.body);
    const scope = transport.scope({ signal: signal ?? source?.signal, timeoutMs, retry });
    let ok = false;
    try {
      const build = (token: string): Request => {
        const headers = new Headers(source?.headers);
        new Headers(rest.headers).forEach((value, name) => headers.set(name, value));
        // Whatever the caller put there, the bearer is this client's: never a mix of two.
        headers.set('authorization', `Bearer ${token}`);
        const base = pristine === undefined ? url : pristine.clone();
        const withBody = rest.body !== undefined || (pristine?.body ?? null) !== null;
        return new Request(base, { ...rest, method, headers, ...(withBody ? { duplex: 'half' } : {}) } as RequestInit);
      };
      for (let replay = 0; ; replay++) {
        let used = '';
        const res = await transport.withRetries(scope, transport.policy({ retry }), replayable && isIdempotent(method), async () => {
          used = await tokens.bearer(scope);
          return transport.attempt(scope, build(used));
        }).catch((err: unknown) => { throw err instanceof RenewalFailure ? err.error : err; });
        if (replay === 0 && replayable && !tokens.isSettingsToken && await isInvalidToken(res)) {
          tokens.refused(used);
          await res.body?.cancel().catch(() => {});
          continue;
        }
        ok = true;
        return res;
      }
    } finally {
      if (ok) scope.stopTimer();
      else scope.end();
    }
  };
}

function isStream(body: unknown): boolean {
  return (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream)
    || (typeof body === 'object' && body !== null && Symbol.asyncIterator in body);
}

/** 401 whose WWW-Authenticate or envelope says invalid_token; the answer itself stays unread. */
async function isInvalidToken(res: Response): Promise<boolean> {
  if (res.status !== 401) return false;
  if (/error="?invalid_token"?/.test(res.headers.get('www-authenticate') ?? '')) return true;
  if (!(res.headers.get('content-type') ?? '').includes('json')) return false;
  try {
    const body = await res.clone().json() as { message?: { code?: unknown } };
    return body?.message?.code === 'invalid_token';
  } catch {
    return false;
  }
}
