/**
 * `YYYY-MM-DD HH:MM:SS` in a configured IANA time zone, as the interface document writes
 * signedAt and signedExpiredAt. UTC takes the cheap path through toISOString.
 */
export type TimestampFormatter = (epochMs: number) => string;

export function createTimestampFormatter(timeZone: string): TimestampFormatter {
  if (timeZone === 'UTC' || timeZone === 'Etc/UTC') {
    return (epochMs) => new Date(epochMs).toISOString().slice(0, 19).replace('T', ' ');
  }
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
  return (epochMs) => {
    const p: Record<string, string> = {};
    for (const part of format.formatToParts(epochMs)) p[part.type] = part.value;
    return `${p.year!.padStart(4, '0')}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
  };
}
