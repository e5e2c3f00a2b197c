/**
 * `YYYY-MM-DD HH:MM:SS` in a configured IANA time zone, as the interface document writes
 * signedAt and signedExpiredAt. UTC takes the cheap path through toISOString.
 */
export type TimestampFormatter = (epochMs: number) => string;

export function createTimestampFormatter(timeZone: string): TimestampFormatter {
  if (isUtc(timeZone)) {
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

function isUtc(timeZone: string): boolean {
  return timeZone === 'UTC' || timeZone === 'Etc/UTC';
}

export type TimestampParser = (text: string) => number | undefined;

const LOCAL_TIME = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;

/**
 * The reverse of the formatter: `YYYY-MM-DD HH:MM:SS` read as wall-clock time in `timeZone`,
 * to epoch ms; undefined for text that is not such a time or a date that does not exist.
 * Near a change of offset (daylight saving), a wall time that happens twice reads as the
 * first, and one skipped by the change reads with the offset in force before it (02:30 in a
 * spring-forward gap becomes 03:30 after it), as Temporal's "compatible" choice does.
 */
export function createTimestampParser(timeZone: string): TimestampParser {
  const format = createTimestampFormatter(timeZone);
  const utc = isUtc(timeZone);
  const offsetAt = (epochMs: number) => wallClockAsUtc(format(epochMs))! - Math.floor(epochMs / 1000) * 1000;
  return (text) => {
    const wall = wallClockAsUtc(text);
    if (wall === undefined || utc) return wall;
    // Offsets change at most once within a day on either side: these are the candidates.
    const before = wall - offsetAt(wall - DAY_MS);
    const after = wall - offsetAt(wall + DAY_MS);
    if (before === after) return before;
    const reads = (epochMs: number) => format(epochMs) === text;
    return reads(before) || !reads(after) ? before : after;
  };
}

const DAY_MS = 86_400_000;

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
