/**
 * Device cookies (OWASP, "Slow Down Online Guessing Attacks with Device Cookies"): a browser an
 * owner signed in from gets a cookie naming that owner's email, so that a stranger's failed
 * guesses at the email, which lock out clients without it, never lock out the owner's own
 * devices. The cookie is `<device id>.<expiry, epoch seconds>.<HMAC-SHA256>`, the MAC over the
 * three and the lowercase email: the email itself is not in the cookie, and a cookie only counts
 * for the email it was set for. It is no credential: it only decides which failure counters an
 * attempt is counted against (limits/rate-limits.ts, `ownerSignIn`), and a device's own failures
 * lock that device out (`limits.ownerSignIn.failuresPerDevice`).
 *
 * The key is `owner.deviceCookieSecret`, or a random one when unset (main.ts gives all workers
 * one; a cookie from another instance is then simply not known: the attempt counts as an
 * untrusted client's).
 * test/http/owner-sign-in-throttle.test.ts holds it.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '../domain/random.js';
import type { Clock } from '../util/clock.js';

/** 128 bits: the device counters' subject, and what an attacker would have to guess to share them. */
const DEVICE_ID_LENGTH = 22;
const COOKIE = /^([0-9A-Za-z]{22})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

export interface DeviceCookies {
  /** A new cookie value for a browser that just signed in as `email`. */
  issue(email: string): string;
  /** The device id of a cookie set for `email` and not expired; undefined for anything else. */
  deviceOf(cookie: string | undefined, email: string): string | undefined;
  /** How long a new cookie lasts: its Max-Age. */
  readonly maxAgeSeconds: number;
}

export function createDeviceCookies({ secret, days, clock }: { secret: string | undefined; days: number; clock: Clock }): DeviceCookies {
  const key = secret === undefined ? randomBytes(32) : Buffer.from(secret, 'utf8');
  const maxAgeSeconds = days * 86_400;
  const mac = (id: string, expires: string, email: string): Buffer =>
    createHmac('sha256', key).update(`gw-device-v1|${id}|${expires}|${email.toLowerCase()}`).digest();

  return {
    maxAgeSeconds,
    issue(email) {
      const id = randomBase62(DEVICE_ID_LENGTH);
      const expires = String(Math.floor(clock.now() / 1000) + maxAgeSeconds);
      return `${id}.${expires}.${mac(id, expires, email).toString('base64url')}`;
    },
    deviceOf(cookie, email) {
      const m = cookie === undefined ? null : COOKIE.exec(cookie);
      if (m === null) return undefined;
      const [, id, expires, presented] = m as unknown as [string, string, string, string];
      if (Number(expires) * 1000 <= clock.now()) return undefined;
      const given = Buffer.from(presented, 'base64url');
      const expected = mac(id, expires, email);
      return given.length === expected.length && timingSafeEqual(given, expected) ? id : undefined;
    },
  };
}
