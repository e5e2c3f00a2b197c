/**
 * Three small helpers of http-proxy-3's outgoing request, owned here: the package exports only
 * its server (`ProxyServer`, `createProxyServer`), and these live in its compiled internals
 * (`dist/lib/http-proxy/common.js`), whose path and shape may change in any release. Copied
 * from http-proxy-3 2.0 (MIT) with their behaviour kept: flight.ts sends requests as the
 * library's web pass would (the same path and the same connect timeout), and the library still
 * sends WebSocket handshakes itself, so the two ways must join paths alike.
 * test/proxy/outgoing.test.ts holds them to the library's own functions.
 */
import type { Socket } from 'node:net';

/**
 * A target's path joined with the request's (http-proxy-3's `urlJoin`): the segments
 * concatenated, one slash between two where they meet (`/a/` + `/b` is `/a/b`), other runs of
 * slashes kept as sent (`//x///y` is a valid path), empty segments dropped, and the query
 * strings of all segments merged with `&` in order (no `?` when none has one).
 */
export function urlJoin(...segments: string[]): string {
  const queries: string[] = [];
  const paths = segments.map((segment) => {
    const start = segment.indexOf('?');
    if (start === -1) return segment;
    queries.push(segment.slice(start + 1));
    return segment.slice(0, start);
  });
  let joined = '';
  for (const path of paths) {
    if (path === '') continue;
    if (joined.endsWith('/')) joined += path.startsWith('/') ? path.slice(1) : path;
    else joined += path.startsWith('/') ? path : `/${path}`;
  }
  const query = queries.filter(Boolean).join('&');
  return query === '' ? joined : `${joined}?${query}`;
}

/**
 * The path and query of a target URL as http-proxy-3's `setupOutgoing` reads them (its `getPath`
 * over `toURL`): "" and a bare query stay as they are; anything else is parsed as a URL relative
 * to a placeholder origin (a leading `//` taken as a path, not as a host), so dot segments are
 * resolved and characters escaped as WHATWG URL does.
 */
export function outgoingPath(text: string): string {
  if (text === '' || text.startsWith('?')) return text;
  const url = new URL(text.startsWith('//') ? `http://base.invalid${text}` : text, 'http://base.invalid');
  return `${url.pathname}${url.search}`;
}

/**
 * Arms the connect timeout on a socket still connecting (http-proxy-3's `setupConnectTimeout`):
 * after `timeoutMs` without `connect` it is destroyed with an `ECONNECT_TIMEOUT` error. A pooled
 * socket is already connected and is left alone; `connect`, `error` or `close` disarms it. 0 or
 * less: no timeout. The timer is unref'd: it never keeps the process alive by itself.
 */
export function setupConnectTimeout(socket: Socket, timeoutMs: number | undefined): void {
  if (!timeoutMs || !socket.connecting) return;
  let timer: NodeJS.Timeout | undefined;
  const disarm = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    socket.off('connect', disarm);
    socket.off('error', disarm);
    socket.off('close', disarm);
  };
  timer = setTimeout(() => {
    disarm();
    socket.destroy(Object.assign(new Error('ECONNECT_TIMEOUT'), { code: 'ECONNECT_TIMEOUT' }));
  }, timeoutMs);
  timer.unref();
  socket.once('connect', disarm);
  socket.once('error', disarm);
  socket.once('close', disarm);
}
