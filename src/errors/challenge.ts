/**
 * The only formatter of WWW-Authenticate. RFC 6750 §3: a request without credentials gets the
 * realm alone; otherwise `error` and a description are added. `realm` is an RFC 9110
 * quoted-string, so quotes and backslashes are escaped; `error_description` may not contain
 * them at all (RFC 6750 §3: %x20-21 / %x23-5B / %x5D-7E), so anything else is dropped from it.
 * test/unit/challenge.test.ts parses the output back for arbitrary inputs.
 */
import type { ChallengeError } from './errors.js';

/** The realm of every challenge the gateway writes. */
export const REALM = 'gateway';

export interface Challenge {
  realm: string;
  error?: ChallengeError;
  description?: string;
  scope?: string;
}

/**
 * What error_description and scope may not hold (RFC 6750 §3: %x20-21 / %x23-5B / %x5D-7E;
 * a scope is scope tokens of the same characters but space, joined by spaces).
 */
const OUTSIDE_NQSCHAR = /[^\x20\x21\x23-\x5b\x5d-\x7e]/g;

export function formatBearerChallenge({ realm, error, description, scope }: Challenge): string {
  const params = [`realm=${quote(realm)}`];
  if (error !== undefined) {
    params.push(`error="${error}"`);
    if (description !== undefined) params.push(`error_description="${description.replace(OUTSIDE_NQSCHAR, '')}"`);
    if (scope !== undefined) params.push(`scope="${scope.replace(OUTSIDE_NQSCHAR, '')}"`);
  }
  return `Bearer ${params.join(', ')}`;
}

/** The challenge of a token endpoint's invalid_client (RFC 6749 §5.2, RFC 7617): the realm alone. */
export function formatBasicChallenge(realm: string): string {
  return `Basic realm=${quote(realm)}, charset="UTF-8"`;
}

/** RFC 6749 §5.2's error_description: the same characters as RFC 6750's (anything else dropped). */
export function oauthDescription(description: string): string {
  return description.replace(OUTSIDE_NQSCHAR, '');
}

/**
 * RFC 9449 §7.1: the DPoP scheme's challenge, `error` and its description as for Bearer, and
 * `algs`, the proof algorithms accepted (space-separated tokens). No realm: the same realm as
 * Bearer's would add nothing a client of DPoP reads.
 */
export function formatDpopChallenge({ error, description, algs }: Omit<Challenge, 'realm' | 'scope'> & { algs?: string | undefined }): string {
  const params: string[] = [];
  if (error !== undefined) {
    params.push(`error="${error}"`);
    if (description !== undefined) params.push(`error_description="${description.replace(OUTSIDE_NQSCHAR, '')}"`);
  }
  if (algs !== undefined) params.push(`algs="${algs.replace(OUTSIDE_NQSCHAR, '')}"`);
  return params.length === 0 ? 'DPoP' : `DPoP ${params.join(', ')}`;
}

/** RFC 9110 §5.6.4 quoted-string: escape `"` and `\`, drop control characters. */
function quote(value: string): string {
  return `"${value.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, '').replace(/["\\]/g, '\\$&')}"`;
}
