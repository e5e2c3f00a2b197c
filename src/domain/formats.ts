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
