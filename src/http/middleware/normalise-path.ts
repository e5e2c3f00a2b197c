/**
 * Every route, the gateway's own and the proxied ones, is matched on one normalised path, and
 * the proxied request carries that same path: whatever a client spells, the gateway and the
 * backend read it alike, so no spelling can reach a route while skipping its authentication.
 *
 * Normalising (RFC 3986 §6.2.2): percent-escapes of unreserved characters are decoded (`%2e`
 * is a dot, `%41` an A), the others written in upper case; `.` and `..` segments are resolved;
 * empty segments (`//`) are dropped. Refused with 400, because backends disagree about them:
 * - an encoded `/` or `\` (`%2F`, `%5C`) or NUL, a raw `\` (some servers read it as `/`), and
 *   `#` (a fragment has no place in a request, and URL parsers drop what follows it);
 * - a dot segment with parameters (`..;/`: Tomcat and others resolve it as `..`);
 * - `..` above the root;
 * - a request target that is not origin-form (`http://host/path`, `*`): this is not a forward
 *   proxy, and a second authority beside Host is one more thing to disagree about.
 * Case is kept; proxied prefixes compare without case (proxy/routes.ts). Run for every request
 * as a step of the edge (http/edge.ts).
 */
import { InvalidRequest } from '../../errors/errors.js';

/** Already normal: no escapes, no backslash, no dot segment, no empty segment. */
const PLAIN = /^(?:\/(?!\.{1,2}(?:[/;]|$))[^/%\\#]+)*\/?$/;
const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** A request target with its path normalised and its query untouched. */
export function normaliseUrl(url: string): string {
  // Anywhere in the target: URL parsers on the way to a backend would cut the rest off.
  if (url.includes('#')) throw new InvalidRequest('A "#" is not allowed in the request target.');
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  if (PLAIN.test(path)) return url;
  const normal = normalise(path);
  return q === -1 ? normal : normal + url.slice(q);
}

/** The normal form of an origin-form path; InvalidRequest when it has none. */
export function normalise(path: string): string {
  if (!path.startsWith('/')) throw new InvalidRequest('The request target must be a path starting with "/".');
  if (path.includes('\\') || path.includes('#')) throw new InvalidRequest('A backslash or "#" is not allowed in the path.');
  const out: string[] = [];
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const segment = decodeUnreserved(segments[i]!);
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (out.pop() === undefined) throw new InvalidRequest('The path climbs above the root.');
      continue;
    }
    if (/^\.\.?;/.test(segment)) throw new InvalidRequest('A dot segment with parameters is not allowed in the path.');
    out.push(segment);
  }
  const last = segments[segments.length - 1]!;
  // A trailing slash is meaningful to many backends; a trailing dot segment ends in one too.
  const trailing = out.length > 0 && (last === '' || /^(?:\.|\.\.|%2e|\.%2e|%2e\.|%2e%2e)$/i.test(last));
  return `/${out.join('/')}${trailing ? '/' : ''}`;
}

function decodeUnreserved(segment: string): string {
  if (!segment.includes('%')) return segment;
  return segment.replace(/%(.?.?)/g, (_, hex: string) => {
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw new InvalidRequest('The path has a malformed percent-escape.');
    const code = Number.parseInt(hex, 16);
    if (code === 0x2f || code === 0x5c || code === 0) throw new InvalidRequest('An encoded "/", "\\" or NUL is not allowed in the path.');
    const char = String.fromCharCode(code);
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
}
