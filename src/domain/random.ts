/**
 * Random strings for the credentials the gateway makes (API keys and secrets, settings tokens,
 * invites, admin tokens): base62, so a double-click selects the whole token and no encoding is
 * needed in a URL, a header or a shell. Rejection sampling keeps every character equally likely.
 */
import { randomBytes } from 'node:crypto';

export const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `length` base62 characters: 43 of them carry 256 bits. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 × 62: bytes above it would favour the first characters.
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}
