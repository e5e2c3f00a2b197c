/**
 * How the gateway's identifiers are spelt, wherever they come from: the data file, Redis, a
 * refresh-token handle, a route's config, the CLI, a query parameter. One definition each, so
 * a value accepted in one place is accepted in all. A leaf: it imports nothing of ours, and
 * every layer may import it.
 */

/** Account and key ids travel inside tokens, store key names and log lines: plain characters only. */
export const ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;
/** ID_PATTERN in words, for the messages that refuse an id. */
export const ID_SPELLING = '1 to 128 of A-Z a-z 0-9 . _ : @ -';

/** A scope token (RFC 6749 §3.3): printable ASCII without space, quote or backslash. */
export const SCOPE_PATTERN = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/;

/** A sign record's address: 0x and 40 hex digits, in either case (lookups are case-insensitive). */
export const ADDRESS_PATTERN = /^0x[0-9a-fA-F]{40}$/;

/**
 * What no text the gateway keeps may hold (descriptions, names, emails, passwords…): NUL and the
 * other control characters but tab and line breaks (an ESC sequence acts on the terminal of
 * whoever lists it with gatewayctl), and bidi controls (U+202E shows the text backwards). Lone
 * surrogates are refused beside it (`isWellFormed`): they are not text, UTF-8 cannot keep them,
 * and Redis's Lua JSON reader cannot decode the `\udc00` that JSON.stringify writes for one, which
 * made an account with one in a description unreadable to every script (issue 26).
 */
export const UNSAFE_IN_TEXT = /[\0-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;
/** UNSAFE_IN_TEXT in words, for the messages that refuse text. */
export const SAFE_TEXT_SPELLING = 'text without NUL or other control characters, bidi controls or lone surrogates';

/**
 * What no name may hold besides: any control character (a line break forges a row of a
 * listing), line and paragraph separators (U+2028, U+2029) and the invisible tag characters
 * (U+E0000–U+E007F, which hide text inside a name that looks like another).
 */
export const UNSAFE_IN_NAME = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\u{E0000}-\u{E007F}]/u;
/** UNSAFE_IN_NAME in words. */
export const SAFE_NAME_SPELLING = 'one line of text without control characters, line or paragraph separators, bidi controls, tag characters or lone surrogates';

/** True when `text` may be kept as a description (see UNSAFE_IN_TEXT). */
export function isSafeText(text: string): boolean {
  return text.isWellFormed() && !UNSAFE_IN_TEXT.test(text);
}

/** True when `text` may be kept as a name (see UNSAFE_IN_NAME). */
export function isSafeName(text: string): boolean {
  return text.isWellFormed() && !UNSAFE_IN_NAME.test(text);
}
