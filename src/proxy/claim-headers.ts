/**
 * A route's `identityHeaders` (docs/policies.md, "Claims to the backend"): headers named by the
 * route and filled from the caller's verified token claims. Like the built-in identity headers
 * (headers.ts), whatever a client sends under those names is removed on that route, so only
 * the gateway speaks with them.
 *
 * A value goes only as the claim holds it: a string, number or boolean, or a list of them
 * (joined with ", "). A claim that is absent, an object, or holds a character outside printable
 * ASCII (a line break, a NUL, non-ASCII text) is not sent at all, never altered or cut: a
 * backend either gets the claim or no header. test/proxy/policies.test.ts.
 */

/** Longest value sent; a longer claim is not sent. */
const MAX_VALUE_LENGTH = 4096;
const HEADER_SAFE = /^[\x20-\x7e]*$/;

export interface ClaimHeaders {
  /** The names, lower case: removed from every client request on the route. */
  readonly names: ReadonlySet<string>;
  /** The headers a caller with these claims sends to the backend, as [lower-case name, value]. */
  valuesFor(claims: Readonly<Record<string, unknown>> | undefined): [string, string][];
}

/** `headers`: header name → claim name, as the route gives it; undefined when it gives none. */
export function compileClaimHeaders(headers: Readonly<Record<string, string>> | undefined): ClaimHeaders | undefined {
  if (headers === undefined || Object.keys(headers).length === 0) return undefined;
  const pairs = Object.entries(headers).map(([name, claim]) => [name.toLowerCase(), claim] as const);
  return {
    names: new Set(pairs.map(([name]) => name)),
    valuesFor(claims) {
      const out: [string, string][] = [];
      if (claims === undefined) return out;
      for (const [name, claim] of pairs) {
        const value = headerValue(claims[claim]);
        if (value !== undefined) out.push([name, value]);
      }
      return out;
    },
  };
}

/** The claim as a header value, or undefined when it cannot be sent as it is. */
function headerValue(claim: unknown): string | undefined {
  let value: string;
  if (typeof claim === 'string') value = claim;
  else if (typeof claim === 'number' || typeof claim === 'boolean') value = String(claim);
  else if (Array.isArray(claim) && claim.length > 0 && claim.every((item) => ['string', 'number', 'boolean'].includes(typeof item))) value = claim.join(', ');
  else return undefined;
  // Leading or trailing space would be trimmed by the backend's parser (RFC 9110 §5.5): not the claim.
  if (value === '' || value.length > MAX_VALUE_LENGTH || !HEADER_SAFE.test(value) || value.trim() !== value) return undefined;
  return value;
}
