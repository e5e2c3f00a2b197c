/**
 * The gateway's logger: pino, JSON lines on stdout. Redaction is a second line of defence:
 * call sites never pass secrets or tokens, and these paths censor them if one slips through.
 */
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

const REDACT = [
  'authorization',
  '*.authorization',
  '*.headers.authorization',
  '*.headers.cookie',
  // A DPoP proof is single use and names its token only by hash, but it is a credential's part.
  '*.headers.dpop',
  'accessToken',
  'refreshToken',
  'apiSecret',
  '*.accessToken',
  '*.refreshToken',
  '*.apiSecret',
  '*.pem',
  // Second factors (owner/totp.ts): a TOTP secret, a code, recovery codes.
  'otp',
  '*.otp',
  '*.totp.secret',
  '*.pendingTotp.secret',
  'recoveryCodes',
  '*.recoveryCodes',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: isoTime,
      redact: { paths: REDACT, censor: '[redacted]' },
    },
    destination,
  );
}

/**
 * pino's isoTime, `,"time":"2026-11-22T07:18:58.377Z"`, without formatting a Date for every
 * line: the part up to the second is made once a second. One access-log line per proxied
 * request made toISOString about 1 % of the gateway's CPU (bench/README.md).
 */
export function isoTime(now: number = Date.now()): string {
  const second = Math.floor(now / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedPrefix = `,"time":"${new Date(second * 1000).toISOString().slice(0, 20)}`;
  }
  const ms = now - second * 1000;
  return `${cachedPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}

let cachedSecond = Number.NaN;
let cachedPrefix = '';
