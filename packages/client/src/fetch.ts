/**
 * client.fetch: the platform's fetch for the gateway's proxied routes, with the bearer token.
 *
 * The token goes to the gateway only: any other origin, or a path outside the base URL's, is
 * refused before anything is sent. Redirects follow the platform's fetch, which drops the
 * Authorization header when a redirect leaves the origin (Node's fetch and current browsers).
 * Bodies stream both ways (a ReadableStream body is sent with `duplex: 'half'`; the answer is
 * the platform's Response, unread). A 401 invalid_token (or, with a DPoP key,
 * invalid_dpop_proof: a stored token bound to an earlier key) renews and replays once when the body
 * can be sent again; a stream cannot, so its 401 is returned as it came. The time limit runs
 * until the answer's headers arrive; the body is then the caller's, and the caller's signal
 * still cancels it.
 */
import { sendAuthorized } from './dpop.js';
import { ConfigurationError } from './errors.js';
import type { TokenManager } from './tokens.js';
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
    if (isStream(rest.body) && !canStreamBodies()) {
      throw new ConfigurationError({ code: 'stream_body_unsupported', description: 'this platform\'s fetch cannot send a ReadableStream body (Firefox and Safari cannot): pass a Blob, an ArrayBuffer or a string' });
    }
    const method = (rest.method ?? source?.method ?? 'GET').toUpperCase();
    // A Request's body is a stream, but a clone of the untouched original can be sent again.
    const pristine = source?.clone();
    const replayable = !isStream(rest.body);
    const scope = transport.scope({ signal: signal ?? source?.signal, timeoutMs, retry });
    let ok = false;
    try {
      const build = (authorization: Record<string, string>): Request => {
        const headers = new Headers(source?.headers);
        new Headers(rest.headers).forEach((value, name) => headers.set(name, value));
        // Whatever the caller put there, the credentials are this client's: never a mix of two.
        headers.delete('dpop');
        for (const [name, value] of Object.entries(authorization)) headers.set(name, value);
        const base = pristine === undefined ? url : pristine.clone();
        const withBody = rest.body !== undefined || (pristine?.body ?? null) !== null;
        return new Request(base, { ...rest, method, headers, ...(withBody ? { duplex: 'half' } : {}) } as RequestInit);
      };
      for (let replay = 0; ; replay++) {
        const { res, token: used } = await tokens.send(scope, transport.policy({ retry }), replayable && isIdempotent(method), (token) =>
          sendAuthorized(transport.dpop, method, url, token, replayable, (authorization) => transport.attempt(scope, build(authorization))));
        if (replay === 0 && replayable && !tokens.isSettingsToken && await isInvalidToken(res, transport.dpop !== undefined)) {
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

/**
 * Whether the platform's fetch can send a ReadableStream body. Firefox and Safari ignore
 * `duplex` and send the text "[object ReadableStream]" (with a text/plain type) instead: a
 * silent corruption, so such a body is refused there. (The detection of Chrome's article on
 * request streams; Chromium sends one over HTTP/2 only, and over HTTP/1.1 fetch fails, a
 * NetworkError.)
 */
function canStreamBodies(): boolean {
  let duplexRead = false;
  const probe = new Request('http://localhost/', {
    method: 'POST',
    body: new ReadableStream(),
    get duplex() {
      duplexRead = true;
      return 'half';
    },
  } as RequestInit);
  return duplexRead && !probe.headers.has('content-type');
}

/** 401 whose WWW-Authenticate or envelope says invalid_token (or invalid_dpop_proof, `dpop`); the answer itself stays unread. */
async function isInvalidToken(res: Response, dpop: boolean): Promise<boolean> {
  if (res.status !== 401) return false;
  const challenge = res.headers.get('www-authenticate') ?? '';
  if (/error="?invalid_token"?/.test(challenge) || (dpop && /error="?invalid_dpop_proof"?/.test(challenge))) return true;
  if (!(res.headers.get('content-type') ?? '').includes('json')) return false;
  try {
    const body = await res.clone().json() as { message?: { code?: unknown } };
    return body?.message?.code === 'invalid_token' || (dpop && body?.message?.code === 'invalid_dpop_proof');
  } catch {
    return false;
  }
}
