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
  'accessToken',
  'refreshToken',
  'apiSecret',
  '*.accessToken',
  '*.refreshToken',
  '*.apiSecret',
  '*.pem',
];

/**
 * Standard output, written from a buffer without blocking: under load the lines written while
 * one write is in progress go out together, instead of one system call per request. pino
 * flushes it when the process exits.
 */
export function stdout(): DestinationStream {
  return pino.destination({ dest: 1, sync: false });
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT, censor: '[redacted]' },
    },
    destination,
  );
}
