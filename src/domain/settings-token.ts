/**
 * API settings tokens: `gwst_` (`<family>st_`, domain/token-prefix.ts) + 43 base62 (256 random bits) + 6 base62 of the CRC32 of those
 * 43 characters. The prefix lets secret scanners find a leaked token; the checksum lets the
 * gateway (and a scanner) tell a token of ours from a typo or a made-up string without asking
 * any store, so a flood of junk tokens costs no round trip. The checksum is no protection
 * against forgery, which is the 256 random bits' job. A leaf: node:crypto and node:zlib only.
 */
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { BASE62, randomBase62 } from './random.js';
import { DEFAULT_TOKEN_FAMILY, familyOf, tokenPrefix } from './token-prefix.js';

/** The default family's prefix. */
export const SETTINGS_TOKEN_PREFIX = tokenPrefix(DEFAULT_TOKEN_FAMILY, 'settingsToken');
const BODY_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
/** The length of a token of the default family. */
export const SETTINGS_TOKEN_LENGTH = SETTINGS_TOKEN_PREFIX.length + BODY_LENGTH + CHECKSUM_LENGTH;
/** What an owner is shown of a token to tell it apart besides its prefix: 4 characters. */
const START_EXTRA = 4;
const BODY_SHAPE = /^[0-9A-Za-z]{49}$/;

/** CRC32 (at most 2^32 - 1 < 62^6) in 6 base62 digits, most significant first. */
function checksum(body: string): string {
  let value = crc32(body);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[value % 62]! + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** A new token of `family` (`tokens.prefix`); shown once to its creator, never stored. */
export function mintSettingsToken(family: string = DEFAULT_TOKEN_FAMILY): string {
  const body = randomBase62(BODY_LENGTH);
  return `${tokenPrefix(family, 'settingsToken')}${body}${checksum(body)}`;
}

/**
 * Whether `token` starts as a settings token of some family (`gwst_`, `acmest_`): how the bearer
 * check and the token endpoints tell one from a JWT (`eyJ…`) or a refresh token (`Wy…`).
 */
export function isSettingsTokenShaped(token: string): boolean {
  return familyOf(token, 'settingsToken') !== undefined;
}

/** Whether `token` has the shape and checksum of a settings token of any family (not whether one exists). */
export function isWellFormedSettingsToken(token: string): boolean {
  const family = familyOf(token, 'settingsToken');
  if (family === undefined) return false;
  const at = tokenPrefix(family, 'settingsToken').length;
  const rest = token.slice(at);
  if (!BODY_SHAPE.test(rest)) return false;
  return checksum(rest.slice(0, BODY_LENGTH)) === rest.slice(BODY_LENGTH);
}

/** What is stored instead of the token: "sha256:" + hex SHA-256 of the whole token string. */
export function settingsTokenDigest(token: string): string {
  return `sha256:${createHash('sha256').update(token, 'utf8').digest('hex')}`;
}

/** The first characters of a token, kept with it so an owner can tell tokens apart. */
export function settingsTokenStart(token: string): string {
  const family = familyOf(token, 'settingsToken') ?? DEFAULT_TOKEN_FAMILY;
  return token.slice(0, tokenPrefix(family, 'settingsToken').length + START_EXTRA);
}
