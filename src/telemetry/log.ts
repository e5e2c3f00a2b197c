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
