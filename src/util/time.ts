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

export type TimestampParser = (text: string) => number | undefined;

const LOCAL_TIME = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;

/**
 * The reverse of the formatter: `YYYY-MM-DD HH:MM:SS` read as wall-clock time in `timeZone`,
 * to epoch ms; undefined for text that is not such a time or a date that does not exist.
 * The zone's offset is found by formatting a first guess and correcting once, which lands on
 * the right instant except inside a daylight-saving jump, where the earlier offset wins.
 */
export function createTimestampParser(timeZone: string): TimestampParser {
  const format = createTimestampFormatter(timeZone);
  const utc = timeZone === 'UTC' || timeZone === 'Etc/UTC';
  return (text) => {
    const wall = wallClockAsUtc(text);
    if (wall === undefined || utc) return wall;
    const offsetAt = (epochMs: number) => wallClockAsUtc(format(epochMs))! - epochMs;
    const guess = wall - offsetAt(wall);
    return wall - offsetAt(guess);
  };
}

function wallClockAsUtc(text: string): number | undefined {
  const m = LOCAL_TIME.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const epochMs = Date.UTC(year, month - 1, day, hour, minute, second);
  const d = new Date(epochMs);
  // Date.UTC rolls 2026-02-30 over into March: a date that does not exist is refused.
  if (d.getUTCFullYear() !== year || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) return undefined;
  return epochMs;
}
