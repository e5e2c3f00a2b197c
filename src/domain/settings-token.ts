/**
 * API settings tokens: `gwst_` + 43 base62 (256 random bits) + 6 base62 of the CRC32 of those
 * 43 characters. The prefix lets secret scanners find a leaked token; the checksum lets the
 * gateway (and a scanner) tell a token of ours from a typo or a made-up string without asking
 * any store, so a flood of junk tokens costs no round trip. The checksum is no protection
 * against forgery, which is the 256 random bits' job. A leaf: node:crypto and node:zlib only.
 */
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { BASE62, randomBase62 } from './random.js';

export const SETTINGS_TOKEN_PREFIX = 'gwst_';
const BODY_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
export const SETTINGS_TOKEN_LENGTH = SETTINGS_TOKEN_PREFIX.length + BODY_LENGTH + CHECKSUM_LENGTH;
/** What an owner is shown of a token to tell it apart: the prefix and 4 characters. */
const START_LENGTH = SETTINGS_TOKEN_PREFIX.length + 4;
const SHAPE = /^gwst_[0-9A-Za-z]{49}$/;

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

/** A new token; shown once to its creator, never stored. */
export function mintSettingsToken(): string {
  const body = randomBase62(BODY_LENGTH);
  return `${SETTINGS_TOKEN_PREFIX}${body}${checksum(body)}`;
}

/** Whether `token` has the shape and checksum of a settings token (not whether one exists). */
export function isWellFormedSettingsToken(token: string): boolean {
  if (token.length !== SETTINGS_TOKEN_LENGTH || !SHAPE.test(token)) return false;
  const body = token.slice(SETTINGS_TOKEN_PREFIX.length, SETTINGS_TOKEN_PREFIX.length + BODY_LENGTH);
  return checksum(body) === token.slice(SETTINGS_TOKEN_PREFIX.length + BODY_LENGTH);
}

/** What is stored instead of the token: "sha256:" + hex SHA-256 of the whole token string. */
export function settingsTokenDigest(token: string): string {
  return `sha256:${createHash('sha256').update(token, 'utf8').digest('hex')}`;
}

/** The first characters of a token, kept with it so an owner can tell tokens apart. */
export function settingsTokenStart(token: string): string {
  return token.slice(0, START_LENGTH);
}
